package server_test

import (
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// A delivery token opens a service session, never a phone's: named after
// the phone it claims to be, it does not replace that phone, reads none of
// its lane, cannot speak or answer for it, and may only deliver and ping.
// (Before, it became the phone: it replaced the owner's connection, got
// its lane's replies, sent as it and answered its approvals.)
func TestDeliveryTokenOpensAServiceSession(t *testing.T) {
	g := mobileGW(t, withDeliverToken)
	laptop := g.Dial(t, "laptop")
	owner := connectPhone(t, g, "tel-1")
	laptop.Expect("channel.created", is(t, "channel.created", "chat_id", "mobile:tel-1"))
	svc := connectPhoneWith(t, g, nil, mhello("deliver-secret", "tel-1", "Impostor"))

	// The owner's phone is still connected, and its lane is its own.
	owner.send(text("m1", "hello agent"))
	owner.finalText("hello agent")
	if fs := svc.barrier(); countT(fs, "message") != 0 {
		t.Fatalf("the service read the phone's lane: %s", mtypes(fs))
	}
	// It may not speak, nor answer, for the phone.
	for _, f := range []map[string]any{
		text("m2", "sent by the impostor"),
		{"t": "prompt", "prompt_id": "p1", "option_id": "once"},
		{"t": "audio", "id": "a1", "format": "m4a", "data": "AAAA", "text": "hi"},
	} {
		svc.wantError(f, "forbidden")
	}
	h, err := history(t, laptop, client.Lane{ChatID: "mobile:tel-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h.Messages {
		if m.Text == "sent by the impostor" {
			t.Fatal("the service's text was taken as the phone's")
		}
	}
	// What it is for: deliveries, and pings.
	svc.send(map[string]any{"t": "deliver", "id": "d1", "target": "tel-1", "text": "from cron"})
	if got := owner.finalText("from cron"); got != "from cron" {
		t.Fatalf("delivered %q", got)
	}
	svc.send(map[string]any{"t": "ping", "ts": 1})
	svc.expect("pong", nil)
	// Nor is a service a delivery's target.
	svc.wantError(map[string]any{"t": "deliver", "id": "d2", "target": "service:tel-1", "text": "x"}, "device_offline")
	// An Iris device cannot take a service's id either.
	r := dialRaw(t, g)
	r.writeJSON(helloFrame(testgw.Token, "service:tel-1"))
	r.refused("auth", websocket.StatusPolicyViolation)
	owner.send(map[string]any{"t": "ping", "ts": 2})
	owner.expect("pong", nil)
}
