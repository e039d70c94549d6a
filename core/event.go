package core

import "sync"

// EventType names an event. The names follow the Iris frame types because
// those are the protocol's vocabulary; other dialects map them.
type EventType string

// Events. The durable ones are committed to the outbox before anyone sees them.
const (
	EvMessage        EventType = "message"
	EvMessageStart   EventType = "message.start"
	EvMessageUpdate  EventType = "message.update"
	EvMessageStop    EventType = "message.stop"
	EvMessageDeleted EventType = "message.deleted"
	EvCommentary     EventType = "commentary"
	EvToolStart      EventType = "tool.start"
	EvToolProgress   EventType = "tool.progress"
	EvToolEnd        EventType = "tool.end"
	EvTodo           EventType = "todo.update"
	EvTyping         EventType = "typing"
	EvNotification   EventType = "notification"
	EvChannelCreated EventType = "channel.created"
	EvChannelRenamed EventType = "channel.renamed"
	EvChannelDeleted EventType = "channel.deleted"
	EvAgentBusy      EventType = "agent.busy"
	EvAgentIdle      EventType = "agent.idle"
	EvReadReceipt    EventType = "read.receipt"
	EvStatus         EventType = "status"
	EvMediaOffer     EventType = "media.offer"
)

// Durable reports whether events of this type go to the outbox.
func (t EventType) Durable() bool {
	switch t {
	case EvMessage, EvMessageStop, EvMessageDeleted, EvCommentary, EvToolEnd,
		EvNotification, EvChannelCreated, EvChannelRenamed, EvChannelDeleted,
		EvAgentBusy, EvAgentIdle, EvReadReceipt, EvMediaOffer, EvPicker:
		return true
	}
	return false
}

// Event is something that happened, addressed to devices. Only the fields
// its Type needs are set.
type Event struct {
	Type   EventType
	Lane   Lane
	Cursor int64 // outbox cursor; 0 for ephemeral events
	TS     int64

	// ReplyTo, when set, names the connection whose request caused the
	// event: that connection gets it with the request id.
	ReplyTo *ReplyAddr
	// NotTo is a device that must not get the event (the author of a
	// read receipt already knows).
	NotTo string

	Message      *Message      // message, message.stop
	StreamID     string        // message.start/update, commentary
	Role         string        // message.start
	Text         string        // message.update, commentary
	MessageIDs   []string      // message.deleted, read.receipt (one)
	Tool         *Tool         // tool.*
	Todos        []Todo        // todo.update
	On           bool          // typing, speech
	Notification *Notification // notification
	Channel      *Channel      // channel.created/renamed
	ChatID       string        // channel.deleted
	Reason       string        // agent.busy
	State        string        // status
	Media        *Media        // media.offer
	Picker       *Picker       // picker.*
	Closed       *PickerClosed `json:"-"` // picker.closed: ephemeral, never in the outbox

	enc encCache
}

// ReplyAddr is a request on one connection.
type ReplyAddr struct {
	ConnID uint64
	ReqID  int64
}

// Encoded returns the event's encoding for one dialect, computing it once
// however many devices it is sent to.
func (e *Event) Encoded(dialect int, encode func(*Event) []byte) []byte {
	b, _ := e.Shared(dialect, func(e *Event) any { return encode(e) }).([]byte)
	return b
}

// Shared returns what make derives from the event under key (a dialect's
// frames, say), made once however many devices it is sent to: a fan-out
// to many devices then allocates per event, not per delivery. What it
// returns is shared by every caller, which must not modify it. make runs
// unlocked (it may ask for another key); two callers racing may both run
// it, and the first result stored is the one every caller gets.
func (e *Event) Shared(key int, make func(*Event) any) any {
	if v, ok := e.enc.get(key); ok {
		return v
	}
	v := make(e)
	e.enc.mu.Lock()
	defer e.enc.mu.Unlock()
	for _, c := range e.enc.items {
		if c.key == key {
			return c.v
		}
	}
	e.enc.items = append(e.enc.items, encItem{key, v})
	return v
}

func (c *encCache) get(key int) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range c.items {
		if it.key == key {
			return it.v, true
		}
	}
	return nil, false
}

type encCache struct {
	mu    sync.Mutex
	items []encItem
}

type encItem struct {
	key int
	v   any
}

// Picker is an interactive prompt awaiting a device's answer.
type Picker struct {
	ID    string
	Kind  string // model | choice | clarify | approval | confirm
	Title string
	// Choices for choice/clarify/confirm/approval pickers.
	Choices []Choice
	// Model picker.
	CurrentModel    string
	CurrentProvider string
	Providers       []Provider
	// Approval picker.
	Command     string
	Description string
}

// Choice is one answer of a picker.
type Choice struct {
	Value     string
	Label     string
	IsCurrent bool
}

// Provider lists a provider's models for the model picker.
type Provider struct {
	ID     string
	Label  string
	Models []Choice
}

// EvPicker is any picker; its Picker.Kind names the frame (picker.choice…).
const EvPicker EventType = "picker"

// EvPickerClosed says a picker no longer waits: it was answered (from any
// device), timed out, or the turn that asked was stopped. It is ephemeral:
// a picker's pending state lives in memory, so after a restart every
// picker is stale anyway. Dialects whose prompts must be closed
// explicitly (Hermes Mobile's prompt_done) use it; Iris has no frame for
// it.
const EvPickerClosed EventType = "picker.closed"

// PickerClosed is what an EvPickerClosed event carries.
type PickerClosed struct {
	ID string
	// Value is the answer applied; empty when nobody answered.
	Value string
}

// EvSpeech says a reply's speech (voice out) began (On) or ended: its
// pieces are then all offered, or no more will be (stopped, failed). It
// is ephemeral and carries the reply's StreamID. Hermes Mobile holds its
// avatar's speaking state by it; Iris has no frame for it.
const EvSpeech EventType = "speech"
