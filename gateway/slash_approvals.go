package gateway

import (
	"context"
	"strings"

	"github.com/irisgate/irisgate/core"
)

// The approval modes people know from coding agents: ask for everything
// that is not read-only, ask only for what leaves the sandbox (the
// default), never ask (/yolo, for the session only). The sandbox's walls
// are not approvals: no mode lifts them.

func cmdYolo(ctx context.Context, g *Gateway, _ Caller, lk core.Lane, _ string) error {
	g.mu.Lock()
	ss := g.laneSession(lk)
	ss.yolo = !ss.yolo
	on := ss.yolo
	g.mu.Unlock()
	if on {
		g.systemMessage(ctx, lk, yoloOn)
	} else {
		g.systemMessage(ctx, lk, "Approvals are back on.")
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

func approvalsLabel(s laneSettings, yolo bool) string {
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

func cmdApprovals(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	set := func(ctx context.Context, to Caller, v string) error {
		said := ""
		for _, m := range approvalModes {
			if m.value == v {
				said = m.said
			}
		}
		if said == "" {
			return core.Errorf(core.CodeUnsupported, "use /approvals ask, /approvals auto or /approvals yolo")
		}
		if v != "yolo" {
			s := g.settings(ctx, lk)
			s.Approvals = v
			if v == "auto" {
				s.Approvals = ""
			}
			if err := g.saveSettings(ctx, lk, s); err != nil {
				return err
			}
		}
		g.mu.Lock()
		g.laneSession(lk).yolo = v == "yolo"
		g.mu.Unlock()
		g.replyMessage(ctx, lk, to, said)
		return nil
	}
	if args != "" {
		return set(ctx, from, strings.ToLower(args))
	}
	cur := approvalsLabel(g.settings(ctx, lk), g.agentSettings(lk, laneSettings{}).Yolo)
	p := core.Picker{Kind: "choice", Title: "What asks first?"}
	for _, m := range approvalModes {
		p.Choices = append(p.Choices, core.Choice{Value: m.value, Label: m.label, IsCurrent: m.label == cur})
	}
	return g.openPicker(ctx, lk, &picker{p: p, onSelect: set})
}

func cmdApprove(ctx context.Context, g *Gateway, from Caller, lk core.Lane, args string) error {
	id := g.pendingApproval(lk)
	if id == "" {
		return core.Errorf(core.CodeNotFound, "no command is waiting for approval here")
	}
	v := "once"
	switch strings.ToLower(args) {
	case "", "once":
	case "session", "always":
		v = strings.ToLower(args)
	default:
		return core.Errorf(core.CodeUnsupported, "use /approve, /approve session or /approve always")
	}
	return g.SelectPicker(ctx, from, id, v)
}

func cmdDeny(ctx context.Context, g *Gateway, from Caller, lk core.Lane, _ string) error {
	id := g.pendingApproval(lk)
	if id == "" {
		return core.Errorf(core.CodeNotFound, "no command is waiting for approval here")
	}
	return g.SelectPicker(ctx, from, id, "deny")
}
