package gateway

import (
	"context"
	"strings"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/store"
)

// Devices that are away: frames that should wake a person are pushed to
// each registered device with no live connection, and cron jobs post into
// their channels.

// wakes reports whether an event should wake a person, and what to say.
func wakes(ev *core.Event) (push.Note, bool) {
	n := push.Note{ChatID: ev.Lane.ChatID, ThreadID: ev.Lane.ThreadID, Cursor: ev.Cursor, Collapse: ev.Lane.String()}
	switch ev.Type {
	case core.EvMessageStop:
		// A reply of files alone is news too: the push names them.
		if ev.Message == nil || (strings.TrimSpace(ev.Message.Text) == "" && len(ev.Message.Media) == 0) {
			return n, false
		}
		n.Kind, n.Title, n.Body = "message", "Agent", ev.Message.Text
		if strings.TrimSpace(n.Body) == "" {
			n.Body = mediaBody(*ev.Message)
		}
	case core.EvMessage:
		if ev.Message == nil {
			return n, false
		}
		switch ev.Message.Role {
		case core.RoleAssistant:
			n.Kind, n.Title = "message", "Agent"
		case core.RoleCron:
			n.Kind, n.Title = "cron", "Cron"
		default:
			return n, false
		}
		n.Body = ev.Message.Text
		if strings.TrimSpace(n.Body) == "" {
			n.Body = mediaBody(*ev.Message) // a delivered file without a caption
		}
	case core.EvNotification:
		if ev.Notification == nil {
			return n, false
		}
		n.Kind, n.Title, n.Body = "notification", ev.Notification.Title, ev.Notification.Body
	case core.EvPicker:
		if ev.Picker == nil {
			return n, false
		}
		n.Kind, n.Title, n.Body = "picker", ev.Picker.Title, ev.Picker.Command
		if n.Body == "" {
			n.Body = "Your answer is needed"
		}
	default:
		return n, false
	}
	return n, ev.Cursor > 0
}

// pushLoop feeds wake-worthy events to the pusher off the commit path, so
// a slow queue never delays delivery.
func (g *Gateway) pushLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-g.toPush:
			n, _ := wakes(ev)
			devs, err := g.st.PushDevices(ctx)
			if err != nil {
				continue
			}
			for _, d := range devs {
				if d.ID == ev.NotTo || g.hub.Online(d.ID) {
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
	if _, ok := wakes(ev); !ok {
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

// RunCron runs a job and posts its output into its channel as a cron
// message with a notification.
func (g *Gateway) RunCron(ctx context.Context, j store.CronJob) error {
	lk := core.Lane{ChatID: j.ChatID, ThreadID: j.ThreadID}
	if _, err := g.resolveLane(ctx, &lk); err != nil {
		return err
	}
	text := j.Text
	if text == "" {
		g.commit(ctx, nil, &core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "cron"})
		var b strings.Builder
		err := g.cfg.Agent.Run(ctx, agent.Turn{
			Lane: lk, Input: j.Prompt, Cwd: g.cfg.Workdir, Asker: laneAsker{g: g, lane: lk}, Cron: agentCron{g},
			Settings: g.agentSettings(lk, g.settings(ctx, lk)),
		}, func(e agent.Event) {
			switch e.Kind {
			case agent.Text:
				b.WriteString(e.Text)
			case agent.TextIsCommentary:
				b.Reset()
			}
		})
		g.commit(context.Background(), nil, &core.Event{Type: core.EvAgentIdle, Lane: lk})
		if err != nil {
			g.systemMessage(context.Background(), lk, "Cron job "+j.Name+" failed: "+err.Error())
			return err
		}
		text = b.String()
	}
	if strings.TrimSpace(text) == SilentReply || strings.TrimSpace(text) == "" {
		return nil
	}
	m := core.Message{ID: core.NewID("m_"), Lane: lk, Role: core.RoleCron, Text: text, Model: "cron: " + j.Name, TS: time.Now().UnixMilli()}
	if err := g.commit(ctx, func(tx *store.Tx) error { return tx.InsertMessage(m, false) },
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
