package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ApprovalMode says which tool calls wait for the person. Whatever the
// mode, the sandbox's walls stay: they are not approvals.
type ApprovalMode string

// Approval modes.
const (
	// AskAll asks before every command and write that is not read-only.
	AskAll ApprovalMode = "ask"
	// AskOutside asks only for what leaves the sandbox (the network,
	// reading outside the working directory) and, as a courtesy, before
	// the clearly destructive commands of the policy. The default.
	AskOutside ApprovalMode = "auto"
	// AskNever asks nothing (/yolo).
	AskNever ApprovalMode = "never"
)

// ParseApprovalMode reads a mode's name.
func ParseApprovalMode(s string) (ApprovalMode, error) {
	switch m := ApprovalMode(strings.ToLower(strings.TrimSpace(s))); m {
	case AskAll, AskOutside, AskNever:
		return m, nil
	case "", "default":
		return AskOutside, nil
	case "yolo":
		return AskNever, nil
	}
	return "", fmt.Errorf("unknown approval mode %q: use ask, auto or never", s)
}

// GrantNetwork is what a "session" or "always" answer to a network
// request grants: every command of the session (or every session) may use
// the network.
const GrantNetwork = "irisgate:network"

// Request is one approval a tool asks for.
type Request struct {
	Title   string // the question
	Command string // exactly what will run or be read
	Why     string // why it asks
	// Grant is what "session" and "always" allow from then on: "" the
	// same Command again, GrantNetwork the network for every command.
	Grant string
}

// Approver is an Asker that also knows the lane's approval mode and the
// grants given in it. The gateway's asker is one; a plain Asker gets the
// tools' default mode and Approve for each request.
type Approver interface {
	Asker
	// Mode is the lane's approval mode; "" leaves it to the tools.
	Mode() ApprovalMode
	// Granted reports whether grant was given for the session or always.
	Granted(ctx context.Context, grant string) bool
	// Request asks; the answer is once, session, always or deny.
	Request(ctx context.Context, r Request) (string, error)
}

// mode is the approval mode the turn's tools work in.
func (env *ToolEnv) mode(ts *Tools) ApprovalMode {
	if env.Yolo {
		return AskNever
	}
	if a, ok := env.Asker.(Approver); ok {
		if m := a.Mode(); m != "" {
			return m
		}
	}
	if ts != nil && ts.Mode != "" {
		return ts.Mode
	}
	return AskOutside
}

// granted reports whether the person has given grant.
func (env *ToolEnv) granted(ctx context.Context, grant string) bool {
	a, ok := env.Asker.(Approver)
	return ok && a.Granted(ctx, grant)
}

// request asks the person and returns nil when the call may go on.
func (env *ToolEnv) request(ctx context.Context, r Request) error {
	if env.Asker == nil {
		return errors.New("denied: this needs approval and no one can be asked")
	}
	var choice string
	var err error
	if a, ok := env.Asker.(Approver); ok {
		choice, err = a.Request(ctx, r)
	} else {
		choice, err = env.Asker.Approve(ctx, r.Command, r.Why)
	}
	if err != nil {
		return fmt.Errorf("denied: %v", err)
	}
	if choice == "deny" || choice == "" {
		return errors.New("denied by the person; do not retry it, ask or choose another way")
	}
	return nil
}
