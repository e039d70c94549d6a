package record

import (
	"encoding/json"
	"errors"

	"github.com/irisgate/irisgate/core"
)

// Version 0: what the store held before records, frozen here. Those bodies
// were json.Marshal of core.Event, core.Media, core.Runtime, agent.Msg, the
// gateway's laneSettings and, for Web Push, the browser's PushSubscription
// text as it came. Members are named by the Go field names of that time;
// these copies must never change with the live types.

type v0Event struct {
	Type         string
	Lane         v0Lane
	Cursor       int64 // always 0: assigned after the body was made
	TS           int64
	ReplyTo      *struct{ ConnID, ReqID int64 } // always null: cleared before storing
	NotTo        string
	Message      *v0Message
	StreamID     string
	Role         string
	Text         string
	MessageIDs   []string
	Tool         *v0Tool
	Todos        []v0Todo
	On           bool
	Notification *v0Notification
	Channel      *v0Channel
	ChatID       string
	Reason       string
	State        string
	Media        *v0Media
	Picker       *v0Picker
}

type v0Lane struct {
	ChatID   string
	ThreadID string
}

type v0Message struct {
	ID        string
	Lane      v0Lane
	Role      string
	Text      string
	Reasoning string
	Media     []v0Media
	ReplyTo   string
	Model     string
	Tokens    int
	Runtime   *v0Runtime
	TS        int64
	Stopped   bool
}

type v0Runtime struct {
	Model      string
	ContextPct *int
	Cwd        string
	Latency    *float64
	Cost       *float64
}

type v0Media struct {
	ID        string
	Kind      string
	Mime      string
	Size      int64
	Filename  string
	MessageID string
	SHA256    string `json:",omitempty"`
}

type v0Channel struct {
	ChatID       string
	Name         string
	Kind         string
	ParentChatID string
	IsDefault    bool
	Auto         bool
	Favorite     bool
	Icon         string
	Color        string
	Automation   bool
}

type v0Todo struct {
	ID      string
	Content string
	Status  string
}

type v0Notification struct {
	Kind  string
	Title string
	Body  string
	TS    int64
}

type v0Tool struct {
	Index    int
	Name     string
	Preview  string
	Args     map[string]any
	Emoji    string
	Note     string
	OK       bool
	Duration float64
	Output   string
}

type v0Picker struct {
	ID              string
	Kind            string
	Title           string
	Choices         []v0Choice
	CurrentModel    string
	CurrentProvider string
	Providers       []v0Provider
	Command         string
	Description     string
}

type v0Choice struct {
	Value     string
	Label     string
	IsCurrent bool
}

type v0Provider struct {
	ID     string
	Label  string
	Models []v0Choice
}

// v0Msg is agent.Msg as it was stored.
type v0Msg struct {
	Role        string
	Content     string
	ToolCalls   []struct{ ID, Name, Arguments string } `json:",omitempty"`
	ToolCallID  string                                 `json:",omitempty"`
	MessageID   string                                 `json:",omitempty"`
	Attachments []v0Attachment                         `json:",omitempty"`
}

type v0Attachment struct {
	Kind     string
	Mime     string
	Filename string
	Size     int64
	Path     string
}

// v0LaneSettings is the gateway's laneSettings: already snake_case, only
// "v" is new.
type v0LaneSettings struct {
	Provider      string `json:"provider,omitempty"`
	Model         string `json:"model,omitempty"`
	Reasoning     string `json:"reasoning,omitempty"`
	ShowReasoning *bool  `json:"show_reasoning,omitempty"`
	Fast          bool   `json:"fast,omitempty"`
	Approvals     string `json:"approvals,omitempty"`
}

// v0PushSubscription is the browser's PushSubscription.toJSON(), kept as
// it came (expirationTime and anything else ignored).
type v0PushSubscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

func decodeEventV0(b []byte) (*core.Event, error) {
	var v v0Event
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, &DecodeError{KindEvent, err}
	}
	r := Event{V: Version, Type: v.Type, ChatID: v.Lane.ChatID, ThreadID: v.Lane.ThreadID, TS: v.TS, NotTo: v.NotTo,
		StreamID: v.StreamID, Role: v.Role, Text: v.Text, MessageIDs: v.MessageIDs, On: v.On,
		DeletedChatID: v.ChatID, Reason: v.Reason, State: v.State}
	if m := v.Message; m != nil {
		r.Message = &Message{ID: m.ID, ChatID: m.Lane.ChatID, ThreadID: m.Lane.ThreadID, Role: m.Role, Text: m.Text,
			Reasoning: m.Reasoning, Media: mediaV0(m.Media), ReplyTo: m.ReplyTo, Model: m.Model, Tokens: m.Tokens,
			Runtime: runtimeV0(m.Runtime), TS: m.TS, Stopped: m.Stopped}
	}
	if t := v.Tool; t != nil {
		r.Tool = &Tool{Index: t.Index, Name: t.Name, Preview: t.Preview, Args: t.Args, Emoji: t.Emoji, Note: t.Note,
			OK: t.OK, Duration: t.Duration, Output: t.Output}
	}
	for _, t := range v.Todos {
		r.Todos = append(r.Todos, Todo{ID: t.ID, Content: t.Content, Status: t.Status})
	}
	if n := v.Notification; n != nil {
		r.Notification = &Notification{Kind: n.Kind, Title: n.Title, Body: n.Body, TS: n.TS}
	}
	if c := v.Channel; c != nil {
		r.Channel = &Channel{ChatID: c.ChatID, Name: c.Name, Kind: c.Kind, ParentChatID: c.ParentChatID, IsDefault: c.IsDefault,
			Auto: c.Auto, Favorite: c.Favorite, Icon: c.Icon, Color: c.Color, Automation: c.Automation}
	}
	if m := v.Media; m != nil {
		r.Media = &mediaV0([]v0Media{*m})[0]
	}
	if p := v.Picker; p != nil {
		r.Picker = &Picker{ID: p.ID, Kind: p.Kind, Title: p.Title, Choices: choicesV0(p.Choices), CurrentModel: p.CurrentModel,
			CurrentProvider: p.CurrentProvider, Command: p.Command, Description: p.Description}
		for _, pr := range p.Providers {
			r.Picker.Providers = append(r.Picker.Providers, Provider{ID: pr.ID, Label: pr.Label, Models: choicesV0(pr.Models)})
		}
	}
	return r.Core()
}

func mediaV0(ms []v0Media) []Media {
	var out []Media
	for _, m := range ms {
		out = append(out, Media{ID: m.ID, Kind: m.Kind, Mime: m.Mime, Size: m.Size, Filename: m.Filename, MessageID: m.MessageID, SHA256: m.SHA256})
	}
	return out
}

func runtimeV0(r *v0Runtime) *Runtime {
	if r == nil {
		return nil
	}
	return &Runtime{Model: r.Model, ContextPct: r.ContextPct, Cwd: r.Cwd, Latency: r.Latency, Cost: r.Cost}
}

func choicesV0(cs []v0Choice) []Choice {
	var out []Choice
	for _, c := range cs {
		out = append(out, Choice{Value: c.Value, Label: c.Label, IsCurrent: c.IsCurrent})
	}
	return out
}

func decodeMediaV0(b []byte) ([]core.Media, error) {
	var ms []v0Media
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, &DecodeError{KindMedia, err}
	}
	return coreMedia(mediaV0(ms)), nil
}

func decodeRuntimeV0(b []byte) (*core.Runtime, error) {
	var r v0Runtime
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &DecodeError{KindRuntime, err}
	}
	return runtimeV0(&r).core(), nil
}

func decodeConversationV0(b []byte) (ConversationEntry, error) {
	var m v0Msg
	if err := json.Unmarshal(b, &m); err != nil {
		return ConversationEntry{}, &DecodeError{KindConversation, err}
	}
	e := ConversationEntry{V: Version, Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, MessageID: m.MessageID}
	for _, c := range m.ToolCalls {
		e.ToolCalls = append(e.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	for _, a := range m.Attachments {
		e.Attachments = append(e.Attachments, Attachment{Kind: a.Kind, Mime: a.Mime, Filename: a.Filename, Size: a.Size, Path: a.Path})
	}
	return e, nil
}

func decodeLaneSettingsV0(b []byte) (LaneSettings, error) {
	var s v0LaneSettings
	if err := json.Unmarshal(b, &s); err != nil {
		return LaneSettings{}, &DecodeError{KindLaneSettings, err}
	}
	return LaneSettings{V: Version, Provider: s.Provider, Model: s.Model, Reasoning: s.Reasoning, ShowReasoning: s.ShowReasoning,
		Fast: s.Fast, Approvals: s.Approvals}, nil
}

func decodeWebPushV0(b []byte) (WebPush, error) {
	var s v0PushSubscription
	if err := json.Unmarshal(b, &s); err != nil {
		return WebPush{}, &DecodeError{KindWebPush, err}
	}
	if s.Endpoint == "" {
		return WebPush{}, &DecodeError{KindWebPush, errors.New("no endpoint")}
	}
	return WebPush{V: Version, Endpoint: s.Endpoint, Keys: WebPushKeys{P256dh: s.Keys.P256dh, Auth: s.Keys.Auth}}, nil
}
