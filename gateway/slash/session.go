package slash

import (
	"context"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// errBusy refuses what a running turn would go on writing into.
var errBusy = ErrBusy.New()

func cmdNew(ctx context.Context, env Env, c Call) error {
	lk := c.Lane
	reset := func(ctx context.Context, to hub.Caller) error {
		if env.Busy(lk) {
			// The running turn would go on recording into the new session.
			return errBusy
		}
		if err := env.ClearSession(ctx, lk); err != nil {
			return err
		}
		env.Reply(ctx, lk, to, "✨ New session: the agent starts with a fresh conversation.")
		return nil
	}
	if env.Busy(lk) {
		return errBusy
	}
	conv, err := env.ConversationLen(ctx, lk) // /new must work on a conversation that does not decode
	if err != nil {
		return err
	}
	if conv == 0 {
		return reset(ctx, c.From)
	}
	return env.OpenPicker(ctx, lk, core.Picker{Kind: "confirm", Title: "Start a new session? The agent forgets this conversation.", Choices: []core.Choice{
		{Value: "once", Label: "Start new session"}, {Value: "cancel", Label: "Cancel"},
	}}, func(ctx context.Context, to hub.Caller, v string) error {
		if v != "once" {
			env.Reply(ctx, lk, to, "Kept the current session.")
			return nil
		}
		return reset(ctx, to)
	})
}

func cmdTitle(ctx context.Context, env Env, c Call) error {
	if c.Args == "" {
		return ErrTitleUsage.New()
	}
	return env.Rename(ctx, c.Lane, c.Args)
}

// lastExchange finds the lane's newest message of the person (a command
// aside) and the messages after it.
func lastExchange(ctx context.Context, env Env, lk core.Lane) (user core.Message, after []string, err error) {
	ms, err := env.History(ctx, lk, 50)
	if err != nil {
		return user, nil, err
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == core.RoleUser && !Is(ms[i].Text) {
			for _, m := range ms[i+1:] {
				after = append(after, m.ID)
			}
			return ms[i], after, nil
		}
	}
	return user, nil, ErrNoLastMessage.New()
}

func cmdUndo(ctx context.Context, env Env, c Call) error {
	if env.Busy(c.Lane) {
		return errBusy
	}
	user, after, err := lastExchange(ctx, env, c.Lane)
	if err != nil {
		return err
	}
	if err := env.Undo(ctx, c.Lane, user, after); err != nil {
		return err
	}
	env.SystemMessage(ctx, c.Lane, "↩️ Removed your last message and its reply.")
	return nil
}

func cmdRetry(ctx context.Context, env Env, c Call) error {
	if env.Busy(c.Lane) {
		return errBusy
	}
	user, after, err := lastExchange(ctx, env, c.Lane)
	if err != nil {
		return err
	}
	return env.Retry(ctx, c.From, user, after)
}
