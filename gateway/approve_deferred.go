package gateway

import (
	"context"
	"slices"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
)

// AskApproval implements agent.DeferredAsker: the approval picker of
// Approve, whose choice takes effect (and is said in the chat) only once
// the backend has confirmed it, through the answer's Done. Closing ctx
// withdraws the picker unanswered, on every device.
func (a laneAsker) AskApproval(ctx context.Context, q agent.ApprovalQuestion) (agent.ApprovalAnswer, error) {
	g := a.g
	if g.laneApproved(a.lane, q.Command) {
		return agent.ApprovalAnswer{Choice: "session", By: "an earlier “Allow for this session”", Done: a.said(Caller{})}, nil
	}
	if ok, err := g.st.Approved(ctx, q.Command); err == nil && ok {
		return agent.ApprovalAnswer{Choice: "always", By: "an earlier “Always allow”", Done: a.said(Caller{})}, nil
	}
	var choices []core.Choice
	for _, c := range approvalChoices {
		if len(q.Choices) == 0 || slices.Contains(q.Choices, c.Value) {
			choices = append(choices, c)
		}
	}
	ans, ok, err := g.ask(ctx, a.lane, core.Picker{Kind: "approval", Title: "Run this command?", Command: q.Command, Description: q.Description, Choices: choices}, false)
	if err != nil {
		return agent.ApprovalAnswer{}, err
	}
	if !ok {
		return agent.ApprovalAnswer{Choice: "deny", TimedOut: true, Done: a.said(Caller{})}, nil
	}
	v := ans.value
	return agent.ApprovalAnswer{Choice: v, By: g.deviceName(ans.from), Done: func(applied bool, text string) {
		if applied {
			switch v {
			case "session":
				g.approveForLane(a.lane, q.Command)
			case "always":
				if err := g.st.Approve(context.Background(), q.Command); err != nil {
					g.log.Warn("saving an approval", "err", err)
				}
			}
		}
		a.said(ans.from)(applied, text)
	}}, nil
}

// said posts what became of an answer: the reply to the device that chose,
// or a system message when nobody did.
func (a laneAsker) said(to Caller) func(bool, string) {
	return func(_ bool, text string) {
		if to.Reply() != nil {
			a.g.replyMessage(context.Background(), a.lane, to, text)
			return
		}
		a.g.systemMessage(context.Background(), a.lane, text)
	}
}

// deviceName names the device a caller speaks from, for the chat.
func (g *Gateway) deviceName(c Caller) string {
	id := c.DeviceID()
	if id == "" {
		return ""
	}
	if d, err := g.st.Device(context.Background(), id); err == nil && d.Name != "" {
		return d.Name
	}
	return id
}
