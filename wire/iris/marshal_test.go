package iris

import (
	"encoding/json"
	"testing"
)

// marshal writes the envelope by hand; it must equal what encoding/json
// makes of the same envelope.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	for _, env := range []envelope{
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
