package irisv1

import (
	"bytes"
	"encoding/json"
)

// The payloads an app sends, one type per frame type. Every member is
// optional in the schema: omitempty leaves out what the app did not set,
// and a pointer tells "absent" from a zero the gateway must act on.
//
// Where a request also takes chat_id and thread_id in its payload, they
// are an irisgate addition (x-irisgate in the schema): the envelope's
// lane wins when it is set.

// Hello is the first frame of every connection.
type Hello struct {
	Token      string    `json:"token,omitempty"`
	DeviceID   string    `json:"device_id,omitempty"`
	DeviceName string    `json:"device_name,omitempty"`
	Caps       HelloCaps `json:"caps"`
	FCMToken   string    `json:"fcm_token,omitempty"`
	NtfyTopic  string    `json:"ntfy_topic,omitempty"`
}

// HelloCaps is what the app supports.
type HelloCaps struct {
	MinProtocol int    `json:"min_protocol,omitempty"`
	Media       bool   `json:"media,omitempty"`
	Push        string `json:"push,omitempty"`
}

// Ping asks for a pong carrying TS back.
type Ping struct {
	TS *int64 `json:"ts,omitempty"`
}

// MessageSend is a message from the person.
type MessageSend struct {
	Text       string   `json:"text,omitempty"`
	ReplyTo    string   `json:"reply_to,omitempty"`
	MediaRefs  []string `json:"media_refs,omitempty"`
	AutoThread bool     `json:"auto_thread,omitempty"`
	ChatID     string   `json:"chat_id,omitempty"`
	ThreadID   string   `json:"thread_id,omitempty"`
}

// HistoryRequest asks for a page of a lane's messages, newest first.
type HistoryRequest struct {
	BeforeMessageID string `json:"before_message_id,omitempty"`
	Limit           int    `json:"limit,omitempty"`
	ChatID          string `json:"chat_id,omitempty"`
	ThreadID        string `json:"thread_id,omitempty"`
}

// Sync asks for every durable frame after Cursor, then a sync.done.
type Sync struct {
	Cursor int64 `json:"cursor,omitempty"`
}

// MessageDelete deletes messages of the lane.
type MessageDelete struct {
	MessageIDs []string `json:"message_ids,omitempty"`
	ChatID     string   `json:"chat_id,omitempty"`
	ThreadID   string   `json:"thread_id,omitempty"`
}

// ReadReceiptRequest says the person has read up to MessageID.
type ReadReceiptRequest struct {
	ChatID    string `json:"chat_id,omitempty"`
	ThreadID  string `json:"thread_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// AgentStop stops the lane's turn.
type AgentStop struct {
	ChatID   string `json:"chat_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

// AgentSteer hands text to the lane's running turn.
type AgentSteer struct {
	Text     string `json:"text,omitempty"`
	ChatID   string `json:"chat_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

// FCMRegister sets how the device is woken while offline.
type FCMRegister struct {
	FCMToken  string `json:"fcm_token,omitempty"`
	NtfyTopic string `json:"ntfy_topic,omitempty"`
	// WebPush is a browser's PushSubscription, as an object or as its
	// JSON text (an irisgate addition).
	WebPush json.RawMessage `json:"webpush,omitempty"`
}

// ChannelListRequest asks for the channel directory.
type ChannelListRequest struct{}

// ChannelCreate makes a channel, or a thread of ParentChatID.
type ChannelCreate struct {
	Name         *string `json:"name,omitempty"`
	Kind         string  `json:"kind,omitempty"`
	ParentChatID *string `json:"parent_chat_id,omitempty"`
}

// The channel.* requests below name their channel with the envelope's
// chat_id, or with ChatID in the payload.

// ChannelRename renames a channel.
type ChannelRename struct {
	ChatID string  `json:"chat_id,omitempty"`
	Name   *string `json:"name,omitempty"`
}

// ChannelSetDefault makes a channel the default.
type ChannelSetDefault struct {
	ChatID string `json:"chat_id,omitempty"`
}

// ChannelFavorite sets or clears a channel's favorite flag.
type ChannelFavorite struct {
	ChatID string `json:"chat_id,omitempty"`
	On     *bool  `json:"on,omitempty"`
}

// ChannelIcon sets a channel's icon and colour; null or absent clears
// each.
type ChannelIcon struct {
	ChatID string   `json:"chat_id,omitempty"`
	Icon   Nullable `json:"icon,omitempty"`
	Color  Nullable `json:"color,omitempty"`
}

// ChannelSetAutomation marks a channel as an automation channel or not.
type ChannelSetAutomation struct {
	ChatID string `json:"chat_id,omitempty"`
	On     *bool  `json:"on,omitempty"`
}

// ChannelDelete deletes a channel and its threads.
type ChannelDelete struct {
	ChatID string `json:"chat_id,omitempty"`
}

// Search searches the messages, everywhere (scope all) or in one lane
// (scope chat).
type Search struct {
	Query           string  `json:"query,omitempty"`
	Scope           string  `json:"scope,omitempty"`
	ChatID          string  `json:"chat_id,omitempty"`
	ThreadID        *string `json:"thread_id,omitempty"`
	Limit           int     `json:"limit,omitempty"`
	BeforeMessageID string  `json:"before_message_id,omitempty"`
}

// MediaUploadStart opens an upload; binary frames follow.
type MediaUploadStart struct {
	MediaRef string `json:"media_ref,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Mime     string `json:"mime,omitempty"`
	Size     *int64 `json:"size,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// MediaUploadEnd closes an upload.
type MediaUploadEnd struct {
	MediaRef string `json:"media_ref,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}

// MediaPullRequest asks for a stored file's bytes.
type MediaPullRequest struct {
	MediaID string `json:"media_id,omitempty"`
}

// CommandsCatalogRequest asks for the slash commands.
type CommandsCatalogRequest struct{}

// CommandsCompleteRequest asks for the slash commands starting with Prefix.
type CommandsCompleteRequest struct {
	Prefix string `json:"prefix,omitempty"`
}

// PickerSelect answers a picker.
type PickerSelect struct {
	PickerID string `json:"picker_id,omitempty"`
	Value    string `json:"value,omitempty"`
}

// Nullable is a string member that may be null, where absent and null
// mean the same ("none"). It keeps the member's JSON as it came, so that a
// decoder can name the member when it is neither (Value's ok).
type Nullable json.RawMessage

// NullableString is s as a Nullable.
func NullableString(s string) Nullable {
	b, _ := json.Marshal(s)
	return b
}

// Null is an explicit null.
func Null() Nullable { return Nullable("null") }

// Value is the string; "" when the member is absent or null. ok is false
// when it is something else.
func (n Nullable) Value() (s string, ok bool) {
	if len(n) == 0 || bytes.Equal(n, []byte("null")) {
		return "", true
	}
	return s, json.Unmarshal(n, &s) == nil
}

// MarshalJSON writes the member as it is (null when empty).
func (n Nullable) MarshalJSON() ([]byte, error) {
	if len(n) == 0 {
		return []byte("null"), nil
	}
	return n, nil
}

// UnmarshalJSON keeps the member's JSON.
func (n *Nullable) UnmarshalJSON(b []byte) error {
	*n = append(Nullable(nil), b...)
	return nil
}
