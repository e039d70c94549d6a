package iris

import (
	"encoding/json"
	"math"
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

// FuzzMessageFramesMatchEncodingJSON holds message.new and message.update,
// which encodeEvent writes without encoding/json, to the bytes encoding/json
// makes of the same envelope and payload: any text (HTML, U+2028, invalid
// UTF-8), any lane, any id or cursor, with and without media and runtime, and a runtime figure
// encoding/json refuses (both give the same error frame).
func FuzzMessageFramesMatchEncodingJSON(f *testing.F) {
	f.Add("m_1", "user", "hello", "", "default", "", int64(0), int64(0), int64(1733050000000), 0, false)
	f.Add("m\u2028", "cron", "<&>\"\\\x00\xff", "r\t\xe2\x82", "chan_\"<x>\"", "t_1", int64(7), int64(1042), int64(-1), -3, true)
	f.Fuzz(func(t *testing.T, id, role, text, reasoning, chatID, threadID string, reqID, cursor, ts int64, tokens int, extras bool) {
		lane := core.Lane{ChatID: chatID, ThreadID: threadID}
		m := &core.Message{ID: id, Lane: lane, Role: role, Text: text, Reasoning: reasoning, ReplyTo: reasoning, Model: threadID, Tokens: tokens, TS: ts}
		if extras {
			m.Media = []core.Media{{ID: text, Kind: role, Filename: reasoning, Size: ts}}
			m.Runtime = &core.Runtime{Model: text, Cwd: reasoning}
			if tokens%2 != 0 { // a figure encoding/json refuses: the error frame
				nan := math.NaN()
				m.Runtime.Latency = &nan
			}
		}
		for _, ev := range []*core.Event{
			{Type: core.EvMessage, Lane: lane, Message: m},
			{Type: core.EvMessageUpdate, Lane: lane, StreamID: id, Text: text},
		} {
			var p any = messagePayload(m)
			if ev.Type == core.EvMessageUpdate {
				p = irisv1.MessageUpdate{MessageID: id, Text: text}
			}
			want := marshal(frameEnv(ev, irisv1.FrameType(ev.Type), reqID, cursor), p)
			if got := encodeEvent(ev, reqID, cursor); string(got) != string(want) {
				t.Fatalf("%s:\n got %s\nwant %s", ev.Type, got, want)
			}
		}
	})
}
