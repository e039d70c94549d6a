package turn

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// SystemMessage posts a message from the gateway itself into a lane. It is
// outboxed (devices that were away learn of it) but kept out of history,
// which holds the conversation.
func (r *Runner) SystemMessage(ctx context.Context, lk core.Lane, text string) {
	m := core.Message{ID: core.NewID("m_"), Lane: lk, Role: core.RoleSystem, Text: text, TS: time.Now().UnixMilli()}
	if err := r.c.Commit(ctx, nil, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m}); err != nil {
		r.log.Error("system message", "lane", lk.String(), "err", err)
	}
}

// Reply posts a message from the gateway into a lane, like SystemMessage,
// whose copy to the caller answers its request: the reply to a
// picker.select.
func (r *Runner) Reply(ctx context.Context, lk core.Lane, to hub.Caller, text string) {
	m := core.Message{ID: core.NewID("m_"), Lane: lk, Role: core.RoleSystem, Text: text, TS: time.Now().UnixMilli()}
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
