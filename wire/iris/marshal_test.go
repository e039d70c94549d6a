package iris

import (
	"encoding/json"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// marshal writes the envelope by hand; it must equal what encoding/json
// makes of the same envelope.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	for _, env := range []irisv1.Envelope{
		{V: 1, Type: "message.update"},
		{V: 1, ID: 42, Type: "history", ChatID: "default", ThreadID: "t_\"<x>\"", Cursor: 9},
		{V: 1, Type: "status", ChatID: "ünï\u2028"},
	} {
		p := map[string]any{"text": "a \"quoted\" <b> & \u2028 ✓", "n": 3}
		got := marshal(env, p)
		env.Payload, _ = json.Marshal(p)
		want, _ := json.Marshal(env)
		if string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	}
}

// A replayed frame is the broadcast encoding with the cursor spliced in;
// it must equal encoding the event with the cursor from the start, even
// when ids in the envelope look like the payload key.
func TestWithCursorMatchesEncodingWithIt(t *testing.T) {
	lane := core.Lane{ChatID: `chan_,"payload":x`, ThreadID: "t_1"}
	for _, ev := range []*core.Event{
		{Type: core.EvMessage, Lane: lane, Message: &core.Message{ID: "m_1", Role: core.RoleUser, Text: `say ,"payload": {}`, TS: 5}},
		{Type: core.EvChannelCreated, Channel: &core.Channel{ChatID: "chan_2", Name: "Two", Kind: core.KindChannel}},
		{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: core.DefaultChatID}},
	} {
		got := withCursor(broadcast(ev), 1042)
		want := encodeEvent(ev, 0, 1042)
		if string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	}
	if withCursor(nil, 1) != nil {
		t.Fatal("an event Iris has no frame for must stay frameless")
	}
}
