package iris

import (
	"encoding/json"
	"strconv"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// Keys of this dialect's encodings cached on an event (core.Event.Shared),
// apart from other dialects'.
const (
	dialectKey = 1 // the broadcast frame's bytes
	framesKey  = 2 // the broadcast's []hub.Out
)

// codec encodes events for Iris connections.
type codec struct{}

// Frames implements hub.Codec. A broadcast frame is encoded once for all
// Iris devices, with its key and the slice holding it, so a delivery
// allocates nothing (the hub copies each Out it queues); only the
// requester's copy (with its id) is encoded apart.
func (codec) Frames(ev *core.Event, reqID int64) []hub.Out {
	if reqID != 0 {
		return outs(ev, encodeEvent(ev, reqID, 0))
	}
	o, _ := ev.Shared(framesKey, func(ev *core.Event) any { return outs(ev, broadcast(ev)) }).([]hub.Out)
	return o
}

// outs is data as ev's frames: nil when ev has no frame.
func outs(ev *core.Event, data []byte) []hub.Out {
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

// withCursor is a broadcast frame as sync replays it: with the cursor it
// was stored under, spliced in before the payload.
func withCursor(frame []byte, cursor int64) []byte { return irisv1.SpliceCursor(frame, cursor) }

// encodeEvent renders ev as one frame; nil for events Iris has no frame for.
func encodeEvent(ev *core.Event, reqID, cursor int64) []byte {
	typ := irisv1.FrameType(ev.Type)
	var p any
	switch ev.Type {
	case core.EvMessage:
		// The two payloads a burst and a stream encode most go straight
		// after the envelope, without encoding/json (the same bytes).
		m := messagePayload(ev.Message)
		f := irisv1.AppendEnvelope(make([]byte, 0, len(m.Text)+len(m.Reasoning)+256), frameEnv(ev, typ, reqID, cursor))
		if f, err := irisv1.AppendMessage(f, &m); err == nil {
			return append(f, '}')
		}
		p = m // a runtime figure encoding/json refuses: its error frame
	case core.EvMessageUpdate:
		u := irisv1.MessageUpdate{MessageID: ev.StreamID, Text: ev.Text}
		f := irisv1.AppendEnvelope(make([]byte, 0, len(u.Text)+len(u.MessageID)+128), frameEnv(ev, typ, reqID, cursor))
		return append(irisv1.AppendMessageUpdate(f, &u), '}')
	case core.EvMessageStart:
		p = irisv1.MessageStart{MessageID: ev.StreamID, Role: ev.Role}
	case core.EvMessageStop:
		m := ev.Message
		p = irisv1.MessageStop{MessageID: m.ID, FinalText: m.Text, Reasoning: m.Reasoning, Media: mediaList(m.Media), Model: m.Model, Tokens: m.Tokens,
			Runtime: runtimePayload(m.Runtime), TS: m.TS}
	case core.EvMessageDeleted:
		p = irisv1.MessageDeleted{MessageIDs: ev.MessageIDs}
	case core.EvCommentary:
		p = irisv1.Commentary{MessageID: ev.StreamID, Text: ev.Text}
	case core.EvToolStart, core.EvToolProgress, core.EvToolEnd:
		p = toolPayload(ev.Type, ev.Tool)
	case core.EvTodo:
		todos := make([]irisv1.Todo, len(ev.Todos))
		for i, t := range ev.Todos {
			todos[i] = irisv1.Todo{ID: t.ID, Content: t.Content, Status: t.Status}
		}
		p = irisv1.TodoUpdate{Todos: todos}
	case core.EvTyping:
		p = irisv1.Typing{On: ev.On}
	case core.EvNotification:
		n := ev.Notification
		p = irisv1.Notification{Kind: n.Kind, Title: n.Title, Body: n.Body, TS: n.TS}
	case core.EvChannelCreated, core.EvChannelRenamed:
		p = channelPayload(*ev.Channel)
	case core.EvChannelDeleted:
		p = irisv1.ChannelDeleted{ChatID: ev.ChatID}
	case core.EvAgentBusy:
		p = irisv1.AgentBusy{Reason: ev.Reason}
	case core.EvAgentIdle:
		p = irisv1.AgentIdle{}
	case core.EvReadReceipt:
		if len(ev.MessageIDs) == 0 {
			return nil
		}
		p = irisv1.ReadReceipt{MessageID: ev.MessageIDs[0]}
	case core.EvStatus:
		p = irisv1.Status{State: ev.State}
	case core.EvMediaOffer:
		p = mediaPayload(*ev.Media)
	case core.EvPicker:
		typ = irisv1.PickerPrefix + ev.Picker.Kind
		if p = pickerPayload(ev.Picker); p == nil {
			return nil
		}
	default:
		return nil
	}
	return marshal(frameEnv(ev, typ, reqID, cursor), p)
}

// frameEnv is the envelope of ev's frame.
func frameEnv(ev *core.Event, typ string, reqID, cursor int64) irisv1.Envelope {
	env := irisv1.Envelope{V: Version, ID: reqID, Type: typ, Cursor: cursor}
	switch ev.Type {
	case core.EvChannelCreated, core.EvChannelRenamed, core.EvChannelDeleted, core.EvStatus:
		// directory and gateway-wide frames have no lane
	default:
		env.ChatID, env.ThreadID = ev.Lane.ChatID, ev.Lane.ThreadID
	}
	return env
}

// marshal renders an envelope with payload p.
func marshal(env irisv1.Envelope, p any) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Only unencodable tool args can get here; say so rather than drop.
		b, _ = json.Marshal(irisv1.Error{Code: irisv1.CodeInternal, Message: "unencodable payload: " + err.Error()})
		env.Type = irisv1.TypeError
	}
	return irisv1.AppendFrame(make([]byte, 0, len(b)+96), env, b)
}

func messagePayload(m *core.Message) irisv1.Message {
	model := m.Model
	if m.Role == core.RoleCron && model == "" {
		// A delivery (irisgate send, POST /api/send) says so, as a cron
		// post names its job ("cron: <job>"): in history both are
		// assistant messages, and apps show where they came from.
		model = DeliveryModel
	}
	return irisv1.Message{
		MessageID: m.ID, Role: m.Role, Text: m.Text, Reasoning: m.Reasoning, Media: mediaList(m.Media),
		ReplyTo: m.ReplyTo, Model: model, Tokens: m.Tokens, Runtime: runtimePayload(m.Runtime), TS: m.TS,
	}
}

// DeliveryModel is the model a delivered message carries.
const DeliveryModel = "delivery"

func mediaList(ms []core.Media) []irisv1.Media {
	if len(ms) == 0 {
		return nil
	}
	out := make([]irisv1.Media, len(ms))
	for i, m := range ms {
		out[i] = mediaPayload(m)
	}
	return out
}

func mediaPayload(m core.Media) irisv1.Media {
	return irisv1.Media{MediaID: m.ID, Kind: m.Kind, Mime: m.Mime, Size: m.Size, Filename: m.Filename, MessageID: m.MessageID}
}

func runtimePayload(r *core.Runtime) *irisv1.Runtime {
	if r == nil {
		return nil
	}
	return &irisv1.Runtime{Model: r.Model, ContextPct: r.ContextPct, Cwd: r.Cwd, Latency: r.Latency, Cost: r.Cost}
}

func toolPayload(t core.EventType, tool *core.Tool) any {
	switch t {
	case core.EvToolStart:
		return irisv1.ToolStart{Index: tool.Index, Name: tool.Name, Preview: tool.Preview, Args: tool.Args, Emoji: tool.Emoji}
	case core.EvToolProgress:
		return irisv1.ToolProgress{Index: tool.Index, Name: tool.Name, Note: tool.Note}
	default:
		return irisv1.ToolEnd{Index: tool.Index, Name: tool.Name, OK: tool.OK, Duration: tool.Duration, OutputPreview: tool.Output}
	}
}

func channelPayload(c core.Channel) irisv1.Channel {
	return irisv1.Channel{
		ChatID: c.ChatID, Name: c.Name, Kind: c.Kind, ParentChatID: c.ParentChatID, IsDefault: c.IsDefault,
		Auto: c.Auto, Favorite: c.Favorite, Icon: c.Icon, Color: c.Color, Automation: c.Automation,
	}
}

func channelList(cs []core.Channel) []irisv1.Channel {
	out := make([]irisv1.Channel, len(cs))
	for i, c := range cs {
		out[i] = channelPayload(c)
	}
	return out
}

// pickerPayload is a picker's payload, of its kind's type; nil for a kind
// Iris has no frame for (the gateway asks only these five).
func pickerPayload(p *core.Picker) any {
	switch p.Kind {
	case "model":
		out := irisv1.PickerModel{PickerID: p.ID, Title: p.Title, CurrentModel: p.CurrentModel, CurrentProvider: p.CurrentProvider,
			Providers: make([]irisv1.Provider, 0, len(p.Providers))}
		for _, pr := range p.Providers {
			pj := irisv1.Provider{ID: pr.ID, Label: pr.Label, Models: make([]irisv1.ProviderModel, 0, len(pr.Models))}
			for _, m := range pr.Models {
				pj.Models = append(pj.Models, irisv1.ProviderModel{ID: m.Value, Label: m.Label})
			}
			out.Providers = append(out.Providers, pj)
		}
		return out
	case "choice":
		return irisv1.PickerChoice{PickerID: p.ID, Title: p.Title, Choices: choices(p.Choices), Command: p.Command, Description: p.Description}
	case "clarify":
		return irisv1.PickerClarify{PickerID: p.ID, Title: p.Title, Choices: choices(p.Choices), Command: p.Command, Description: p.Description}
	case "approval":
		return irisv1.PickerApproval{PickerID: p.ID, Title: p.Title, Choices: choices(p.Choices), Command: p.Command, Description: p.Description}
	case "confirm":
		return irisv1.PickerConfirm{PickerID: p.ID, Title: p.Title, Choices: choices(p.Choices), Command: p.Command, Description: p.Description}
	}
	return nil
}

// choices is never nil: the kinds that require choices get [] rather than
// null when there are none.
func choices(cs []core.Choice) []irisv1.Choice {
	out := make([]irisv1.Choice, len(cs))
	for i, c := range cs {
		out[i] = irisv1.Choice{Value: c.Value, Label: c.Label, IsCurrent: c.IsCurrent}
	}
	return out
}
