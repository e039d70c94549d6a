package gateway

import (
	"context"
	"strings"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/store"
)

// Devices that are away: frames that should wake a person are pushed to
// each registered device with no live connection, and cron jobs post into
// their channels.

// wakes reports whether an event should wake a person, and what to say.
// What the person must answer (the agent's approvals and questions) is a
// picker push, the most urgent; cron posts and deliveries say so in their
// kind. A picker a device opened for itself with a command (/model,
// /reasoning, /fast, /new) wakes nobody: the device that asked is there,
// and no other device needs to be called for it. channel names a chat,
// for a delivery's title (nil: not needed, only whether it wakes).
func wakes(ev *core.Event, channel func(chatID string) string) (push.Note, bool) {
	n := push.Note{ChatID: ev.Lane.ChatID, ThreadID: ev.Lane.ThreadID, Cursor: ev.Cursor, Collapse: ev.Lane.String()}
	switch ev.Type {
	case core.EvMessageStop:
		// A reply of files alone is news too: the push names them.
		if ev.Message == nil || (strings.TrimSpace(ev.Message.Text) == "" && len(ev.Message.Media) == 0) {
			return n, false
		}
		n.Kind, n.Title, n.Body, n.MessageID = push.KindMessage, "Agent", ev.Message.Text, ev.Message.ID
		if strings.TrimSpace(n.Body) == "" {
			n.Body = mediaBody(*ev.Message)
		}
	case core.EvMessage:
		if ev.Message == nil {
			return n, false
		}
		switch ev.Message.Role {
		case core.RoleAssistant:
			n.Kind, n.Title = push.KindMessage, "Agent"
		case core.RoleCron:
			// Titled as its notification is: a cron post with its job's
			// name (its model is "cron: NAME"), a delivery (irisgate send,
			// POST /api/send: no job, the wire's model "delivery") with
			// its channel's.
			n.Kind, n.Title = push.KindCron, "Cron"
			if job, ok := strings.CutPrefix(ev.Message.Model, "cron: "); ok && strings.TrimSpace(job) != "" {
				n.Title = job
			} else if channel != nil {
				if name := channel(ev.Lane.ChatID); name != "" {
					n.Title = name
				}
			}
		default:
			return n, false
		}
		n.Body, n.MessageID = ev.Message.Text, ev.Message.ID
		if strings.TrimSpace(n.Body) == "" {
			n.Body = mediaBody(*ev.Message) // a delivered file without a caption
		}
	case core.EvNotification:
		if ev.Notification == nil {
			return n, false
		}
		n.Kind, n.Title, n.Body = push.KindNotification, ev.Notification.Title, ev.Notification.Body
		switch ev.Notification.Kind {
		case "approval", "clarify": // the notification of an agent's picker
			n.Kind = push.KindPicker
		case "cron": // of a cron post or a delivery: titled with the job or channel
			n.Kind = push.KindCron
		}
	case core.EvPicker:
		if ev.Picker == nil || !agentAsks(ev.Picker.Kind) {
			return n, false
		}
		n.Kind, n.Title, n.Body = push.KindPicker, ev.Picker.Title, ev.Picker.Command
		if n.Body == "" {
			n.Body = "Your answer is needed"
		}
	default:
		return n, false
	}
	return n, ev.Cursor > 0
}

// agentAsks reports whether a picker kind is the agent asking the person
// (approval, clarify), as opposed to a command's menu.
func agentAsks(kind string) bool { return kind == "approval" || kind == "clarify" }

// checkPushAddresses checks the addresses a device registers ("": none).
func checkPushAddresses(fcmToken, ntfyTopic string) *core.Error {
	if fcmToken != "" {
		if err := push.ValidFCMToken(fcmToken); err != nil {
			return ErrFCMToken.New(err)
		}
	}
	if ntfyTopic != "" {
		if err := push.ValidNtfyTopic(ntfyTopic); err != nil {
			return ErrNtfyTopic.New(err)
		}
	}
	return nil
}

// pushLoop feeds wake-worthy events to the pusher off the commit path, so
// a slow queue never delays delivery.
func (g *Gateway) pushLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-g.toPush:
			n, _ := wakes(ev, func(chatID string) string {
				ch, err := g.st.Channel(ctx, chatID)
				if err != nil {
					return ""
				}
				return ch.Name
			})
			devs, err := g.st.PushDevices(ctx)
			if err != nil {
				continue
			}
			for _, d := range devs {
				if d.ID == ev.NotTo || g.hub.Reachable(d.ID) {
					continue
				}
				if err := g.cfg.Pusher.Enqueue(ctx, d.ID, n); err != nil && ctx.Err() == nil {
					g.log.Warn("queueing a push", "device", d.ID, "err", err)
				}
			}
		}
	}
}

// notePush hands a committed event to pushLoop when it should wake someone.
func (g *Gateway) notePush(ev *core.Event) {
	if !g.cfg.Pusher.Enabled() {
		return
	}
	if _, ok := wakes(ev, nil); !ok {
		return
	}
	select {
	case g.toPush <- ev:
	default:
		g.log.Warn("push feed full: a push was skipped", "cursor", ev.Cursor)
	}
}

// SilentReply is what a cron prompt's answer says to deliver nothing.
const SilentReply = "[SILENT]"

// RunCron runs job j (a cron.Runner). A fixed text is posted at once. A
// prompt becomes a turn of the job's lane, a cron turn: queued behind what
// runs there, announced by agent.busy (reason cron) and agent.idle, ended by
// agent.stop like any turn. RunCron returns once it is queued; done gets its
// outcome when it ends.
//
// The cron turn is owed in the turn table from the moment it is queued. If
// the gateway stops before it starts, the scheduler makes the job due again
// at the next start (cron.Scheduler.Run), where it collapses with a run
// missed meanwhile. If it stops while the turn runs, the turn is not run
// again: the gateway's start-up recovery ends it with an agent.idle, as it
// does a person's turn.
func (g *Gateway) RunCron(ctx context.Context, j store.CronJob, done func(error)) error {
	if done == nil {
		done = func(error) {}
	}
	// Until recovery has settled the turn table, a cron turn started now
	// would be taken for one the last run left running.
	select {
	case <-g.recovered:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.recoverErr != nil {
		return g.recoverErr
	}
	lk := core.Lane{ChatID: j.ChatID, ThreadID: j.ThreadID}
	if _, err := g.resolveLane(ctx, &lk); err != nil {
		return err
	}
	if j.Text != "" {
		if err := g.postCron(ctx, lk, j, j.Text); err != nil {
			return err
		}
		done(nil)
		return nil
	}
	return g.turns.EnqueueCron(ctx, lk, j, done)
}

// postCron posts a job's output into its lane as a cron message with a
// notification. An answer of exactly [SILENT] (or nothing) posts nothing.
func (g *Gateway) postCron(ctx context.Context, lk core.Lane, j store.CronJob, text string) error {
	if strings.TrimSpace(text) == SilentReply || strings.TrimSpace(text) == "" {
		return nil
	}
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleCron, Text: text, Model: "cron: " + j.Name, TS: time.Now().UnixMilli()}
	if err := g.commit(ctx, func(tx store.Tx) error { return tx.InsertMessage(m, false) },
		&core.Event{Type: core.EvMessage, Lane: lk, Message: &m}); err != nil {
		return err
	}
	n := &core.Notification{Kind: "cron", Title: j.Name, Body: firstLine(text, 140), TS: m.TS}
	return g.commit(ctx, nil, &core.Event{Type: core.EvNotification, Lane: lk, Notification: n})
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
