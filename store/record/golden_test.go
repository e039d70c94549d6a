package record

import (
	"github.com/irisgate/irisgate/core"
)

// The values behind testdata/v0: each file there is what the store held
// for one of these before records (json.Marshal of the live types at
// commit 25ee3f3, the body the gateway's outboxRow made), and must decode
// to it. The files are never regenerated: they are the old format.

func ptr[T any](v T) *T { return &v }

var goldenEvents = map[string]*core.Event{
	"event_message.json": {Type: core.EvMessage, Lane: core.Lane{ChatID: "chan_1", ThreadID: "t_1"}, TS: 1700000000001,
		Message: &core.Message{ID: "m_user", Lane: core.Lane{ChatID: "chan_1", ThreadID: "t_1"}, Role: core.RoleUser, Text: "look <here> & there",
			Media:   []core.Media{{ID: "md_1", Kind: "image", Mime: "image/png", Size: 2048, Filename: "a.png", SHA256: "ab12"}},
			ReplyTo: "m_before", TS: 1700000000000}},
	"event_message_stop.json": {Type: core.EvMessageStop, Lane: core.Lane{ChatID: "default"}, TS: 1700000000002,
		Message: &core.Message{ID: "m_reply", Lane: core.Lane{ChatID: "default"}, Role: core.RoleAssistant, Text: "Done ✓",
			Reasoning: "thought", Model: "openai/gpt-5", Tokens: 321, Stopped: true, TS: 1700000000000,
			Media:   []core.Media{{ID: "md_2", Kind: "document", Mime: "application/pdf", Size: 9, Filename: "r.pdf", MessageID: "m_reply"}},
			Runtime: &core.Runtime{Model: "gpt-5", ContextPct: ptr(42), Cwd: "~/src", Latency: ptr(1.25), Cost: ptr(0.003)}}},
	"event_message_deleted.json": {Type: core.EvMessageDeleted, Lane: core.Lane{ChatID: "default"}, TS: 1700000000003,
		MessageIDs: []string{"m_a", "m_b"}},
	"event_commentary.json": {Type: core.EvCommentary, Lane: core.Lane{ChatID: "default"}, TS: 1700000000004,
		StreamID: "m_beat", Text: "Let me check the logs."},
	"event_tool_end.json": {Type: core.EvToolEnd, Lane: core.Lane{ChatID: "default"}, TS: 1700000000005,
		Tool: &core.Tool{Index: 2, Name: "terminal", Preview: "ls -la", Args: map[string]any{"command": "ls -la", "timeout": 30.0},
			Emoji: "💻", Note: "listing", OK: true, Duration: 0.5, Output: "total 0"}},
	"event_notification.json": {Type: core.EvNotification, Lane: core.Lane{ChatID: "chan_1"}, TS: 1700000000006,
		Notification: &core.Notification{Kind: "cron", Title: "Digest", Body: "3 new items", TS: 1700000000006}},
	"event_channel_created.json": {Type: core.EvChannelCreated, TS: 1700000000007,
		Channel: &core.Channel{ChatID: "t_1", Name: "Trip", Kind: core.KindThread, ParentChatID: "chan_1", Auto: true, Favorite: true,
			Icon: "iVBORw0KGgo=", Color: "#AABBCC", Automation: true}},
	"event_channel_renamed.json": {Type: core.EvChannelRenamed, TS: 1700000000008,
		Channel: &core.Channel{ChatID: "default", Name: "Home", Kind: core.KindDefault, IsDefault: true}},
	"event_channel_deleted.json": {Type: core.EvChannelDeleted, TS: 1700000000009, ChatID: "chan_2"},
	"event_agent_busy.json":      {Type: core.EvAgentBusy, Lane: core.Lane{ChatID: "default"}, TS: 1700000000010, Reason: "processing"},
	"event_agent_idle.json":      {Type: core.EvAgentIdle, Lane: core.Lane{ChatID: "default", ThreadID: "t_9"}, TS: 1700000000011},
	"event_read_receipt.json": {Type: core.EvReadReceipt, Lane: core.Lane{ChatID: "default"}, TS: 1700000000012,
		MessageIDs: []string{"m_reply"}, NotTo: "phone"},
	"event_media_offer.json": {Type: core.EvMediaOffer, Lane: core.Lane{ChatID: "default"}, TS: 1700000000013,
		Media: &core.Media{ID: "md_3", Kind: "audio", Mime: "audio/ogg", Size: 77, Filename: "v.ogg", MessageID: "m_reply", SHA256: "cd34"}},
	"event_picker_model.json": {Type: core.EvPicker, Lane: core.Lane{ChatID: "default"}, TS: 1700000000014,
		Picker: &core.Picker{ID: "p_1", Kind: "model", Title: "Choose a model", CurrentModel: "gpt-5", CurrentProvider: "openai",
			Providers: []core.Provider{{ID: "openai", Label: "OpenAI", Models: []core.Choice{{Value: "openai/gpt-5", Label: "GPT-5", IsCurrent: true}}}}}},
	"event_picker_approval.json": {Type: core.EvPicker, Lane: core.Lane{ChatID: "default"}, TS: 1700000000015,
		Picker: &core.Picker{ID: "p_2", Kind: "approval", Title: "Run this?", Command: "rm -rf build", Description: "deletes build/",
			Choices: []core.Choice{{Value: "once", Label: "Once"}, {Value: "deny", Label: "Deny"}}}},
}

var goldenMedia = map[string][]core.Media{
	"media.json": {
		{ID: "md_1", Kind: "image", Mime: "image/jpeg", Size: 1000, Filename: "cat.jpg", SHA256: "ef56"},
		{ID: "md_2", Kind: "voice", Mime: "audio/ogg", Size: 10, Filename: "note.ogg"},
	},
}

var goldenRuntime = map[string]*core.Runtime{
	"runtime.json":         {Model: "gpt-5", ContextPct: ptr(7), Cwd: "~", Latency: ptr(2.5), Cost: ptr(0.01)},
	"runtime_unknown.json": {Model: "echo"},
}

var goldenConversation = map[string]ConversationEntry{
	"conversation_user.json": {V: 1, Role: "user", Content: "what is in this?", MessageID: "m_user",
		Attachments: []Attachment{{Kind: "image", Mime: "image/png", Filename: "a.png", Size: 2048, Path: "/data/media/ab/ab12"}}},
	"conversation_assistant.json": {V: 1, Role: "assistant", Content: "",
		ToolCalls: []ToolCall{{ID: "call_1", Name: "terminal", Arguments: `{"command":"ls"}`}}},
	"conversation_tool.json":   {V: 1, Role: "tool", Content: "a.txt\nb.txt", ToolCallID: "call_1"},
	"conversation_system.json": {V: 1, Role: "system", Content: "You are helpful."},
}

var goldenLaneSettings = map[string]LaneSettings{
	"lane_settings.json":       {V: 1, Provider: "openai", Model: "gpt-5", Reasoning: "high", ShowReasoning: ptr(false), Fast: true, Approvals: "ask"},
	"lane_settings_empty.json": {V: 1},
}

// Web Push subscriptions were stored as the browser sent them.
var goldenWebPush = map[string]WebPush{
	"webpush.json": {V: 1, Endpoint: "https://fcm.googleapis.com/fcm/send/abc:def", Keys: WebPushKeys{P256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", Auth: "tBHItJI5svbpez7KI4CCXg"}},
}
