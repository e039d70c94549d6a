package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
)

// Pickers are prompts waiting for a person's choice. They are outboxed, so
// a device that reconnects re-renders one still pending, but what waits on
// them lives in memory: after a restart a selection is stale, a no-op.

// DefaultAskTimeout is how long an approval or question waits for an
// answer; silence on an approval is a deny.
const DefaultAskTimeout = 300 * time.Second

type picker struct {
	p    core.Picker
	lane core.Lane
	// answer receives the choice when an agent turn waits on the picker
	// (approval, clarify).
	answer chan answer
	// onSelect runs a command's choice (/model, /reasoning, /fast, /new).
	onSelect func(ctx context.Context, from Caller, value string) error
	// free accepts any non-empty value, not only the listed choices
	// (clarify: the person may answer in their own words).
	free bool
}

// openPicker registers a picker and commits it (with a notification for
// approvals and questions), so every device shows it.
func (g *Gateway) openPicker(ctx context.Context, lk core.Lane, pk *picker) error {
	if pk.p.ID == "" {
		pk.p.ID = core.NewID("pk_")
	}
	pk.lane = lk
	g.mu.Lock()
	g.pickers[pk.p.ID] = pk
	g.mu.Unlock()
	p := pk.p
	if err := g.commit(ctx, nil, &core.Event{Type: core.EvPicker, Lane: lk, Picker: &p}); err != nil {
		g.dropPicker(pk.p.ID)
		return err
	}
	switch p.Kind {
	case "approval", "clarify":
		body := p.Title
		if p.Command != "" {
			body = p.Command
		}
		n := &core.Notification{Kind: p.Kind, Title: p.Title, Body: body, TS: time.Now().UnixMilli()}
		if err := g.commit(ctx, nil, &core.Event{Type: core.EvNotification, Lane: lk, Notification: n}); err != nil {
			g.log.Warn("picker notification", "err", err)
		}
	}
	return nil
}

// answer is a picker's choice and who made it (their picker.select gets
// the reply message).
type answer struct {
	value string
	from  Caller
}

func (g *Gateway) dropPicker(id string) *picker {
	g.mu.Lock()
	defer g.mu.Unlock()
	pk := g.pickers[id]
	delete(g.pickers, id)
	return pk
}

// closePicker ends a picker that still waits and tells the devices, with
// the value applied ("" when nobody answered), so a prompt shown elsewhere
// closes at once instead of at its own timeout. It returns nil when the
// picker was already gone: whoever took it has told them.
func (g *Gateway) closePicker(id, value string) *picker {
	pk := g.dropPicker(id)
	if pk != nil {
		g.publish(&core.Event{Type: core.EvPickerClosed, Lane: pk.lane, Closed: &core.PickerClosed{ID: id, Value: value}})
	}
	return pk
}

// SelectPicker answers a picker. The reply is a message in the picker's
// lane saying what the choice did, whose copy to the selecting device
// carries its request id. An unknown or expired picker is a no-op (nil
// error, nothing sent): the selection is simply stale. A value that is not
// one of the picker's choices is refused.
func (g *Gateway) SelectPicker(ctx context.Context, from Caller, pickerID, value string) error {
	g.mu.Lock()
	pk := g.pickers[pickerID]
	g.mu.Unlock()
	if pk == nil {
		return nil
	}
	if !pk.valid(value) {
		return core.Errorf(core.CodeUnsupported, "%q is not one of this picker's choices", value)
	}
	if g.closePicker(pickerID, value) == nil {
		return nil // answered meanwhile from another device
	}
	if pk.answer != nil {
		pk.answer <- answer{value, from} // buffered: the waiter may have given up
		return nil
	}
	if pk.onSelect != nil {
		return pk.onSelect(ctx, from, value)
	}
	return nil
}

func (pk *picker) valid(v string) bool {
	if pk.free && strings.TrimSpace(v) != "" {
		return true
	}
	for _, c := range pk.p.Choices {
		if c.Value == v {
			return true
		}
	}
	if pk.p.Kind == "model" {
		for _, pr := range pk.p.Providers {
			for _, m := range pr.Models {
				if v == pr.ID+"/"+m.Value || v == m.Value {
					return true
				}
			}
		}
	}
	return false
}

// replyMessage posts a message from the gateway into a lane, like
// systemMessage, whose copy to the caller answers its request: the reply
// to a picker.select.
func (g *Gateway) replyMessage(ctx context.Context, lk core.Lane, to Caller, text string) {
	m := core.Message{ID: core.NewID("m_"), Lane: lk, Role: core.RoleSystem, Text: text, TS: time.Now().UnixMilli()}
	if err := g.commit(ctx, nil, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m, ReplyTo: to.Reply()}); err != nil {
		g.log.Error("reply message", "lane", lk.String(), "err", err)
	}
}

// ask opens a picker and waits for its answer, the timeout or ctx (a
// stopped turn). ok is false when nobody answered.
func (g *Gateway) ask(ctx context.Context, lk core.Lane, p core.Picker, free bool) (ans answer, ok bool, err error) {
	pk := &picker{p: p, answer: make(chan answer, 1), free: free}
	if err := g.openPicker(ctx, lk, pk); err != nil {
		return ans, false, err
	}
	defer g.closePicker(pk.p.ID, "") // a no-op once answered
	g.commit(ctx, nil, &core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "waiting_input"})
	defer g.commit(context.Background(), nil, &core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "tool"})
	t := time.NewTimer(g.cfg.AskTimeout)
	defer t.Stop()
	select {
	case a := <-pk.answer:
		return a, true, nil
	case <-t.C:
		return ans, false, nil
	case <-ctx.Done():
		return ans, false, ctx.Err()
	}
}

// laneAsker lets a lane's agent turn ask its person.
type laneAsker struct {
	g    *Gateway
	lane core.Lane
}

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
	a.g.mu.Lock()
	yolo := a.g.sessions[a.lane] != nil && a.g.sessions[a.lane].yolo
	a.g.mu.Unlock()
	if yolo {
		return agent.AskNever
	}
	return agent.ApprovalMode(a.g.settings(context.Background(), a.lane).Approvals)
}

// Granted implements agent.Approver.
func (a laneAsker) Granted(ctx context.Context, grant string) bool {
	if a.g.laneApproved(a.lane, grant) {
		return true
	}
	ok, err := a.g.st.Approved(ctx, grant)
	return err == nil && ok
}

// Request implements agent.Approver: the picker shows exactly what will
// run and why it asks; session and always remember r.Grant, or else the
// command itself.
func (a laneAsker) Request(ctx context.Context, r agent.Request) (string, error) {
	g := a.g
	key, remember := r.Grant, true
	if key == "" {
		key, remember = r.Command, !strings.HasPrefix(r.Command, reservedPrefix)
	}
	if remember && g.laneApproved(a.lane, key) {
		return "session", nil
	}
	if remember {
		if ok, err := g.st.Approved(ctx, key); err == nil && ok {
			return "always", nil
		}
	}
	p := core.Picker{Kind: "approval", Title: r.Title, Command: r.Command, Description: r.Why, Choices: approvalChoices}
	if p.Title == "" {
		p.Title = "Run this command?"
	}
	if r.Grant == agent.GrantNetwork {
		p.Choices = networkChoices
	}
	ans, ok, err := g.ask(ctx, a.lane, p, false)
	if err != nil {
		return "deny", err
	}
	if !ok {
		g.systemMessage(context.Background(), a.lane, fmt.Sprintf("⏱ No answer within %v: denied `%s`.", g.cfg.AskTimeout, r.Command))
		return "deny", nil
	}
	v := ans.value
	switch {
	case !remember:
	case v == "session":
		g.approveForLane(a.lane, key)
	case v == "always":
		if err := g.st.Approve(context.Background(), key); err != nil {
			g.log.Warn("saving an approval", "err", err)
		}
	}
	g.replyMessage(context.Background(), a.lane, ans.from, approvalReply(v, r))
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
	ans, ok, err := a.g.ask(ctx, a.lane, p, true)
	if err != nil {
		return "", err
	}
	if !ok {
		a.g.systemMessage(context.Background(), a.lane, fmt.Sprintf("⏱ No answer within %v to: %s", a.g.cfg.AskTimeout, question))
		return "", fmt.Errorf("no answer within %v", a.g.cfg.AskTimeout)
	}
	a.g.replyMessage(context.Background(), a.lane, ans.from, "💬 Answered: "+ans.value)
	return ans.value, nil
}

// pendingApproval returns the lane's open approval picker, if any.
func (g *Gateway) pendingApproval(lk core.Lane) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, pk := range g.pickers {
		if pk.lane == lk && pk.p.Kind == "approval" {
			return id
		}
	}
	return ""
}
