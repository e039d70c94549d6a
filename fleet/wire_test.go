package fleet

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

func TestDecodeRefuses(t *testing.T) {
	long := strings.Repeat("a", 129)
	for name, in := range map[string]string{
		"not json":          `{`,
		"another version":   `{"v":1,"o":"ab","k":"c","c":1}`,
		"no origin":         `{"v":2,"k":"c","c":1}`,
		"bad origin":        `{"v":2,"o":"A B","k":"c","c":1}`,
		"no cursor":         `{"v":2,"o":"ab","k":"c"}`,
		"negative cursor":   `{"v":2,"o":"ab","k":"c","c":-1}`,
		"huge cursor":       `{"v":2,"o":"ab","k":"c","c":9223372036854775807}`,
		"durable as relay":  `{"v":2,"o":"ab","k":"t","e":{"v":1,"type":"message"}}`,
		"status relayed":    `{"v":2,"o":"ab","k":"t","e":{"v":1,"type":"status","state":"restarting"}}`,
		"no event":          `{"v":2,"o":"ab","k":"t"}`,
		"closed w/o picker": `{"v":2,"o":"ab","k":"t","e":{"v":1,"type":"picker.closed"}}`,
		"unknown kind":      `{"v":2,"o":"ab","k":"z"}`,
		"long device":       `{"v":2,"o":"ab","k":"p","on":["` + long + `"]}`,
		"empty device":      `{"v":2,"o":"ab","k":"p","off":[""]}`,
		"part past parts":   `{"v":2,"o":"ab","k":"p","g":1,"pt":2,"pn":2,"all":["x"]}`,
		"all w/o parts":     `{"v":2,"o":"ab","k":"p","all":["x"]}`,
		"too many parts":    `{"v":2,"o":"ab","k":"p","g":1,"pt":0,"pn":1000,"all":["x"]}`,
		"command w/o cmd":   `{"v":2,"o":"ab","k":"x"}`,
		"unknown command":   `{"v":2,"o":"ab","k":"x","x":{"op":"run"}}`,
		"pick w/o picker":   `{"v":2,"o":"ab","k":"x","x":{"op":"pick","value":"once"}}`,
		"pick long device":  `{"v":2,"o":"ab","k":"x","x":{"op":"pick","picker":"p","device":"` + long + `"}}`,
		"pick thread only":  `{"v":2,"o":"ab","k":"x","x":{"op":"pick","picker":"p","thread":"t"}}`,
		"stop w/o lane":     `{"v":2,"o":"ab","k":"x","x":{"op":"stop"}}`,
		"stop with value":   `{"v":2,"o":"ab","k":"x","x":{"op":"stop","chat":"c","value":"once"}}`,
		"pick long value":   `{"v":2,"o":"ab","k":"x","x":{"op":"pick","picker":"p","value":"` + strings.Repeat("v", maxValue+1) + `"}}`,
	} {
		if _, err := decode([]byte(in)); err == nil {
			t.Errorf("%s: accepted %s", name, in)
		}
	}
	if _, err := decode(make([]byte, MaxMessage+1)); err != errTooLarge {
		t.Errorf("a message past MaxMessage: %v", err)
	}
	ids := make([]string, MaxIDs+1)
	for i := range ids {
		ids[i] = "d"
	}
	b, _ := encode(&message{V: 1, Origin: "ab", Kind: kindPresence, On: ids})
	if _, err := decode(b); err == nil {
		t.Error("more than MaxIDs devices accepted")
	}
}

func TestTransientRoundTrip(t *testing.T) {
	for _, ev := range []*core.Event{
		{Type: core.EvMessageUpdate, Lane: core.Lane{ChatID: "c", ThreadID: "t"}, StreamID: "s1", Text: "héllo"},
		{Type: core.EvToolProgress, Tool: &core.Tool{Index: 2, Name: "terminal", Output: "ok"}},
		{Type: core.EvTyping, On: true, Lane: core.Lane{ChatID: "c"}},
		{Type: core.EvPickerClosed, Lane: core.Lane{ChatID: "c"}, Closed: &core.PickerClosed{ID: "p1", Value: "yes"}},
	} {
		b, err := encodeTransient("ab12", 41, ev)
		if err != nil {
			t.Fatal(err)
		}
		m, err := decode(b)
		if err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
		got, err := m.event()
		if err != nil || m.Cursor != 41 || m.Origin != "ab12" {
			t.Fatalf("%s: %+v %v", ev.Type, m, err)
		}
		if got.Type != ev.Type || got.Lane != ev.Lane || got.Text != ev.Text || got.StreamID != ev.StreamID || got.On != ev.On ||
			(ev.Tool != nil && (got.Tool == nil || !reflect.DeepEqual(got.Tool, ev.Tool))) || (ev.Closed != nil && (got.Closed == nil || *got.Closed != *ev.Closed)) {
			t.Fatalf("%s: got %+v", ev.Type, got)
		}
	}
	if _, err := encodeTransient("ab", 0, &core.Event{Type: core.EvMessageUpdate, Text: strings.Repeat("x", MaxMessage)}); err != errTooLarge {
		t.Fatalf("a transient frame past MaxMessage: %v", err)
	}
}

// A command comes out of decode as it went in.
func TestCommandRoundTrip(t *testing.T) {
	for _, c := range []command{
		{Op: opPick, Chat: "c", Thread: "t", Picker: "pk_1", Value: "once", Device: "phone"},
		{Op: opPick, Picker: "pk_2", Value: "in my own words"},
		{Op: opStop, Chat: "default"},
	} {
		b, err := encode(&message{V: WireVersion, Origin: "ab", Kind: kindCommand, Cmd: &c})
		if err != nil {
			t.Fatal(err)
		}
		m, err := decode(b)
		if err != nil || m.Kind != kindCommand || m.Cmd == nil || *m.Cmd != c {
			t.Fatalf("%s: %+v %v", b, m, err)
		}
	}
}

// The hand-made cursor message is what decode reads.
func TestCursorMessage(t *testing.T) {
	f := &Fleet{origin: "0123abcd"}
	var got []byte
	b := f.cursorMessage(12345)
	got = append(got, b...)
	m, err := decode(got)
	if err != nil || m.Kind != kindCursor || m.Cursor != 12345 || m.Origin != "0123abcd" {
		t.Fatalf("%s: %+v %v", got, m, err)
	}
}

// FuzzDecode: whatever a peer sends is refused or yields a message within
// bounds, and never a panic. Received as it is, no input gets past the
// signature; signed with the fleet's key (a replica's message, or a key
// holder's), it opens to itself and decode's bounds still hold.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":2,"o":"ab","k":"c","c":1}`))
	f.Add([]byte(`{"v":2,"o":"ab","k":"t","c":3,"e":{"v":1,"type":"message.update","stream_id":"s","text":"x"}}`))
	f.Add([]byte(`{"v":2,"o":"ab","k":"p","c":3,"g":2,"pt":0,"pn":1,"all":["phone"],"on":["a"],"off":["b"]}`))
	f.Add([]byte(`{"v":2,"o":"ab","k":"t","e":{"v":1,"type":"picker.closed"},"pc":{"id":"p"}}`))
	f.Add([]byte(`{"v":2,"o":"ab","k":"x","x":{"op":"pick","chat":"c","picker":"pk_1","value":"once","device":"phone"}}`))
	f.Add([]byte(`{"v":2,"o":"ab","k":"x","x":{"op":"stop","chat":"c","thread":"t"}}`))
	s := newSealer(testKey, "irisgate.frames")
	now := time.Now()
	f.Fuzz(func(t *testing.T, b []byte) {
		if body, err := s.open("irisgate.frames", b, now); err == nil {
			t.Fatalf("unsigned input accepted: %q", body)
		}
		body, err := s.open("irisgate.frames", s.seal("irisgate.frames", bytes.Clone(b), now), now)
		if len(b) > MaxMessage-trailer {
			if err != errTooLarge {
				t.Fatalf("%d bytes signed: %v", len(b), err)
			}
		} else if err != nil || !bytes.Equal(body, b) {
			t.Fatalf("signed, opened to %q, %v", body, err)
		}
		m, err := decode(b)
		if err != nil {
			return
		}
		if m.Cursor < 0 || len(m.On)+len(m.Off)+len(m.All) > MaxIDs || !validOrigin(m.Origin) {
			t.Fatalf("out of bounds: %+v", m)
		}
		if m.Kind == kindTransient {
			ev, err := m.event()
			if err == nil && (ev.Type.Durable() || !relayed[ev.Type]) {
				t.Fatalf("relayed a %s", ev.Type)
			}
		}
		if m.Kind == kindCommand {
			c := m.Cmd
			if c == nil || len(c.Value) > maxValue || len(c.Picker) > maxID || len(c.Chat) > maxID || len(c.Thread) > maxID ||
				len(c.Device) > 128 || (c.Op == opStop) == (c.Picker != "") {
				t.Fatalf("command out of bounds: %+v", c)
			}
		}
		ps := newPeers(1e9, func() time.Time { return time.Time{} })
		ps.apply(m.Origin, m)
	})
}
