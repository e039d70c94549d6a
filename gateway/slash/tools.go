package slash

import (
	"context"
	"fmt"
	"strings"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store/record"
)

// The approval modes people know from coding agents: ask for everything
// that is not read-only, ask only for what leaves the sandbox (the
// default), never ask (/yolo, for the session only). The sandbox's walls
// are not approvals: no mode lifts them.

func cmdYolo(ctx context.Context, env Env, c Call) error {
	if env.ToggleYolo(c.Lane) {
		env.SystemMessage(ctx, c.Lane, yoloOn)
	} else {
		env.SystemMessage(ctx, c.Lane, "Approvals are back on.")
	}
	return nil
}

const yoloOn = "⚠️ YOLO: nothing asks until /yolo again or /new. Commands still run in the sandbox, but use the network when the model asks, and files outside the working directory are read without asking."

// approvalModes are /approvals' choices; yolo is the session's /yolo.
var approvalModes = []struct{ value, label, said string }{
	{"ask", "Ask for everything that is not read-only", "🔒 Approvals: everything that is not read-only asks first."},
	{"auto", "Ask only for what leaves the sandbox (default)", "Approvals: only what leaves the sandbox asks (the network, files outside the working directory), and clearly destructive commands."},
	{"yolo", "Never ask (this session, /yolo)", yoloOn},
}

func approvalsLabel(s record.LaneSettings, yolo bool) string {
	v := s.Approvals
	switch {
	case yolo:
		v = "yolo"
	case v == "":
		v = "auto"
	}
	for _, m := range approvalModes {
		if m.value == v {
			return m.label
		}
	}
	return v
}

func cmdApprovals(ctx context.Context, env Env, c Call) error {
	lk := c.Lane
	set := func(ctx context.Context, to hub.Caller, v string) error {
		said := ""
		for _, m := range approvalModes {
			if m.value == v {
				said = m.said
			}
		}
		if said == "" {
			return ErrApprovalsUsage.New()
		}
		if v != "yolo" {
			s := env.Settings(ctx, lk)
			s.Approvals = v
			if v == "auto" {
				s.Approvals = ""
			}
			if err := env.SaveSettings(ctx, lk, s); err != nil {
				return err
			}
		}
		env.SetYolo(lk, v == "yolo")
		env.Reply(ctx, lk, to, said)
		return nil
	}
	if c.Args != "" {
		return set(ctx, c.From, strings.ToLower(c.Args))
	}
	cur := approvalsLabel(env.Settings(ctx, lk), env.AgentSettings(lk, record.LaneSettings{}).Yolo)
	p := core.Picker{Kind: "choice", Title: "What asks first?"}
	for _, m := range approvalModes {
		p.Choices = append(p.Choices, core.Choice{Value: m.value, Label: m.label, IsCurrent: m.label == cur})
	}
	return env.OpenPicker(ctx, lk, p, set)
}

func cmdApprove(ctx context.Context, env Env, c Call) error {
	id := env.PendingApproval(c.Lane)
	if id == "" {
		return ErrNoApproval.New()
	}
	v := "once"
	switch strings.ToLower(c.Args) {
	case "", "once":
	case "session", "always":
		v = strings.ToLower(c.Args)
	default:
		return ErrApproveUsage.New()
	}
	return env.SelectPicker(ctx, c.From, id, v)
}

func cmdDeny(ctx context.Context, env Env, c Call) error {
	id := env.PendingApproval(c.Lane)
	if id == "" {
		return ErrNoApproval.New()
	}
	return env.SelectPicker(ctx, c.From, id, "deny")
}

func cmdStop(ctx context.Context, env Env, c Call) error {
	switch strings.ToLower(c.Args) {
	case "":
		return env.Stop(ctx, hub.Caller{}, c.Lane)
	case "all":
	default:
		return ErrStopUsage.New()
	}
	// The queue first: stopping the turn would start the next one.
	n, err := env.DropQueued(ctx, c.Lane)
	if err != nil {
		return err
	}
	if err := env.Stop(ctx, hub.Caller{}, c.Lane); err != nil {
		return err
	}
	env.SystemMessage(ctx, c.Lane, fmt.Sprintf("⏹ Stopped; dropped %d queued message%s (they stay in the chat, unanswered).", n, plural(n)))
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func cmdSteer(ctx context.Context, env Env, c Call) error {
	if c.Args == "" {
		return ErrSteerUsage.New()
	}
	return env.Steer(ctx, hub.Caller{Conn: c.From.Conn}, c.Lane, c.Args)
}

func cmdQueue(ctx context.Context, env Env, c Call) error {
	if c.Args == "" {
		return ErrQueueUsage.New()
	}
	return env.Send(ctx, hub.Caller{Conn: c.From.Conn}, c.Lane, c.Args)
}
