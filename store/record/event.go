package record

import (
	"errors"

	"github.com/irisgate/irisgate/core"
)

// Event is an outbox frame: a durable core.Event. What the row's own
// columns hold (its cursor) and what is never stored (the request it
// answers, a picker.closed) are not in it.
type Event struct {
	V             int           `json:"v"`
	Type          string        `json:"type"`
	ChatID        string        `json:"chat_id,omitempty"`
	ThreadID      string        `json:"thread_id,omitempty"`
	TS            int64         `json:"ts,omitempty"`
	NotTo         string        `json:"not_to,omitempty"`
	Message       *Message      `json:"message,omitempty"`
	StreamID      string        `json:"stream_id,omitempty"`
	Role          string        `json:"role,omitempty"`
	Text          string        `json:"text,omitempty"`
	MessageIDs    []string      `json:"message_ids,omitempty"`
	Tool          *Tool         `json:"tool,omitempty"`
	Todos         []Todo        `json:"todos,omitempty"`
	On            bool          `json:"on,omitempty"`
	Notification  *Notification `json:"notification,omitempty"`
	Channel       *Channel      `json:"channel,omitempty"`
	DeletedChatID string        `json:"deleted_chat_id,omitempty"` // channel.deleted
	Reason        string        `json:"reason,omitempty"`
	State         string        `json:"state,omitempty"`
	Media         *Media        `json:"media,omitempty"`
	Picker        *Picker       `json:"picker,omitempty"`
}

// Message is a chat message inside an event.
type Message struct {
	ID        string   `json:"id"`
	ChatID    string   `json:"chat_id,omitempty"`
	ThreadID  string   `json:"thread_id,omitempty"`
	Role      string   `json:"role,omitempty"`
	Text      string   `json:"text,omitempty"`
	Reasoning string   `json:"reasoning,omitempty"`
	Media     []Media  `json:"media,omitempty"`
	ReplyTo   string   `json:"reply_to,omitempty"`
	Model     string   `json:"model,omitempty"`
	Tokens    int      `json:"tokens,omitempty"`
	Runtime   *Runtime `json:"runtime,omitempty"`
	TS        int64    `json:"ts,omitempty"`
	Stopped   bool     `json:"stopped,omitempty"`
}

// Media is a stored file's description. Never its path: the data
// directory may move.
type Media struct {
	ID        string `json:"id,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Mime      string `json:"mime,omitempty"`
	Size      int64  `json:"size,omitempty"`
	Filename  string `json:"filename,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
}

// Runtime is a final reply's footer. Nil pointers are "unknown".
type Runtime struct {
	Model      string   `json:"model,omitempty"`
	ContextPct *int     `json:"context_pct,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	Latency    *float64 `json:"latency,omitempty"`
	Cost       *float64 `json:"cost,omitempty"`
}

// Tool is a tool event of a turn.
type Tool struct {
	Index    int            `json:"index,omitempty"`
	Name     string         `json:"name,omitempty"`
	Preview  string         `json:"preview,omitempty"`
	Args     map[string]any `json:"args,omitempty"`
	Emoji    string         `json:"emoji,omitempty"`
	Note     string         `json:"note,omitempty"`
	OK       bool           `json:"ok,omitempty"`
	Duration float64        `json:"duration,omitempty"`
	Output   string         `json:"output,omitempty"`
}

// Todo is an item of the agent's todo list.
type Todo struct {
	ID      string `json:"id,omitempty"`
	Content string `json:"content,omitempty"`
	Status  string `json:"status,omitempty"`
}

// Notification is an in-app banner.
type Notification struct {
	Kind  string `json:"kind,omitempty"`
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
	TS    int64  `json:"ts,omitempty"`
}

// Channel is a channel directory entry.
type Channel struct {
	ChatID       string `json:"chat_id"`
	Name         string `json:"name,omitempty"`
	Kind         string `json:"kind,omitempty"`
	ParentChatID string `json:"parent_chat_id,omitempty"`
	IsDefault    bool   `json:"is_default,omitempty"`
	Auto         bool   `json:"auto,omitempty"`
	Favorite     bool   `json:"favorite,omitempty"`
	Icon         string `json:"icon,omitempty"`
	Color        string `json:"color,omitempty"`
	Automation   bool   `json:"automation,omitempty"`
}

// Picker is a prompt awaiting an answer.
type Picker struct {
	ID              string     `json:"id"`
	Kind            string     `json:"kind,omitempty"`
	Title           string     `json:"title,omitempty"`
	Choices         []Choice   `json:"choices,omitempty"`
	CurrentModel    string     `json:"current_model,omitempty"`
	CurrentProvider string     `json:"current_provider,omitempty"`
	Providers       []Provider `json:"providers,omitempty"`
	Command         string     `json:"command,omitempty"`
	Description     string     `json:"description,omitempty"`
}

// Choice is one answer of a picker.
type Choice struct {
	Value     string `json:"value,omitempty"`
	Label     string `json:"label,omitempty"`
	IsCurrent bool   `json:"is_current,omitempty"`
}

// Provider is a provider and its models, for the model picker.
type Provider struct {
	ID     string   `json:"id,omitempty"`
	Label  string   `json:"label,omitempty"`
	Models []Choice `json:"models,omitempty"`
}

// EncodeEvent encodes a durable event for the outbox. The body keeps what
// a replay needs: not the cursor (the row's key), not the request the event
// answers (a replay answers none).
func EncodeEvent(ev *core.Event) ([]byte, error) {
	if ev.Type == "" {
		return nil, errors.New("record: an event without a type")
	}
	// One allocation for the common events: a guess a little above
	// their size (measured on the golden bodies).
	size := 128 + len(ev.Text)
	if m := ev.Message; m != nil {
		size += 128 + len(m.Text) + len(m.Reasoning) + 128*len(m.Media)
		if m.Runtime != nil {
			size += 96 + len(m.Runtime.Cwd)
		}
	}
	return appendEvent(make([]byte, 0, size), ev)
}

// FromEvent is the record of a durable event: what EncodeEvent writes,
// as a value.
func FromEvent(ev *core.Event) Event {
	r := Event{
		V: Version, Type: string(ev.Type), ChatID: ev.Lane.ChatID, ThreadID: ev.Lane.ThreadID, TS: ev.TS, NotTo: ev.NotTo,
		StreamID: ev.StreamID, Role: ev.Role, Text: ev.Text, MessageIDs: ev.MessageIDs, On: ev.On,
		DeletedChatID: ev.ChatID, Reason: ev.Reason, State: ev.State,
	}
	if m := ev.Message; m != nil {
		rm := messageRecord(m)
		r.Message = &rm
	}
	if t := ev.Tool; t != nil {
		r.Tool = &Tool{Index: t.Index, Name: t.Name, Preview: t.Preview, Args: t.Args, Emoji: t.Emoji, Note: t.Note,
			OK: t.OK, Duration: t.Duration, Output: t.Output}
	}
	if len(ev.Todos) > 0 {
		r.Todos = make([]Todo, len(ev.Todos))
		for i, t := range ev.Todos {
			r.Todos[i] = Todo{ID: t.ID, Content: t.Content, Status: t.Status}
		}
	}
	if n := ev.Notification; n != nil {
		r.Notification = &Notification{Kind: n.Kind, Title: n.Title, Body: n.Body, TS: n.TS}
	}
	if c := ev.Channel; c != nil {
		r.Channel = &Channel{ChatID: c.ChatID, Name: c.Name, Kind: c.Kind, ParentChatID: c.ParentChatID, IsDefault: c.IsDefault,
			Auto: c.Auto, Favorite: c.Favorite, Icon: c.Icon, Color: c.Color, Automation: c.Automation}
	}
	if m := ev.Media; m != nil {
		rm := mediaRecord(*m)
		r.Media = &rm
	}
	if p := ev.Picker; p != nil {
		r.Picker = &Picker{ID: p.ID, Kind: p.Kind, Title: p.Title, Choices: choiceRecords(p.Choices), CurrentModel: p.CurrentModel,
			CurrentProvider: p.CurrentProvider, Command: p.Command, Description: p.Description}
		if len(p.Providers) > 0 {
			r.Picker.Providers = make([]Provider, len(p.Providers))
			for i, pr := range p.Providers {
				r.Picker.Providers[i] = Provider{ID: pr.ID, Label: pr.Label, Models: choiceRecords(pr.Models)}
			}
		}
	}
	return r
}

// DecodeEvent decodes an outbox body. Its cursor is the row's, for the
// caller to set.
func DecodeEvent(b []byte) (*core.Event, error) {
	var r Event
	if err := decodeV1(KindEvent, b, &r); err != nil {
		return nil, err
	}
	return r.Core()
}

// Core is the event a record stands for.
func (r *Event) Core() (*core.Event, error) {
	if r.Type == "" {
		return nil, &DecodeError{KindEvent, errors.New("no type")}
	}
	ev := &core.Event{
		Type: core.EventType(r.Type), Lane: core.Lane{ChatID: r.ChatID, ThreadID: r.ThreadID}, TS: r.TS, NotTo: r.NotTo,
		StreamID: r.StreamID, Role: r.Role, Text: r.Text, MessageIDs: r.MessageIDs, On: r.On,
		ChatID: r.DeletedChatID, Reason: r.Reason, State: r.State,
	}
	if m := r.Message; m != nil {
		cm := m.core()
		ev.Message = &cm
	}
	if t := r.Tool; t != nil {
		ev.Tool = &core.Tool{Index: t.Index, Name: t.Name, Preview: t.Preview, Args: t.Args, Emoji: t.Emoji, Note: t.Note,
			OK: t.OK, Duration: t.Duration, Output: t.Output}
	}
	if len(r.Todos) > 0 {
		ev.Todos = make([]core.Todo, len(r.Todos))
		for i, t := range r.Todos {
			ev.Todos[i] = core.Todo{ID: t.ID, Content: t.Content, Status: t.Status}
		}
	}
	if n := r.Notification; n != nil {
		ev.Notification = &core.Notification{Kind: n.Kind, Title: n.Title, Body: n.Body, TS: n.TS}
	}
	if c := r.Channel; c != nil {
		ev.Channel = &core.Channel{ChatID: c.ChatID, Name: c.Name, Kind: c.Kind, ParentChatID: c.ParentChatID, IsDefault: c.IsDefault,
			Auto: c.Auto, Favorite: c.Favorite, Icon: c.Icon, Color: c.Color, Automation: c.Automation}
	}
	if m := r.Media; m != nil {
		cm := m.core()
		ev.Media = &cm
	}
	if p := r.Picker; p != nil {
		ev.Picker = &core.Picker{ID: p.ID, Kind: p.Kind, Title: p.Title, Choices: coreChoices(p.Choices), CurrentModel: p.CurrentModel,
			CurrentProvider: p.CurrentProvider, Command: p.Command, Description: p.Description}
		if len(p.Providers) > 0 {
			ev.Picker.Providers = make([]core.Provider, len(p.Providers))
			for i, pr := range p.Providers {
				ev.Picker.Providers[i] = core.Provider{ID: pr.ID, Label: pr.Label, Models: coreChoices(pr.Models)}
			}
		}
	}
	return ev, nil
}

func messageRecord(m *core.Message) Message {
	return Message{ID: m.ID, ChatID: m.Lane.ChatID, ThreadID: m.Lane.ThreadID, Role: m.Role, Text: m.Text, Reasoning: m.Reasoning,
		Media: mediaRecords(m.Media), ReplyTo: m.ReplyTo, Model: m.Model, Tokens: m.Tokens, Runtime: runtimeRecord(m.Runtime),
		TS: m.TS, Stopped: m.Stopped}
}

func (m *Message) core() core.Message {
	return core.Message{ID: m.ID, Lane: core.Lane{ChatID: m.ChatID, ThreadID: m.ThreadID}, Role: m.Role, Text: m.Text,
		Reasoning: m.Reasoning, Media: coreMedia(m.Media), ReplyTo: m.ReplyTo, Model: m.Model, Tokens: m.Tokens,
		Runtime: m.Runtime.core(), TS: m.TS, Stopped: m.Stopped}
}

func mediaRecord(m core.Media) Media {
	return Media{ID: m.ID, Kind: m.Kind, Mime: m.Mime, Size: m.Size, Filename: m.Filename, MessageID: m.MessageID, SHA256: m.SHA256}
}

func (m *Media) core() core.Media {
	return core.Media{ID: m.ID, Kind: m.Kind, Mime: m.Mime, Size: m.Size, Filename: m.Filename, MessageID: m.MessageID, SHA256: m.SHA256}
}

func mediaRecords(ms []core.Media) []Media {
	if len(ms) == 0 {
		return nil
	}
	out := make([]Media, len(ms))
	for i, m := range ms {
		out[i] = mediaRecord(m)
	}
	return out
}

func coreMedia(ms []Media) []core.Media {
	if len(ms) == 0 {
		return nil
	}
	out := make([]core.Media, len(ms))
	for i := range ms {
		out[i] = ms[i].core()
	}
	return out
}

func runtimeRecord(r *core.Runtime) *Runtime {
	if r == nil {
		return nil
	}
	return &Runtime{Model: r.Model, ContextPct: r.ContextPct, Cwd: r.Cwd, Latency: r.Latency, Cost: r.Cost}
}

func (r *Runtime) core() *core.Runtime {
	if r == nil {
		return nil
	}
	return &core.Runtime{Model: r.Model, ContextPct: r.ContextPct, Cwd: r.Cwd, Latency: r.Latency, Cost: r.Cost}
}

func choiceRecords(cs []core.Choice) []Choice {
	if len(cs) == 0 {
		return nil
	}
	out := make([]Choice, len(cs))
	for i, c := range cs {
		out[i] = Choice{Value: c.Value, Label: c.Label, IsCurrent: c.IsCurrent}
	}
	return out
}

func coreChoices(cs []Choice) []core.Choice {
	if len(cs) == 0 {
		return nil
	}
	out := make([]core.Choice, len(cs))
	for i, c := range cs {
		out[i] = core.Choice{Value: c.Value, Label: c.Label, IsCurrent: c.IsCurrent}
	}
	return out
}
