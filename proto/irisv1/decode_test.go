package irisv1

import (
	"errors"
	"testing"
)

// A request whose envelope has a member of the wrong type but a readable
// integer id must still yield the id: the app waits for an answer to it.
func TestDecodeRequestKeepsIDOfMalformedFrame(t *testing.T) {
	for in, want := range map[string]string{
		`{"v":1,"id":7,"type":5,"payload":{}}`:                     "malformed frame: type must be string",
		`{"v":1,"id":7,"type":"ping","chat_id":5,"payload":{}}`:    "malformed frame: chat_id must be string",
		`{"v":"1","id":7,"type":"ping","payload":{}}`:              "malformed frame: v must be int",
		`{"v":2,"id":7,"type":"ping"}`:                             ErrVersion.Error(),
		`{"v":1,"id":7,"payload":{}}`:                              "frame has no type",
		`{"v":1,"id":7,"type":"","thread_id":null,"payload":null}`: "frame has no type",
	} {
		_, err := DecodeRequest([]byte(in))
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("DecodeRequest(%s) = %v, want a *DecodeError", in, err)
		}
		if de.ID != 7 || err.Error() != want {
			t.Errorf("DecodeRequest(%s) = id %d, %q; want id 7, %q", in, de.ID, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"v":1,"id":"7","type":"ping"}`: "id must be an integer",
		`{"v":1,"id":1.5,"type":"ping"}`: "id must be an integer",
		`{"v":1,"id":7,"type":"ping"`:    "malformed frame: unexpected end of JSON input",
		`[1,2]`:                          "malformed frame:  must be irisv1.inEnvelope", // today's wording, Go name and all (see jsonError),
	} {
		_, err := DecodeRequest([]byte(in))
		var de *DecodeError
		if !errors.As(err, &de) || de.ID != 0 || err.Error() != want {
			t.Errorf("DecodeRequest(%s) = %v; want id 0, %q", in, err, want)
		}
	}
	if _, err := DecodeRequest([]byte(`{"v":0,"type":"ping"}`)); !errors.Is(err, ErrVersion) {
		t.Errorf("v 0 is another version, got %v", err)
	}
}

func TestDecodeRequest(t *testing.T) {
	r, err := DecodeRequest([]byte(`{"id":9,"type":"message.send","chat_id":"chan_1","thread_id":"t_2","cursor":5,"payload":{"text":"hi","media_refs":["a"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.V != Version || r.ID != 9 || r.Type != TypeMessageSend || r.Lane() != (Lane{"chan_1", "t_2"}) || r.Cursor != 0 {
		t.Fatalf("envelope: %+v", r.Envelope)
	}
	var p MessageSend
	if err := DecodePayload(r, &p); err != nil || p.Text != "hi" || len(p.MediaRefs) != 1 {
		t.Fatalf("payload %+v, %v", p, err)
	}
	for _, in := range []string{`{"type":"ping"}`, `{"type":"ping","payload":null}`} {
		r, err := DecodeRequest([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		p := Ping{}
		if err := DecodePayload(r, &p); err != nil || p.TS != nil {
			t.Fatalf("%s: absent and null payloads are empty: %+v, %v", in, p, err)
		}
	}
	r, _ = DecodeRequest([]byte(`{"type":"history","payload":{"limit":"ten"}}`))
	if err := DecodePayload(r, new(HistoryRequest)); err == nil || err.Error() != "malformed history payload: limit must be int" {
		t.Fatalf("a member of the wrong type: %v", err)
	}
}

func TestNullable(t *testing.T) {
	for in, want := range map[string]struct {
		s  string
		ok bool
	}{
		`{}`:               {"", true},
		`{"icon":null}`:    {"", true},
		`{"icon":"iVBOR"}`: {"iVBOR", true},
		`{"icon":5}`:       {"", false},
		`{"icon":{}}`:      {"", false},
	} {
		r, _ := DecodeRequest([]byte(`{"type":"channel.icon","payload":` + in + `}`))
		var p ChannelIcon
		if err := DecodePayload(r, &p); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if s, ok := p.Icon.Value(); s != want.s || ok != want.ok {
			t.Errorf("%s: Value() = %q, %v; want %q, %v", in, s, ok, want.s, want.ok)
		}
	}
	for p, want := range map[*ChannelIcon]string{
		{ChatID: "c"}: `{"chat_id":"c"}`,
		{Icon: Null(), Color: NullableString("#a0b1c2")}: `{"icon":null,"color":"#a0b1c2"}`,
	} {
		b, err := Marshal(Envelope{V: 1, Type: TypeChannelIcon}, p)
		if err != nil || string(b) != `{"v":1,"type":"channel.icon","payload":`+want+`}` {
			t.Errorf("Marshal(%+v) = %s, %v", *p, b, err)
		}
	}
}
