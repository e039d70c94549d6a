package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

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
	if err := g.commit(ctx, nil, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m, ReplyTo: to.reply()}); err != nil {
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

// Approve implements agent.Asker. Commands approved for the lane's session
// or for good pass without asking; silence past the timeout is a deny.
func (a laneAsker) Approve(ctx context.Context, command, description string) (string, error) {
	g := a.g
	if g.laneApproved(a.lane, command) {
		return "session", nil
	}
	if ok, err := g.st.Approved(ctx, command); err == nil && ok {
		return "always", nil
	}
	ans, ok, err := g.ask(ctx, a.lane, core.Picker{Kind: "approval", Title: "Run this command?", Command: command, Description: description, Choices: approvalChoices}, false)
	if err != nil {
		return "deny", err
	}
	if !ok {
		g.systemMessage(context.Background(), a.lane, fmt.Sprintf("⏱ No answer within %v: denied `%s`.", g.cfg.AskTimeout, command))
		return "deny", nil
	}
	v := ans.value
	switch v {
	case "session":
		g.approveForLane(a.lane, command)
	case "always":
		if err := g.st.Approve(context.Background(), command); err != nil {
			g.log.Warn("saving an approval", "err", err)
		}
	}
	g.replyMessage(context.Background(), a.lane, ans.from, approvalReply(v, command))
	return v, nil
}

func approvalReply(v, command string) string {
	switch v {
	case "once":
		return "✅ Allowed once: `" + command + "`"
	case "session":
		return "✅ Allowed for this session: `" + command + "`"
	case "always":
		return "✅ Always allowed: `" + command + "`"
	}
	return "⛔ Denied: `" + command + "`"
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
