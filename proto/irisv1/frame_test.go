package irisv1

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendFrame writes the envelope by hand; it must equal what
// encoding/json makes of the same envelope, escapes included.
func TestAppendFrameMatchesEncodingJSON(t *testing.T) {
	for _, env := range []Envelope{
		{V: 1, Type: TypeMessageUpdate},
		{V: 1, ID: 42, Type: TypeHistory, ChatID: "default", ThreadID: "t_\"<x>\"", Cursor: 9},
		{V: 1, Type: TypeStatus, ChatID: "ünï\u2028"},
		{V: 1, ID: -3, Type: "a&b\\c\x7f\x01", ChatID: "chan_\xff", ThreadID: "t_\u2029>"},
	} {
		p := map[string]any{"text": "a \"quoted\" <b> & \u2028 ✓", "n": 3}
		b, _ := json.Marshal(p)
		got := AppendFrame(nil, env, b)
		env.Payload = b
		want, _ := json.Marshal(env)
		if string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		if m, _ := Marshal(env, p); string(m) != string(want) {
			t.Fatalf("Marshal:\n got %s\nwant %s", m, want)
		}
	}
	// An empty payload is null, as encoding/json writes a nil RawMessage.
	want, _ := json.Marshal(Envelope{V: 1, Type: TypePong})
	if got := AppendFrame(nil, Envelope{V: 1, Type: TypePong}, nil); string(got) != string(want) {
		t.Fatalf("empty payload: got %s, want %s", got, want)
	}
	// dst is appended to, not overwritten.
	if got := AppendFrame([]byte("x"), Envelope{V: 1, Type: TypePong}, []byte("{}")); string(got) != `x{"v":1,"type":"pong","payload":{}}` {
		t.Fatalf("append: got %s", got)
	}
}

// A replayed frame is the broadcast frame with the cursor spliced in; it
// must equal writing the cursor from the start, even when ids in the
// envelope look like the payload key.
func TestSpliceCursorMatchesWritingIt(t *testing.T) {
	for _, env := range []Envelope{
		{V: 1, Type: TypeMessage, ChatID: `chan_,"payload":x`, ThreadID: "t_1"},
		{V: 1, Type: TypeAgentIdle},
	} {
		payload := []byte(`{"text":"say ,\"payload\": {}"}`)
		got := SpliceCursor(AppendFrame(nil, env, payload), 1042)
		env.Cursor = 1042
		if want := AppendFrame(nil, env, payload); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	}
	if SpliceCursor(nil, 1) != nil {
		t.Fatal("no frame must stay no frame")
	}
	if SpliceCursor([]byte(`{"v":1}`), 1) != nil {
		t.Fatal("a frame without a payload member is not one AppendFrame wrote")
	}
}
