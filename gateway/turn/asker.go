package turn

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// laneAsker lets a lane's agent turn ask its person.
type laneAsker struct {
	r    *Runner
	lane core.Lane
}

var (
	_ agent.Approver      = laneAsker{}
	_ agent.DeferredAsker = laneAsker{}
)

var approvalChoices = []core.Choice{
	{Value: "once", Label: "Allow once"},
	{Value: "session", Label: "Allow for this session"},
	{Value: "always", Label: "Always allow"},
	{Value: "deny", Label: "Deny"},
}

// networkChoices answer a command's request for the network: session and
// always let every command use it.
var networkChoices = []core.Choice{
	{Value: "once", Label: "Allow once"},
	{Value: "session", Label: "Allow the network for this session"},
	{Value: "always", Label: "Always allow the network"},
	{Value: "deny", Label: "Deny"},
}

// reservedPrefix starts the names of grants (agent.GrantNetwork): a
// command spelled like one is never remembered, nor found remembered, so
// approving it can grant nothing else.
const reservedPrefix = "irisgate:"

// Approve implements agent.Asker. Commands approved for the lane's session
// or for good pass without asking; silence past the timeout is a deny.
func (a laneAsker) Approve(ctx context.Context, command, description string) (string, error) {
	return a.Request(ctx, agent.Request{Command: command, Why: description})
}

// Mode implements agent.Approver: the lane's chosen approval mode, or
// never under /yolo.
func (a laneAsker) Mode() agent.ApprovalMode {
	if a.r.sessions.yolo(a.lane) {
		return agent.AskNever
	}
	return agent.ApprovalMode(a.r.Settings(context.Background(), a.lane).Approvals)
}

// Granted implements agent.Approver.
func (a laneAsker) Granted(ctx context.Context, grant string) bool {
	if a.r.sessions.approved(a.lane, grant) {
		return true
	}
	ok, err := a.r.st.Approved(ctx, grant)
	return err == nil && ok
}

// Request implements agent.Approver: the picker shows exactly what will
// run and why it asks; session and always remember r.Grant, or else the
// command itself.
func (a laneAsker) Request(ctx context.Context, req agent.Request) (string, error) {
	r := a.r
	key, remember := req.Grant, true
	if key == "" {
		key, remember = req.Command, !strings.HasPrefix(req.Command, reservedPrefix)
	}
	if remember && r.sessions.approved(a.lane, key) {
		return "session", nil
	}
	if remember {
		if ok, err := r.st.Approved(ctx, key); err == nil && ok {
			return "always", nil
		}
	}
	p := core.Picker{Kind: "approval", Title: req.Title, Command: req.Command, Description: req.Why, Choices: approvalChoices}
	if p.Title == "" {
		p.Title = "Run this command?"
	}
	if req.Grant == agent.GrantNetwork {
		p.Choices = networkChoices
	}
	ans, ok, err := r.ask(ctx, a.lane, p, false)
	if err != nil {
		return "deny", err
	}
	if !ok {
		r.SystemMessage(context.Background(), a.lane, fmt.Sprintf("⏱ No answer within %v: denied `%s`.", r.cfg.AskTimeout, req.Command))
		return "deny", nil
	}
	v := ans.value
	switch {
	case !remember:
	case v == "session":
		r.sessions.approve(a.lane, key)
	case v == "always":
		if err := r.st.Approve(context.Background(), key); err != nil {
			r.log.Warn("saving an approval", "err", err)
		}
	}
	r.Reply(context.Background(), a.lane, ans.from, approvalReply(v, req))
	return v, nil
}

func approvalReply(v string, r agent.Request) string {
	if r.Grant == agent.GrantNetwork {
		switch v {
		case "once":
			return "✅ Network allowed once: `" + r.Command + "`"
		case "session":
			return "✅ Network allowed for this session, starting with `" + r.Command + "`"
		case "always":
			return "✅ Network always allowed, starting with `" + r.Command + "`"
		}
		return "⛔ Denied: `" + r.Command + "`"
	}
	switch v {
	case "once":
		return "✅ Allowed once: `" + r.Command + "`"
	case "session":
		return "✅ Allowed for this session: `" + r.Command + "`"
	case "always":
		return "✅ Always allowed: `" + r.Command + "`"
	}
	return "⛔ Denied: `" + r.Command + "`"
}

// Clarify implements agent.Asker.
func (a laneAsker) Clarify(ctx context.Context, question string, choices []string) (string, error) {
	p := core.Picker{Kind: "clarify", Title: question}
	for _, c := range choices {
		p.Choices = append(p.Choices, core.Choice{Value: c, Label: c})
	}
	ans, ok, err := a.r.ask(ctx, a.lane, p, true)
	if err != nil {
		return "", err
	}
	if !ok {
		a.r.SystemMessage(context.Background(), a.lane, fmt.Sprintf("⏱ No answer within %v to: %s", a.r.cfg.AskTimeout, question))
		return "", fmt.Errorf("no answer within %v", a.r.cfg.AskTimeout)
	}
	a.r.Reply(context.Background(), a.lane, ans.from, "💬 Answered: "+ans.value)
	return ans.value, nil
}

// AskApproval implements agent.DeferredAsker: the approval picker of
// Approve, whose choice takes effect (and is said in the chat) only once
// the backend has confirmed it, through the answer's Done. Closing ctx
// withdraws the picker unanswered, on every device.
func (a laneAsker) AskApproval(ctx context.Context, q agent.ApprovalQuestion) (agent.ApprovalAnswer, error) {
	r := a.r
	if r.sessions.approved(a.lane, q.Command) {
		return agent.ApprovalAnswer{Choice: "session", By: "an earlier “Allow for this session”", Done: a.said(hub.Caller{})}, nil
	}
	if ok, err := r.st.Approved(ctx, q.Command); err == nil && ok {
		return agent.ApprovalAnswer{Choice: "always", By: "an earlier “Always allow”", Done: a.said(hub.Caller{})}, nil
	}
	var choices []core.Choice
	for _, c := range approvalChoices {
		if len(q.Choices) == 0 || slices.Contains(q.Choices, c.Value) {
			choices = append(choices, c)
		}
	}
	ans, ok, err := r.ask(ctx, a.lane, core.Picker{Kind: "approval", Title: "Run this command?", Command: q.Command, Description: q.Description, Choices: choices}, false)
	if err != nil {
		return agent.ApprovalAnswer{}, err
	}
	if !ok {
		return agent.ApprovalAnswer{Choice: "deny", TimedOut: true, Done: a.said(hub.Caller{})}, nil
	}
	v := ans.value
	return agent.ApprovalAnswer{Choice: v, By: r.deviceName(ans.from), Done: func(applied bool, text string) {
		if applied {
			switch v {
			case "session":
				r.sessions.approve(a.lane, q.Command)
			case "always":
				if err := r.st.Approve(context.Background(), q.Command); err != nil {
					r.log.Warn("saving an approval", "err", err)
				}
			}
		}
		a.said(ans.from)(applied, text)
	}}, nil
}

// said posts what became of an answer: the reply to the device that chose,
// or a system message when nobody did.
func (a laneAsker) said(to hub.Caller) func(bool, string) {
	return func(_ bool, text string) {
		if to.Reply() != nil {
			a.r.Reply(context.Background(), a.lane, to, text)
			return
		}
		a.r.SystemMessage(context.Background(), a.lane, text)
	}
}

// deviceName names the device a caller speaks from, for the chat.
func (r *Runner) deviceName(c hub.Caller) string {
	id := c.DeviceID()
	if id == "" {
		return ""
	}
	if name, err := r.st.DeviceName(context.Background(), id); err == nil && name != "" {
		return name
	}
	return id
}
