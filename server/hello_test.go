package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

func TestHelloAck(t *testing.T) { testHelloAck(t) }

func testHelloAck(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, on...)

	r := dialRaw(t, g)
	r.writeJSON(helloFrame(testgw.Token, "phone"))
	ack, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	if ack.Type != "hello.ack" || ack.ID != 1 {
		t.Fatalf("first frame = %s, want hello.ack with the hello's id", ack.Raw)
	}
	var w struct {
		ServerCaps       map[string]any `json:"server_caps"`
		SyncCursor       *int64         `json:"sync_cursor"`
		LastPushedCursor *int64         `json:"last_pushed_cursor"`
		Channels         []chanEntry    `json:"channels"`
	}
	if err := ack.Decode(&w); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"streaming", "reasoning", "tools", "media", "search", "push", "pickers"} {
		if _, ok := w.ServerCaps[k]; !ok {
			t.Errorf("server_caps lacks %s: %s", k, ack.Payload)
		}
	}
	if w.ServerCaps["push"] != "none" {
		t.Errorf("server_caps.push = %v, want none (no push backend configured)", w.ServerCaps["push"])
	}
	if w.SyncCursor == nil || *w.SyncCursor != 0 || w.LastPushedCursor == nil || *w.LastPushedCursor != 0 {
		t.Errorf("cursors of a fresh gateway: %s", ack.Payload)
	}
	want := chanEntry{ChatID: "default", Name: "Default", Kind: "default", IsDefault: true}
	if len(w.Channels) != 1 || w.Channels[0] != want {
		t.Errorf("channels = %+v, want only %+v", w.Channels, want)
	}
	st, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	if st.Type != "status" || testgw.Str(t, st, "state") != "online" || st.ID != 0 {
		t.Fatalf("frame after hello.ack = %s, want status online", st.Raw)
	}

	// sync_cursor is the outbox head and channels the whole directory at
	// the moment of the ack.
	a := g.Dial(t, "tablet")
	createChannel(t, a, "Reports", "")
	b := g.Dial(t, "laptop")
	if w := b.HelloAck(); w.SyncCursor != 1 || len(w.Channels) != 2 {
		t.Errorf("welcome after one channel.created: sync_cursor %d, %d channels", w.SyncCursor, len(w.Channels))
	}
	if f := b.Next(); f.Type != "status" {
		t.Errorf("first frame after hello.ack = %s, want status", f.Raw)
	}
}

func TestHelloRefused(t *testing.T) {
	g := testgw.Start(t)
	hello := func(mod func(m map[string]any)) map[string]any {
		h := helloFrame(testgw.Token, "phone")
		if mod != nil {
			mod(h)
		}
		return h
	}
	payload := func(m map[string]any) map[string]any { return m["payload"].(map[string]any) }
	for _, tc := range []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"wrong token", hello(func(m map[string]any) { payload(m)["token"] = "not-the-token" }), "auth"},
		{"no token", hello(func(m map[string]any) { delete(payload(m), "token") }), "auth"},
		{"first frame not hello", map[string]any{"v": 1, "id": 3, "type": "ping", "payload": map[string]any{"ts": 1}}, "unsupported"},
		{"unknown major version", hello(func(m map[string]any) { m["v"] = 2 }), "unsupported"},
		{"app needs a newer protocol", hello(func(m map[string]any) { payload(m)["caps"] = map[string]any{"min_protocol": 2} }), "unsupported"},
		{"malformed hello payload", hello(func(m map[string]any) { m["payload"] = map[string]any{"token": 42} }), "unsupported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, g)
			r.writeJSON(tc.frame)
			r.refused(tc.code, websocket.StatusPolicyViolation)
		})
	}
	t.Run("not an Iris frame", func(t *testing.T) {
		r := dialRaw(t, g)
		r.write(websocket.MessageText, []byte("hello?"))
		if got, st := r.untilClose(); st != websocket.StatusPolicyViolation {
			t.Fatalf("close status = %v after %s, want 1008", st, typesOf(got))
		}
	})
	t.Run("binary first frame", func(t *testing.T) {
		r := dialRaw(t, g)
		r.write(websocket.MessageBinary, []byte{1, 2, 3})
		if got, st := r.untilClose(); st != websocket.StatusPolicyViolation {
			t.Fatalf("close status = %v after %s, want 1008", st, typesOf(got))
		}
	})
}

func TestHelloTimeout(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.HelloTimeout = 200 * time.Millisecond })
	r := dialRaw(t, g)
	got, st := r.untilClose()
	if len(got) != 1 || got[0].Type != "error" {
		t.Fatalf("frames before the close: %s, want one error", typesOf(got))
	}
	if st != websocket.StatusPolicyViolation {
		t.Fatalf("close status = %v, want 1008", st)
	}
	// A device that says hello in time is not affected.
	a := g.Dial(t, "phone")
	a.MustDo("ping", client.Lane{}, nil)
}

func TestStoredTokens(t *testing.T) {
	g := testgw.Start(t)
	ctx := context.Background()
	anyTok, rec, err := gateway.CreateToken(ctx, g.App.Store, "any device", "")
	if err != nil {
		t.Fatal(err)
	}
	bound, _, err := gateway.CreateToken(ctx, g.App.Store, "bound", "dev_x")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, device, code string
	}{
		{"unbound token, any device", anyTok, "dev_y", ""},
		{"bound token, its device", bound, "dev_x", ""},
		{"bound token, another device", bound, "dev_y", "auth"},
		{"bound token, no device id", bound, "", "auth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := g.DialErr(t, tc.device, tc.token)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			d.MustDo("ping", client.Lane{}, nil)
		})
	}
	t.Run("revoked token", func(t *testing.T) {
		if err := g.App.Store.RevokeToken(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		_, err := g.DialErr(t, "dev_y", anyTok)
		wantCode(t, err, "auth")
	})
}

func TestSameDeviceReplaces(t *testing.T) {
	g := testgw.Start(t)
	first := g.Dial(t, "phone")
	first.Expect("status", nil)
	second := g.Dial(t, "phone")
	if st := closed(t, first); st != websocket.StatusNormalClosure {
		t.Fatalf("first connection closed with %v, want a normal closure", st)
	}
	// The newer connection is the device's: broadcasts reach it.
	other := g.Dial(t, "tablet")
	c := createChannel(t, other, "Reports", "")
	second.Expect("channel.created", is(t, "channel.created", "chat_id", c.ChatID))
	second.MustDo("ping", client.Lane{}, nil)
}
