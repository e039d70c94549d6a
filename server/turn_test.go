package server_test

import (
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

var def = client.Lane{ChatID: "default"}

func TestHelloAndTurn(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	w := a.Welcome()
	if len(w.Channels) != 1 {
		t.Fatalf("channels = %d, want the default channel", len(w.Channels))
	}
	a.Expect("status", nil)
	b.Expect("status", nil)

	echo := a.MustDo("message.send", def, map[string]any{"text": "hello there world"})
	if echo.Type != "message" || testgw.Str(t, echo, "role") != "user" {
		t.Fatalf("echo = %s", echo.Raw)
	}
	id := testgw.Str(t, echo, "message_id")
	a.Expect("read.receipt", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == id })
	for _, d := range []*testgw.Device{a, b} {
		d.Expect("agent.busy", nil)
		d.Expect("typing", nil)
		d.Expect("message.start", nil)
		stop := d.Expect("message.stop", nil)
		if got := testgw.Str(t, stop, "final_text"); got != "hello there world" {
			t.Errorf("%s: final_text = %q", d.ID, got)
		}
		d.Expect("agent.idle", nil)
	}
}
