package gateway

import (
	"context"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/slash"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// Command is a slash command of the catalog (package slash).
type Command = slash.Command

// Commands is the slash catalog, in the order /help shows it.
func (g *Gateway) Commands() []Command { return slash.Catalog() }

// Complete returns the slash commands matching a typed prefix.
func Complete(prefix string) []Command { return slash.Complete(prefix) }

// slashEnv is what slash commands act on: the gateway's own paths.
type slashEnv struct{ g *Gateway }

var _ slash.Env = slashEnv{}

func (e slashEnv) SystemMessage(ctx context.Context, lk core.Lane, text string) {
	e.g.systemMessage(ctx, lk, text)
}

func (e slashEnv) Reply(ctx context.Context, lk core.Lane, to hub.Caller, text string) {
	e.g.replyMessage(ctx, lk, to, text)
}

func (e slashEnv) Busy(lk core.Lane) bool { return e.g.turns.Busy(lk) }

func (e slashEnv) LaneStatus(lk core.Lane) (running bool, queued int) { return e.g.turns.Status(lk) }

func (e slashEnv) Stop(ctx context.Context, from hub.Caller, lk core.Lane) error {
	return e.g.Stop(ctx, from, lk)
}

func (e slashEnv) DropQueued(ctx context.Context, lk core.Lane) (int, error) {
	return e.g.turns.DropQueued(ctx, lk)
}

func (e slashEnv) Steer(ctx context.Context, from hub.Caller, lk core.Lane, text string) error {
	return e.g.Steer(ctx, from, lk, text)
}

func (e slashEnv) Send(ctx context.Context, from hub.Caller, lk core.Lane, text string) error {
	return e.g.Send(ctx, from, SendRequest{Lane: lk, Text: text})
}

func (e slashEnv) ConversationLen(ctx context.Context, lk core.Lane) (int, error) {
	return e.g.st.ConversationLen(ctx, lk)
}

func (e slashEnv) History(ctx context.Context, lk core.Lane, limit int) ([]core.Message, error) {
	ms, _, err := e.g.st.History(ctx, lk, "", limit)
	return ms, err
}

func (e slashEnv) ClearSession(ctx context.Context, lk core.Lane) error {
	if err := e.g.commit(ctx, func(tx store.Tx) error { return tx.ClearConversation(lk) }, nil); err != nil {
		return err
	}
	e.g.turns.ResetSession(lk)
	return nil
}

func (e slashEnv) Undo(ctx context.Context, lk core.Lane, user core.Message, after []string) error {
	ids := append([]string{user.ID}, after...)
	return e.g.commit(ctx, func(tx store.Tx) error {
		if err := tx.TruncateConversation(lk, user.ID); err != nil {
			return err
		}
		return tx.DeleteMessages(lk, ids)
	}, &core.Event{Type: core.EvMessageDeleted, Lane: lk, MessageIDs: ids})
}

func (e slashEnv) Retry(ctx context.Context, from hub.Caller, user core.Message, after []string) error {
	lk := user.Lane
	slot, err := e.g.turns.TakeSlot(from.Token())
	if err != nil {
		return err
	}
	var ev *core.Event
	if len(after) > 0 {
		ev = &core.Event{Type: core.EvMessageDeleted, Lane: lk, MessageIDs: after}
	}
	if err := e.g.commit(ctx, func(tx store.Tx) error {
		if err := tx.TruncateConversation(lk, user.ID); err != nil {
			return err
		}
		if err := tx.DeleteMessages(lk, after); err != nil {
			return err
		}
		return tx.QueueTurn(lk, user.ID) // owed like any turn: a restart still answers it
	}, ev); err != nil {
		e.g.turns.FreeSlot(slot)
		return err
	}
	return e.g.turns.Enqueue(turn.Pending{Msg: user, Origin: from.Conn, Slot: slot})
}

func (e slashEnv) Rename(ctx context.Context, lk core.Lane, name string) error {
	id := lk.ChatID
	if lk.ThreadID != "" {
		id = lk.ThreadID
	}
	return e.g.ChangeChannel(ctx, Caller{}, id, ChannelChange{Name: &name})
}

func (e slashEnv) Settings(ctx context.Context, lk core.Lane) record.LaneSettings {
	return e.g.turns.Settings(ctx, lk)
}

func (e slashEnv) SaveSettings(ctx context.Context, lk core.Lane, s record.LaneSettings) error {
	return e.g.commit(ctx, func(tx store.Tx) error { return tx.SetLaneSettings(lk, s) }, nil)
}

func (e slashEnv) AgentSettings(lk core.Lane, s record.LaneSettings) agent.Settings {
	return e.g.turns.AgentSettings(lk, s)
}

func (e slashEnv) ShowReasoning(s record.LaneSettings) bool { return e.g.turns.ShowReasoning(s) }

func (e slashEnv) ToggleYolo(lk core.Lane) bool { return e.g.turns.ToggleYolo(lk) }

func (e slashEnv) SetYolo(lk core.Lane, on bool) { e.g.turns.SetYolo(lk, on) }

func (e slashEnv) OpenPicker(ctx context.Context, lk core.Lane, p core.Picker, onSelect func(context.Context, hub.Caller, string) error) error {
	return e.g.turns.OpenPicker(ctx, lk, p, onSelect)
}

func (e slashEnv) PendingApproval(lk core.Lane) string { return e.g.turns.PendingApproval(lk) }

func (e slashEnv) SelectPicker(ctx context.Context, from hub.Caller, id, value string) error {
	return e.g.SelectPicker(ctx, from, id, value)
}

func (e slashEnv) Agent() agent.Agent { return e.g.cfg.Agent }

func (e slashEnv) Workdir() string { return turn.HomeRelative(e.g.cfg.Workdir) }

func (e slashEnv) Speaks() bool { return e.g.cfg.TTS != nil }

func (e slashEnv) Cron() agent.Cron { return agentCron{e.g} }
