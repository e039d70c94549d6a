package server

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/wire"
)

// A connection that never says hello is told so before its dialect is
// known: the frame must read as a fatal error in each, with each one's
// code, and close with Hermes Mobile's code (which names the problem for
// Iris too).
func TestRefusalsReadInBothDialects(t *testing.T) {
	s := &Server{dialects: newDialects(Config{}, nil, nil, slog.Default())}
	for _, tc := range []struct {
		name       string
		f          *wire.Fatal
		iris, msg  string
		mobileCode string
	}{
		{"hello timeout", s.refuse(wire.ErrHelloTimeout.New()), "unsupported", "no hello within the timeout", "auth_required"},
		{"evicted", s.refuse(wire.ErrHelloEvicted.New()), "rate_limited", "too many connections are waiting to say hello: try again", "auth_required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As an Iris app reads it.
			var i struct {
				V       int    `json:"v"`
				Type    string `json:"type"`
				Payload struct {
					Code, Message string
				} `json:"payload"`
			}
			if err := json.Unmarshal(tc.f.Frame, &i); err != nil {
				t.Fatal(err)
			}
			if i.V != 1 || i.Type != "error" || i.Payload.Code != tc.iris || i.Payload.Message != tc.msg {
				t.Errorf("as Iris: %+v", i)
			}
			// As a Hermes Mobile app reads it.
			var m struct {
				T, Code, Message string
				Fatal            bool
			}
			if err := json.Unmarshal(tc.f.Frame, &m); err != nil {
				t.Fatal(err)
			}
			if m.T != "error" || m.Code != tc.mobileCode || m.Message != tc.msg || !m.Fatal {
				t.Errorf("as Hermes Mobile: %+v", m)
			}
			if tc.f.Status != websocket.StatusPolicyViolation || tc.f.Reason != tc.mobileCode {
				t.Errorf("closes with %v %q", tc.f.Status, tc.f.Reason)
			}
		})
	}
}
