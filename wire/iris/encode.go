package iris

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// dialectKey tells this dialect's cached encodings apart from others'.
const dialectKey = 1

// codec encodes events for Iris connections.
type codec struct{}

// Frames implements hub.Codec. A broadcast frame is encoded once for all
// Iris devices; only the requester's copy (with its id) is encoded apart.
func (codec) Frames(ev *core.Event, reqID int64) []hub.Out {
	var data []byte
	if reqID != 0 {
		data = encodeEvent(ev, reqID, 0)
	} else {
		data = broadcast(ev)
	}
	if data == nil {
		return nil
	}
	o := hub.Out{Data: data}
	switch ev.Type {
	case core.EvMessageUpdate:
		o.Key = "u\x00" + ev.StreamID
	case core.EvToolProgress:
		if ev.Tool != nil {
			o.Key = "p\x00" + ev.Lane.String() + "\x00" + strconv.Itoa(ev.Tool.Index)
		}
	}
	return []hub.Out{o}
}

// broadcast is ev's frame as every device gets it live (no id, no
// cursor), encoded once per event.
func broadcast(ev *core.Event) []byte {
	return ev.Encoded(dialectKey, func(ev *core.Event) []byte { return encodeEvent(ev, 0, 0) })
}

// payloadKey follows the envelope's members in every frame marshal
// writes; it cannot occur inside them, as quotes in JSON strings are
// escaped.
var payloadKey = []byte(`,"payload":`)

// withCursor is a broadcast frame as sync replays it: with the cursor it
// was stored under, spliced in before the payload.
func withCursor(frame []byte, cursor int64) []byte {
	i := bytes.Index(frame, payloadKey)
	if frame == nil || i < 0 {
		return nil
	}
	out := make([]byte, 0, len(frame)+32)
	out = append(out, frame[:i]...)
	out = append(out, `,"cursor":`...)
	out = strconv.AppendInt(out, cursor, 10)
	return append(out, frame[i:]...)
}

// encodeEvent renders ev as one frame; nil for events Iris has no frame for.
func encodeEvent(ev *core.Event, reqID, cursor int64) []byte {
	typ := string(ev.Type)
	var p any
	switch ev.Type {
	case core.EvMessage:
		p = messagePayload(ev.Message)
	case core.EvMessageStart:
		p = streamJSON{MessageID: ev.StreamID, Role: ev.Role}
	case core.EvMessageUpdate:
		p = updateJSON{MessageID: ev.StreamID, Text: ev.Text}
	case core.EvMessageStop:
		m := ev.Message
		p = stopJSON{MessageID: m.ID, FinalText: m.Text, Reasoning: m.Reasoning, Media: mediaList(m.Media), Model: m.Model, Tokens: m.Tokens,
			Runtime: runtimePayload(m.Runtime), TS: m.TS}
	case core.EvMessageDeleted:
		p = struct {
			IDs []string `json:"message_ids"`
		}{ev.MessageIDs}
	case core.EvCommentary:
		p = updateJSON{MessageID: ev.StreamID, Text: ev.Text}
	case core.EvToolStart, core.EvToolProgress, core.EvToolEnd:
		p = toolPayload(ev.Type, ev.Tool)
	case core.EvTodo:
		todos := make([]todoJSON, len(ev.Todos))
		for i, t := range ev.Todos {
			todos[i] = todoJSON{ID: t.ID, Content: t.Content, Status: t.Status}
		}
		p = struct {
			Todos []todoJSON `json:"todos"`
		}{todos}
	case core.EvTyping:
		p = struct {
			On bool `json:"on"`
		}{ev.On}
	case core.EvNotification:
		n := ev.Notification
		p = notificationJSON{Kind: n.Kind, Title: n.Title, Body: n.Body, TS: n.TS}
	case core.EvChannelCreated, core.EvChannelRenamed:
		p = channelPayload(*ev.Channel)
	case core.EvChannelDeleted:
		p = struct {
			ChatID string `json:"chat_id"`
		}{ev.ChatID}
	case core.EvAgentBusy:
		p = struct {
			Reason string `json:"reason"`
		}{ev.Reason}
	case core.EvAgentIdle:
		p = struct{}{}
	case core.EvReadReceipt:
		if len(ev.MessageIDs) == 0 {
			return nil
		}
		p = struct {
			MessageID string `json:"message_id"`
		}{ev.MessageIDs[0]}
	case core.EvStatus:
		p = struct {
			State string `json:"state"`
		}{ev.State}
	case core.EvMediaOffer:
		p = mediaPayload(*ev.Media)
	case core.EvPicker:
		typ = "picker." + ev.Picker.Kind
		p = pickerPayload(ev.Picker)
	default:
		return nil
	}
	env := envelope{V: Version, ID: reqID, Type: typ, Cursor: cursor}
	switch ev.Type {
	case core.EvChannelCreated, core.EvChannelRenamed, core.EvChannelDeleted, core.EvStatus:
		// directory and gateway-wide frames have no lane
	default:
		env.ChatID, env.ThreadID = ev.Lane.ChatID, ev.Lane.ThreadID
	}
	return marshal(env, p)
}

// marshal renders an envelope with payload p.
func marshal(env envelope, p any) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Only unencodable tool args can get here; say so rather than drop.
		b, _ = json.Marshal(errorJSON{Code: "internal", Message: "unencodable payload: " + err.Error()})
		env.Type = "error"
	}
	// The envelope is written by hand around the payload's bytes:
	// json.Marshal of an envelope holding a RawMessage would check and copy
	// the whole payload again, which dominated fan-out of long updates.
	out := make([]byte, 0, len(b)+96)
	out = append(out, `{"v":`...)
	out = strconv.AppendInt(out, int64(env.V), 10)
	if env.ID != 0 {
		out = append(out, `,"id":`...)
		out = strconv.AppendInt(out, env.ID, 10)
	}
	out = append(out, `,"type":`...)
	out = appendString(out, env.Type)
	if env.ChatID != "" {
		out = append(out, `,"chat_id":`...)
		out = appendString(out, env.ChatID)
	}
	if env.ThreadID != "" {
		out = append(out, `,"thread_id":`...)
		out = appendString(out, env.ThreadID)
	}
	if env.Cursor != 0 {
		out = append(out, `,"cursor":`...)
		out = strconv.AppendInt(out, env.Cursor, 10)
	}
	out = append(out, `,"payload":`...)
	out = append(out, b...)
	return append(out, '}')
}

// appendString appends s as a JSON string, escaped as encoding/json does.
func appendString(dst []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(dst, q...)
}

func messagePayload(m *core.Message) messageJSON {
	model := m.Model
	if m.Role == core.RoleCron && model == "" {
		// A delivery (irisgate send, POST /api/send) says so, as a cron
		// post names its job ("cron: <job>"): in history both are
		// assistant messages, and apps show where they came from.
		model = DeliveryModel
	}
	return messageJSON{
		MessageID: m.ID, Role: m.Role, Text: m.Text, Reasoning: m.Reasoning, Media: mediaList(m.Media),
		ReplyTo: m.ReplyTo, Model: model, Tokens: m.Tokens, Runtime: runtimePayload(m.Runtime), TS: m.TS,
	}
}

// DeliveryModel is the model a delivered message carries.
const DeliveryModel = "delivery"

func mediaList(ms []core.Media) []mediaJSON {
	if len(ms) == 0 {
		return nil
	}
	out := make([]mediaJSON, len(ms))
	for i, m := range ms {
		out[i] = mediaPayload(m)
	}
	return out
}

func mediaPayload(m core.Media) mediaJSON {
	return mediaJSON{MediaID: m.ID, Kind: m.Kind, Mime: m.Mime, Size: m.Size, Filename: m.Filename, MessageID: m.MessageID}
}

func runtimePayload(r *core.Runtime) *runtimeJSON {
	if r == nil {
		return nil
	}
	return &runtimeJSON{Model: r.Model, ContextPct: r.ContextPct, Cwd: r.Cwd, Latency: r.Latency, Cost: r.Cost}
}

func toolPayload(t core.EventType, tool *core.Tool) toolJSON {
	p := toolJSON{Index: tool.Index, Name: tool.Name}
	switch t {
	case core.EvToolStart:
		p.Preview, p.Args, p.Emoji = tool.Preview, tool.Args, tool.Emoji
	case core.EvToolProgress:
		p.Note = tool.Note
	case core.EvToolEnd:
		ok, d := tool.OK, tool.Duration
		p.OK, p.Duration, p.Output = &ok, &d, tool.Output
	}
	return p
}

func channelPayload(c core.Channel) channelJSON {
	return channelJSON{
		ChatID: c.ChatID, Name: c.Name, Kind: c.Kind, ParentChatID: c.ParentChatID, IsDefault: c.IsDefault,
		Auto: c.Auto, Favorite: c.Favorite, Icon: c.Icon, Color: c.Color, Automation: c.Automation,
	}
}

func channelList(cs []core.Channel) []channelJSON {
	out := make([]channelJSON, len(cs))
	for i, c := range cs {
		out[i] = channelPayload(c)
	}
	return out
}

func pickerPayload(p *core.Picker) pickerJSON {
	out := pickerJSON{PickerID: p.ID, Title: p.Title, CurrentModel: p.CurrentModel, CurrentProvider: p.CurrentProvider,
		Command: p.Command, Description: p.Description}
	for _, c := range p.Choices {
		out.Choices = append(out.Choices, choiceJSON{Value: c.Value, Label: c.Label, IsCurrent: c.IsCurrent})
	}
	for _, pr := range p.Providers {
		pj := providerJSON{ID: pr.ID, Label: pr.Label, Models: []modelJSON{}}
		for _, m := range pr.Models {
			pj.Models = append(pj.Models, modelJSON{ID: m.Value, Label: m.Label})
		}
		out.Providers = append(out.Providers, pj)
	}
	return out
}
