package turn

import (
	"context"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// The agent's conversation is stored as records (package record), which
// mirror agent.Msg: the store does not know the agent runtime, so the
// conversion is here. TestConversationEntryMirrorsAgentMsg keeps the two in
// step.

func entryOf(m agent.Msg) record.ConversationEntry {
	e := record.ConversationEntry{V: record.Version, Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, MessageID: m.MessageID}
	if len(m.ToolCalls) > 0 {
		e.ToolCalls = make([]record.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			e.ToolCalls[i] = record.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
		}
	}
	if len(m.Attachments) > 0 {
		e.Attachments = make([]record.Attachment, len(m.Attachments))
		for i, a := range m.Attachments {
			e.Attachments[i] = record.Attachment{Kind: a.Kind, Mime: a.Mime, Filename: a.Filename, Size: a.Size, Path: a.Path}
		}
	}
	return e
}

func msgOf(e record.ConversationEntry) agent.Msg {
	m := agent.Msg{Role: e.Role, Content: e.Content, ToolCallID: e.ToolCallID, MessageID: e.MessageID}
	if len(e.ToolCalls) > 0 {
		m.ToolCalls = make([]agent.ToolCall, len(e.ToolCalls))
		for i, c := range e.ToolCalls {
			m.ToolCalls[i] = agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
		}
	}
	if len(e.Attachments) > 0 {
		m.Attachments = make([]agent.Attachment, len(e.Attachments))
		for i, a := range e.Attachments {
			m.Attachments[i] = agent.Attachment{Kind: a.Kind, Mime: a.Mime, Filename: a.Filename, Size: a.Size, Path: a.Path}
		}
	}
	return m
}

// loadConversation reads a lane's conversation for the agent. An entry
// that does not decode fails it: the model is never given a conversation
// with a hole in it.
func (r *Runner) loadConversation(ctx context.Context, lk core.Lane) ([]agent.Msg, error) {
	entries, err := r.st.Conversation(ctx, lk)
	if err != nil {
		return nil, err
	}
	out := make([]agent.Msg, len(entries))
	for i, e := range entries {
		out[i] = msgOf(e)
	}
	return out, nil
}
