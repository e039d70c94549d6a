package record

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/jsontext"
)

// The outbox encoder, written out by hand: every durable event is encoded
// once on the commit path, and reflection made that slower than the
// json.Marshal(core.Event) it replaced. Its output is byte for byte
// json.Marshal of the Event record (TestAppendEventIsMarshal, and the fuzz
// test, check it), so the record types stay the one description of the
// format.

// obj appends the members of one JSON object.
type obj struct {
	b     []byte
	first bool
}

func open(b []byte) obj { return obj{b: append(b, '{'), first: true} }

func (o *obj) close() []byte { return append(o.b, '}') }

// key appends a member name; names are constants that need no escaping.
func (o *obj) key(k string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

func (o *obj) str(k, v string) {
	if v != "" {
		o.key(k)
		o.b = jsontext.AppendString(o.b, v)
	}
}

func (o *obj) strAlways(k, v string) {
	o.key(k)
	o.b = jsontext.AppendString(o.b, v)
}

func (o *obj) int(k string, v int64) {
	if v != 0 {
		o.key(k)
		o.b = strconv.AppendInt(o.b, v, 10)
	}
}

func (o *obj) bool(k string, v bool) {
	if v {
		o.key(k)
		o.b = append(o.b, "true"...)
	}
}

var errFloat = errors.New("record: a number that JSON cannot hold (NaN or infinite)")

// float appends v as encoding/json does (shortest form; exponent only for
// very small or big values).
func (o *obj) float(k string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errFloat
	}
	o.key(k)
	f := byte('f')
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		f = 'e'
	}
	o.b = strconv.AppendFloat(o.b, v, f, -1, 64)
	if f == 'e' {
		// e-07 → e-7, as encoding/json writes it.
		if n := len(o.b); n >= 4 && o.b[n-4] == 'e' && o.b[n-3] == '-' && o.b[n-2] == '0' {
			o.b[n-2] = o.b[n-1]
			o.b = o.b[:n-1]
		}
	}
	return nil
}

func appendEvent(b []byte, ev *core.Event) ([]byte, error) {
	o := open(b)
	o.key("v")
	o.b = append(o.b, '1')
	o.strAlways("type", string(ev.Type))
	o.str("chat_id", ev.Lane.ChatID)
	o.str("thread_id", ev.Lane.ThreadID)
	o.int("ts", ev.TS)
	o.str("not_to", ev.NotTo)
	var err error
	if m := ev.Message; m != nil {
		o.key("message")
		if o.b, err = appendMessage(o.b, m); err != nil {
			return nil, err
		}
	}
	o.str("stream_id", ev.StreamID)
	o.str("role", ev.Role)
	o.str("text", ev.Text)
	if len(ev.MessageIDs) > 0 {
		o.key("message_ids")
		o.b = append(o.b, '[')
		for i, id := range ev.MessageIDs {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = jsontext.AppendString(o.b, id)
		}
		o.b = append(o.b, ']')
	}
	if t := ev.Tool; t != nil {
		o.key("tool")
		if o.b, err = appendTool(o.b, t); err != nil {
			return nil, err
		}
	}
	if len(ev.Todos) > 0 {
		o.key("todos")
		o.b = append(o.b, '[')
		for i, t := range ev.Todos {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			to := open(o.b)
			to.str("id", t.ID)
			to.str("content", t.Content)
			to.str("status", t.Status)
			o.b = to.close()
		}
		o.b = append(o.b, ']')
	}
	o.bool("on", ev.On)
	if n := ev.Notification; n != nil {
		o.key("notification")
		no := open(o.b)
		no.str("kind", n.Kind)
		no.str("title", n.Title)
		no.str("body", n.Body)
		no.int("ts", n.TS)
		o.b = no.close()
	}
	if c := ev.Channel; c != nil {
		o.key("channel")
		co := open(o.b)
		co.strAlways("chat_id", c.ChatID)
		co.str("name", c.Name)
		co.str("kind", c.Kind)
		co.str("parent_chat_id", c.ParentChatID)
		co.bool("is_default", c.IsDefault)
		co.bool("auto", c.Auto)
		co.bool("favorite", c.Favorite)
		co.str("icon", c.Icon)
		co.str("color", c.Color)
		co.bool("automation", c.Automation)
		o.b = co.close()
	}
	o.str("deleted_chat_id", ev.ChatID)
	o.str("reason", ev.Reason)
	o.str("state", ev.State)
	if m := ev.Media; m != nil {
		o.key("media")
		o.b = appendMedia(o.b, m)
	}
	if p := ev.Picker; p != nil {
		o.key("picker")
		o.b = appendPicker(o.b, p)
	}
	return o.close(), nil
}

func appendMessage(b []byte, m *core.Message) ([]byte, error) {
	o := open(b)
	o.strAlways("id", m.ID)
	o.str("chat_id", m.Lane.ChatID)
	o.str("thread_id", m.Lane.ThreadID)
	o.str("role", m.Role)
	o.str("text", m.Text)
	o.str("reasoning", m.Reasoning)
	if len(m.Media) > 0 {
		o.key("media")
		o.b = append(o.b, '[')
		for i := range m.Media {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = appendMedia(o.b, &m.Media[i])
		}
		o.b = append(o.b, ']')
	}
	o.str("reply_to", m.ReplyTo)
	o.str("model", m.Model)
	o.int("tokens", int64(m.Tokens))
	if r := m.Runtime; r != nil {
		o.key("runtime")
		ro := open(o.b)
		ro.str("model", r.Model)
		if r.ContextPct != nil {
			ro.key("context_pct")
			ro.b = strconv.AppendInt(ro.b, int64(*r.ContextPct), 10)
		}
		ro.str("cwd", r.Cwd)
		for _, f := range []struct {
			k string
			v *float64
		}{{"latency", r.Latency}, {"cost", r.Cost}} {
			if f.v != nil {
				if err := ro.float(f.k, *f.v); err != nil {
					return nil, err
				}
			}
		}
		o.b = ro.close()
	}
	o.int("ts", m.TS)
	o.bool("stopped", m.Stopped)
	return o.close(), nil
}

func appendMedia(b []byte, m *core.Media) []byte {
	o := open(b)
	o.str("id", m.ID)
	o.str("kind", m.Kind)
	o.str("mime", m.Mime)
	o.int("size", m.Size)
	o.str("filename", m.Filename)
	o.str("message_id", m.MessageID)
	o.str("sha256", m.SHA256)
	return o.close()
}

func appendTool(b []byte, t *core.Tool) ([]byte, error) {
	o := open(b)
	o.int("index", int64(t.Index))
	o.str("name", t.Name)
	o.str("preview", t.Preview)
	if len(t.Args) > 0 {
		// The model's arguments: any JSON, rare on this path (tool.end).
		args, err := json.Marshal(t.Args)
		if err != nil {
			return nil, err
		}
		o.key("args")
		o.b = append(o.b, args...)
	}
	o.str("emoji", t.Emoji)
	o.str("note", t.Note)
	o.bool("ok", t.OK)
	if t.Duration != 0 {
		if err := o.float("duration", t.Duration); err != nil {
			return nil, err
		}
	}
	o.str("output", t.Output)
	return o.close(), nil
}

func appendChoices(b []byte, cs []core.Choice) []byte {
	b = append(b, '[')
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		o := open(b)
		o.str("value", c.Value)
		o.str("label", c.Label)
		o.bool("is_current", c.IsCurrent)
		b = o.close()
	}
	return append(b, ']')
}

func appendPicker(b []byte, p *core.Picker) []byte {
	o := open(b)
	o.strAlways("id", p.ID)
	o.str("kind", p.Kind)
	o.str("title", p.Title)
	if len(p.Choices) > 0 {
		o.key("choices")
		o.b = appendChoices(o.b, p.Choices)
	}
	o.str("current_model", p.CurrentModel)
	o.str("current_provider", p.CurrentProvider)
	if len(p.Providers) > 0 {
		o.key("providers")
		o.b = append(o.b, '[')
		for i, pr := range p.Providers {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			po := open(o.b)
			po.str("id", pr.ID)
			po.str("label", pr.Label)
			if len(pr.Models) > 0 {
				po.key("models")
				po.b = appendChoices(po.b, pr.Models)
			}
			o.b = po.close()
		}
		o.b = append(o.b, ']')
	}
	o.str("command", p.Command)
	o.str("description", p.Description)
	return o.close()
}
