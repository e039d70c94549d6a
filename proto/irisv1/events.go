package irisv1

// The payloads the gateway sends, one type per frame type (channel.created
// and channel.renamed both carry a Channel, media.offer a Media, as in the
// schema). Members the schema requires are always written; the others are
// left out when empty, except where the gateway has always written them
// (a channel's favorite, a pull header's kind), which apps may rely on.
//
// The member order is the order of the bytes on the wire; the sync replay
// (SpliceCursor) and the encode cache depend on nothing else.

// HelloAck answers a hello.
type HelloAck struct {
	ServerCaps       ServerCaps `json:"server_caps"`
	SyncCursor       int64      `json:"sync_cursor"`
	LastPushedCursor int64      `json:"last_pushed_cursor"`
	Channels         []Channel  `json:"channels"`
}

// ServerCaps is what the gateway supports.
type ServerCaps struct {
	Streaming      bool   `json:"streaming"`
	Reasoning      bool   `json:"reasoning"`
	Tools          bool   `json:"tools"`
	Media          bool   `json:"media"`
	Search         bool   `json:"search"`
	Push           string `json:"push"` // fcm | ntfy | none
	PushNtfyServer string `json:"push_ntfy_server"`
	// VAPIDPublicKey lets a browser subscribe to Web Push (an irisgate
	// addition; absent when Web Push is off).
	VAPIDPublicKey string `json:"vapid_public_key,omitempty"`
	Pickers        bool   `json:"pickers"`
}

// Channel is one entry of the channel directory: a channel, or a thread
// (Kind thread) of ParentChatID.
type Channel struct {
	ChatID       string `json:"chat_id"`
	Name         string `json:"name"`
	Kind         string `json:"kind"` // default | channel | thread
	ParentChatID string `json:"parent_chat_id,omitempty"`
	IsDefault    bool   `json:"is_default"`
	Archived     bool   `json:"archived,omitempty"`
	Auto         bool   `json:"auto,omitempty"` // an auto-thread, on its channel.created
	Favorite     bool   `json:"favorite"`
	Icon         string `json:"icon,omitempty"`
	Color        string `json:"color,omitempty"`
	Automation   bool   `json:"automation"`
}

// Pong answers a ping (and an fcm.register with an id).
type Pong struct {
	TS *int64 `json:"ts,omitempty"`
}

// Error answers a request that failed, or says why the connection ends.
type Error struct {
	Code    string `json:"code"` // one of the Code constants
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Message is a whole message: message frames, and history's entries
// (where a role is only user or assistant).
type Message struct {
	MessageID string   `json:"message_id"`
	Role      string   `json:"role"` // user | assistant | system | cron
	Text      string   `json:"text"`
	Reasoning string   `json:"reasoning,omitempty"`
	Media     []Media  `json:"media,omitempty"`
	ReplyTo   string   `json:"reply_to,omitempty"`
	Model     string   `json:"model,omitempty"`
	Tokens    int      `json:"tokens,omitempty"`
	Runtime   *Runtime `json:"runtime,omitempty"`
	TS        int64    `json:"ts"` // epoch milliseconds
}

// Media is a stored file: a message's attachment, and media.offer.
type Media struct {
	MediaID   string `json:"media_id"`
	Kind      string `json:"kind,omitempty"` // image | audio | video | document | voice
	Mime      string `json:"mime,omitempty"`
	Size      int64  `json:"size"`
	Filename  string `json:"filename,omitempty"`
	MessageID string `json:"message_id,omitempty"` // media.offer: the reply it belongs to
}

// Runtime is a final reply's runtime footer; every member is optional.
type Runtime struct {
	Model      string   `json:"model,omitempty"`
	ContextPct *int     `json:"context_pct,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	Latency    *float64 `json:"latency,omitempty"` // seconds
	Cost       *float64 `json:"cost,omitempty"`    // USD
}

// MessageStart opens a streamed reply.
type MessageStart struct {
	MessageID string `json:"message_id"`
	Role      string `json:"role,omitempty"`
}

// MessageUpdate is a streamed reply's full text so far.
type MessageUpdate struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// MessageStop closes a streamed reply with its final form.
type MessageStop struct {
	MessageID string   `json:"message_id"`
	FinalText string   `json:"final_text"`
	Reasoning string   `json:"reasoning,omitempty"`
	Media     []Media  `json:"media,omitempty"` // files the agent sent with the reply
	Model     string   `json:"model,omitempty"`
	Tokens    int      `json:"tokens,omitempty"`
	Runtime   *Runtime `json:"runtime,omitempty"`
	TS        int64    `json:"ts"`
}

// MessageDeleted lists messages deleted from the lane.
type MessageDeleted struct {
	MessageIDs []string `json:"message_ids"`
}

// Commentary is the agent's running commentary beside a reply.
type Commentary struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// ToolStart says a tool call began.
type ToolStart struct {
	Index   int            `json:"index"`
	Name    string         `json:"name"`
	Preview string         `json:"preview,omitempty"`
	Args    map[string]any `json:"args,omitempty"`
	Emoji   string         `json:"emoji,omitempty"`
}

// ToolProgress is a running tool call's latest note.
type ToolProgress struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Note  string `json:"note,omitempty"`
}

// ToolEnd says a tool call ended.
type ToolEnd struct {
	Index         int     `json:"index"`
	Name          string  `json:"name"`
	OK            bool    `json:"ok"`
	Duration      float64 `json:"duration"` // seconds
	OutputPreview string  `json:"output_preview,omitempty"`
}

// TodoUpdate is the agent's whole to-do list.
type TodoUpdate struct {
	Todos []Todo `json:"todos"`
}

// Todo is one item of the agent's to-do list.
type Todo struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	Status  string `json:"status"` // pending | in_progress | completed | cancelled
}

// Typing says whether the agent is typing.
type Typing struct {
	On bool `json:"on"`
}

// Notification is something to show as a system notification.
type Notification struct {
	Kind  string `json:"kind"`
	Title string `json:"title"`
	Body  string `json:"body"`
	TS    int64  `json:"ts"`
}

// ChannelList answers channel.list.
type ChannelList struct {
	Channels []Channel `json:"channels"`
}

// ChannelDeleted says a channel is gone.
type ChannelDeleted struct {
	ChatID string `json:"chat_id"`
}

// AgentBusy says the lane's agent is at work.
type AgentBusy struct {
	Reason string `json:"reason"` // processing | tool | waiting_input | cron
}

// AgentIdle says the lane's agent is done.
type AgentIdle struct{}

// ReadReceipt says a message was read on another device.
type ReadReceipt struct {
	MessageID string `json:"message_id"`
}

// Status is the gateway's state.
type Status struct {
	State string `json:"state"` // online | restarting | degraded
}

// History answers history: a page of messages, oldest first.
type History struct {
	Messages        []Message `json:"messages"`
	HasMore         bool      `json:"has_more"`
	OldestMessageID string    `json:"oldest_message_id,omitempty"` // before_message_id of the next page
}

// SyncDone ends a sync's replay.
type SyncDone struct {
	Cursor int64 `json:"cursor"`
	// Truncated says frames after the requested cursor were pruned:
	// reload with history.
	Truncated bool `json:"truncated,omitempty"`
}

// SearchResults answers search.
type SearchResults struct {
	Query string      `json:"query"`
	Scope string      `json:"scope"` // all | chat
	Hits  []SearchHit `json:"hits"`
	// HasMore and Total go beyond the specification's frame: more pages,
	// and the count (first page only).
	HasMore bool `json:"has_more"`
	Total   int  `json:"total,omitempty"`
}

// SearchHit is one message search found.
type SearchHit struct {
	MessageID string `json:"message_id"`
	ChatID    string `json:"chat_id"`
	ThreadID  string `json:"thread_id,omitempty"` // omitted in a channel's flat lane
	Role      string `json:"role"`
	Snippet   string `json:"snippet"`
	TS        int64  `json:"ts"`
}

// MediaUploadAck acknowledges a finished upload.
type MediaUploadAck struct {
	OK       bool   `json:"ok"`
	MediaRef string `json:"media_ref"`
}

// MediaPull is a pull's header; the file's bytes follow in binary frames.
type MediaPull struct {
	MediaID  string `json:"media_id"`
	Kind     string `json:"kind"`
	Mime     string `json:"mime"`
	Size     int64  `json:"size"`
	Filename string `json:"filename"`
	SHA256   string `json:"sha256"`
}

// MediaPullEnd ends a pull; OK is false when the stored file could not be
// read to its end.
type MediaPullEnd struct {
	OK bool `json:"ok"`
}

// CommandsCatalog answers commands.catalog.
type CommandsCatalog struct {
	Commands []Command `json:"commands"`
}

// CommandsComplete answers commands.complete.
type CommandsComplete struct {
	Prefix  string    `json:"prefix"`
	Matches []Command `json:"matches"`
}

// Command is a slash command.
type Command struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	ArgsHint    string `json:"args_hint"`
	Category    string `json:"category,omitempty"`
	// Aliases is a pointer so that the catalogue writes an empty list
	// while completions leave it out, as they always have.
	Aliases *[]string `json:"aliases,omitempty"`
}

// Pickers: one frame type per kind (picker.<kind>). Apps answer with
// picker.select.

// PickerModel lets the person pick a provider's model.
type PickerModel struct {
	PickerID        string     `json:"picker_id"`
	Title           string     `json:"title,omitempty"`
	CurrentModel    string     `json:"current_model,omitempty"`
	CurrentProvider string     `json:"current_provider,omitempty"`
	Providers       []Provider `json:"providers"`
}

// Provider lists a provider's models.
type Provider struct {
	ID     string          `json:"id"`
	Label  string          `json:"label"`
	Models []ProviderModel `json:"models"`
}

// ProviderModel is one model of a provider.
type ProviderModel struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// PickerChoice offers a choice among Choices.
type PickerChoice struct {
	PickerID    string   `json:"picker_id"`
	Title       string   `json:"title,omitempty"`
	Choices     []Choice `json:"choices"`
	Command     string   `json:"command,omitempty"`
	Description string   `json:"description,omitempty"`
}

// PickerClarify asks the person a question, with suggested answers.
type PickerClarify struct {
	PickerID    string   `json:"picker_id"`
	Title       string   `json:"title,omitempty"`
	Choices     []Choice `json:"choices,omitempty"`
	Command     string   `json:"command,omitempty"`
	Description string   `json:"description,omitempty"`
}

// PickerApproval asks whether the agent may run Command.
type PickerApproval struct {
	PickerID    string   `json:"picker_id"`
	Title       string   `json:"title,omitempty"`
	Choices     []Choice `json:"choices"`
	Command     string   `json:"command,omitempty"`
	Description string   `json:"description,omitempty"`
}

// PickerConfirm asks the person to confirm an action.
type PickerConfirm struct {
	PickerID    string   `json:"picker_id"`
	Title       string   `json:"title,omitempty"`
	Choices     []Choice `json:"choices"`
	Command     string   `json:"command,omitempty"`
	Description string   `json:"description,omitempty"`
}

// Choice is one answer a picker offers.
type Choice struct {
	Value     string `json:"value"`
	Label     string `json:"label"`
	IsCurrent bool   `json:"is_current,omitempty"`
}
