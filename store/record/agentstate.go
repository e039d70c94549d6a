package record

import (
	"encoding/json"
	"errors"
	"strings"
)

// ConversationEntry is one entry of a lane's conversation with the model.
// It mirrors agent.Msg field for field (package gateway converts, and its
// tests check the mirror), so the store need not know the agent runtime.
type ConversationEntry struct {
	V          int        `json:"v"`
	Role       string     `json:"role"` // system | user | assistant | tool
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	MessageID  string     `json:"message_id,omitempty"`
	// Attachments are the files a person sent with a user message.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"` // JSON text, as the model wrote it
}

// Attachment is a file of a user message. Path is kept (as before records)
// because the agent re-reads the file on later turns; unlike a message's
// media, it names a place on this machine.
type Attachment struct {
	Kind     string `json:"kind,omitempty"`
	Mime     string `json:"mime,omitempty"`
	Filename string `json:"filename,omitempty"`
	Size     int64  `json:"size,omitempty"`
	Path     string `json:"path,omitempty"`
}

// EncodeConversation encodes a conversation entry.
func EncodeConversation(e ConversationEntry) ([]byte, error) {
	if e.Role == "" {
		return nil, errors.New("record: a conversation entry without a role")
	}
	e.V = Version
	return json.Marshal(&e)
}

// DecodeConversation decodes a conversation row's body.
func DecodeConversation(b []byte) (ConversationEntry, error) {
	var e ConversationEntry
	if err := decodeV1(KindConversation, b, &e); err != nil {
		return ConversationEntry{}, err
	}
	if e.Role == "" {
		return ConversationEntry{}, &DecodeError{KindConversation, errors.New("no role")}
	}
	e.V = Version
	return e, nil
}

// LaneSettings are a lane's persistent choices.
type LaneSettings struct {
	V             int    `json:"v"`
	Provider      string `json:"provider,omitempty"`
	Model         string `json:"model,omitempty"`
	Reasoning     string `json:"reasoning,omitempty"`
	ShowReasoning *bool  `json:"show_reasoning,omitempty"`
	Fast          bool   `json:"fast,omitempty"`
	// Approvals is the lane's approval mode (agent.AskAll, AskOutside);
	// "" the tools' default.
	Approvals string `json:"approvals,omitempty"`
	// Voice speaks the lane's replies (/voice). Added within version 1:
	// a body without it reads as off, and an older irisgate ignores it.
	Voice bool `json:"voice,omitempty"`
}

// EncodeLaneSettings encodes a lane's settings.
func EncodeLaneSettings(s LaneSettings) ([]byte, error) {
	s.V = Version
	return json.Marshal(&s)
}

// DecodeLaneSettings decodes a lane_settings row's body.
func DecodeLaneSettings(b []byte) (LaneSettings, error) {
	var s LaneSettings
	if err := decodeV1(KindLaneSettings, b, &s); err != nil {
		return LaneSettings{}, err
	}
	s.V = Version
	return s, nil
}

// WebPush is a browser's push subscription (the W3C PushSubscription's
// endpoint and keys).
type WebPush struct {
	V        int         `json:"v"`
	Endpoint string      `json:"endpoint"`
	Keys     WebPushKeys `json:"keys"`
}

// WebPushKeys are a subscription's keys, base64url as the browser gave them.
type WebPushKeys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// Check says what makes a subscription unusable, nil when it is usable:
// an https endpoint and both keys.
func (w WebPush) Check() error {
	if !strings.HasPrefix(w.Endpoint, "https://") || w.Keys.P256dh == "" || w.Keys.Auth == "" {
		return errors.New("a Web Push subscription needs an https endpoint and keys")
	}
	return nil
}

// EncodeWebPush encodes a subscription.
func EncodeWebPush(w WebPush) ([]byte, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	w.V = Version
	return json.Marshal(&w)
}

// DecodeWebPush decodes a devices.webpush column.
func DecodeWebPush(b []byte) (WebPush, error) {
	var w WebPush
	if err := decodeV1(KindWebPush, b, &w); err != nil {
		return WebPush{}, err
	}
	if err := w.Check(); err != nil {
		return WebPush{}, &DecodeError{KindWebPush, err}
	}
	w.V = Version
	return w, nil
}
