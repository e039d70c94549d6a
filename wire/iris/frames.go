// Package iris is the Iris v1 dialect: JSON frames {v,id,type,chat_id,
// thread_id,cursor,payload} over one WebSocket per device. It decodes
// requests into gateway commands and encodes core events into frames; it
// knows nothing of SQL, and the core knows nothing of these field names.
package iris

import "encoding/json"

// Version is the protocol's major version.
const Version = 1

// envelope is every frame's outer object.
type envelope struct {
	V        int             `json:"v"`
	ID       int64           `json:"id,omitempty"`
	Type     string          `json:"type"`
	ChatID   string          `json:"chat_id,omitempty"`
	ThreadID string          `json:"thread_id,omitempty"`
	Cursor   int64           `json:"cursor,omitempty"`
	Payload  json.RawMessage `json:"payload"`
}

// inEnvelope is how a request is read: the id is checked by hand so that a
// malformed one still lets the error name what was wrong.
type inEnvelope struct {
	V        *int            `json:"v"`
	ID       json.RawMessage `json:"id"`
	Type     string          `json:"type"`
	ChatID   *string         `json:"chat_id"`
	ThreadID *string         `json:"thread_id"`
	Payload  json.RawMessage `json:"payload"`
}

type channelJSON struct {
	ChatID       string `json:"chat_id"`
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	ParentChatID string `json:"parent_chat_id,omitempty"`
	IsDefault    bool   `json:"is_default"`
	Auto         bool   `json:"auto,omitempty"`
	Favorite     bool   `json:"favorite"`
	Icon         string `json:"icon,omitempty"`
	Color        string `json:"color,omitempty"`
	Automation   bool   `json:"automation"`
}

type mediaJSON struct {
	MediaID   string `json:"media_id"`
	Kind      string `json:"kind,omitempty"`
	Mime      string `json:"mime,omitempty"`
	Size      int64  `json:"size"`
	Filename  string `json:"filename,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

type runtimeJSON struct {
	Model      string   `json:"model,omitempty"`
	ContextPct *int     `json:"context_pct,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	Latency    *float64 `json:"latency,omitempty"`
	Cost       *float64 `json:"cost,omitempty"`
}

type messageJSON struct {
	MessageID string       `json:"message_id"`
	Role      string       `json:"role"`
	Text      string       `json:"text"`
	Reasoning string       `json:"reasoning,omitempty"`
	Media     []mediaJSON  `json:"media,omitempty"`
	ReplyTo   string       `json:"reply_to,omitempty"`
	Model     string       `json:"model,omitempty"`
	Tokens    int          `json:"tokens,omitempty"`
	Runtime   *runtimeJSON `json:"runtime,omitempty"`
	TS        int64        `json:"ts"`
}

type stopJSON struct {
	MessageID string       `json:"message_id"`
	FinalText string       `json:"final_text"`
	Reasoning string       `json:"reasoning,omitempty"`
	Media     []mediaJSON  `json:"media,omitempty"` // files the agent sent with the reply
	Model     string       `json:"model,omitempty"`
	Tokens    int          `json:"tokens,omitempty"`
	Runtime   *runtimeJSON `json:"runtime,omitempty"`
	TS        int64        `json:"ts"`
}

type streamJSON struct {
	MessageID string `json:"message_id"`
	Role      string `json:"role,omitempty"`
	Text      string `json:"text,omitempty"`
}

type updateJSON struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

type toolJSON struct {
	Index    int            `json:"index"`
	Name     string         `json:"name"`
	Preview  string         `json:"preview,omitempty"`
	Args     map[string]any `json:"args,omitempty"`
	Emoji    string         `json:"emoji,omitempty"`
	Note     string         `json:"note,omitempty"`
	OK       *bool          `json:"ok,omitempty"`
	Duration *float64       `json:"duration,omitempty"`
	Output   string         `json:"output_preview,omitempty"`
}

type todoJSON struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

type notificationJSON struct {
	Kind  string `json:"kind"`
	Title string `json:"title"`
	Body  string `json:"body"`
	TS    int64  `json:"ts"`
}

type choiceJSON struct {
	Value     string `json:"value"`
	Label     string `json:"label"`
	IsCurrent bool   `json:"is_current,omitempty"`
}

type providerJSON struct {
	ID     string      `json:"id"`
	Label  string      `json:"label"`
	Models []modelJSON `json:"models"`
}

type modelJSON struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

type pickerJSON struct {
	PickerID        string         `json:"picker_id"`
	Title           string         `json:"title,omitempty"`
	Choices         []choiceJSON   `json:"choices,omitempty"`
	CurrentModel    string         `json:"current_model,omitempty"`
	CurrentProvider string         `json:"current_provider,omitempty"`
	Providers       []providerJSON `json:"providers,omitempty"`
	Command         string         `json:"command,omitempty"`
	Description     string         `json:"description,omitempty"`
}

type serverCaps struct {
	Streaming      bool   `json:"streaming"`
	Reasoning      bool   `json:"reasoning"`
	Tools          bool   `json:"tools"`
	Media          bool   `json:"media"`
	Search         bool   `json:"search"`
	Push           string `json:"push"`
	PushNtfyServer string `json:"push_ntfy_server"`
	// VAPIDPublicKey lets a browser subscribe to Web Push (an irisgate
	// addition; absent when Web Push is off).
	VAPIDPublicKey string `json:"vapid_public_key,omitempty"`
	Pickers        bool   `json:"pickers"`
}

type helloAckJSON struct {
	ServerCaps       serverCaps    `json:"server_caps"`
	SyncCursor       int64         `json:"sync_cursor"`
	LastPushedCursor int64         `json:"last_pushed_cursor"`
	Channels         []channelJSON `json:"channels"`
}

type historyJSON struct {
	Messages        []messageJSON `json:"messages"`
	HasMore         bool          `json:"has_more"`
	OldestMessageID string        `json:"oldest_message_id,omitempty"`
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Requests.

type helloReq struct {
	Token      string `json:"token"`
	DeviceID   string `json:"device_id"`
	DeviceName string `json:"device_name"`
	Caps       struct {
		MinProtocol int `json:"min_protocol"`
	} `json:"caps"`
	FCMToken  string `json:"fcm_token"`
	NtfyTopic string `json:"ntfy_topic"`
}

type sendReq struct {
	Text       string   `json:"text"`
	ReplyTo    string   `json:"reply_to"`
	MediaRefs  []string `json:"media_refs"`
	AutoThread bool     `json:"auto_thread"`
	ChatID     string   `json:"chat_id"`
	ThreadID   string   `json:"thread_id"`
}

type laneReq struct {
	ChatID    string   `json:"chat_id"`
	ThreadID  string   `json:"thread_id"`
	Text      string   `json:"text"`
	MessageID string   `json:"message_id"`
	IDs       []string `json:"message_ids"`
	Before    string   `json:"before_message_id"`
	Limit     int      `json:"limit"`
	Cursor    int64    `json:"cursor"`
	TS        *int64   `json:"ts"`
	FCMToken  string   `json:"fcm_token"`
	NtfyTopic string   `json:"ntfy_topic"`
	// WebPush is a browser's PushSubscription, as an object or as its
	// JSON text (an irisgate addition to fcm.register).
	WebPush json.RawMessage `json:"webpush"`
}

type channelReq struct {
	Name   *string         `json:"name"`
	Kind   string          `json:"kind"`
	Parent *string         `json:"parent_chat_id"`
	On     *bool           `json:"on"`
	Icon   json.RawMessage `json:"icon"`
	Color  json.RawMessage `json:"color"`
	ChatID string          `json:"chat_id"`
}
