package turn

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// SystemMessage posts a message from the gateway itself into a lane. It is
// outboxed (devices that were away learn of it) but kept out of history,
// which holds the conversation.
func (r *Runner) SystemMessage(ctx context.Context, lk core.Lane, text string) {
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleSystem, Text: text, TS: time.Now().UnixMilli()}
	if err := r.c.Commit(ctx, nil, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m}); err != nil {
		r.log.Error("system message", "lane", lk.String(), "err", err)
	}
}

// NoteCutOff says in lk that the turn answering input was cut off before
// its reply began (the gateway or replica running it stopped) and is not
// run again: without the note the person sees the agent go idle and no
// answer, and does not know to send it again.
func (r *Runner) NoteCutOff(ctx context.Context, lk core.Lane, input string) {
	r.SystemMessage(ctx, lk, "⚠️ The agent was cut off before it answered “"+clip(input, 80)+
		"”: the gateway running it stopped. It is not run again by itself, since its tools may have done part of it; send it again to retry.")
}

// SettleCutOff settles what a turn cut off while it ran (the gateway or
// replica running it stopped) left of its reply, once any reply row left
// streaming was finished as a stopped reply (replied: one of the lane's
// was). The reply's message.start goes out before its row is committed
// (recorder.begin), so a reply may have been shown streaming and never
// stored: the devices are told to drop its bubble (message.deleted,
// outboxed for those away). A turn that leaves no reply is noted as cut
// off. Cron turns stream nothing and post nothing here.
func (r *Runner) SettleCutOff(ctx context.Context, q store.QueuedTurn, replied bool) {
	if q.CronJob != "" {
		return
	}
	if !replied && q.ReplyID != "" {
		_, err := r.st.Message(ctx, q.ReplyID)
		switch {
		case err == nil:
			replied = true // stored: finished, or stopped above
		case errors.Is(err, store.ErrNotFound):
			if err := r.c.Commit(ctx, nil, &core.Event{Type: core.EvMessageDeleted, Lane: q.Lane, MessageIDs: []string{q.ReplyID}}); err != nil {
				r.log.Error("turn: dropping a reply cut off before it was stored", "lane", q.Lane.String(), "err", err)
			}
		}
	}
	if replied {
		return
	}
	if m, err := r.st.Message(ctx, q.MessageID); err == nil {
		r.NoteCutOff(ctx, q.Lane, m.Text)
	}
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Reply posts a message from the gateway into a lane, like SystemMessage,
// whose copy to the caller answers its request: the reply to a
// picker.select.
func (r *Runner) Reply(ctx context.Context, lk core.Lane, to hub.Caller, text string) {
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleSystem, Text: text, TS: time.Now().UnixMilli()}
	if err := r.c.Commit(ctx, nil, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m, ReplyTo: to.Reply()}); err != nil {
		r.log.Error("reply message", "lane", lk.String(), "err", err)
	}
}

// bareModel drops a vendor prefix: "openai/gpt-5" → "gpt-5".
func bareModel(m string) string {
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		return m[i+1:]
	}
	return m
}

// HomeRelative shows a path under the home directory as ~/….
func HomeRelative(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	if p == home {
		return "~"
	}
	if rel, ok := strings.CutPrefix(p, home+string(os.PathSeparator)); ok {
		return "~/" + rel
	}
	return p
}
