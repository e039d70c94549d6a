package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// tapDevice is an Iris device over a TCP connection the test can read
// beneath the WebSocket library: bytes taken from the socket that way are
// bytes the app never read — a device whose frames reached its socket
// while it was doing something else.
type tapDevice struct {
	t   *testing.T
	ws  *websocket.Conn
	tcp net.Conn
	ack irisv1.HelloAck
}

func dialTap(t *testing.T, g *testgw.GW, deviceID string) *tapDevice {
	t.Helper()
	d := &tapDevice{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		d.tcp = c
		return c, err
	}}}
	ws, _, err := websocket.Dial(ctx, g.URL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	d.ws = ws
	t.Cleanup(func() { ws.CloseNow() })
	d.writeJSON(helloFrame(testgw.Token, deviceID))
	for _, want := range []string{"hello.ack", "status"} {
		_, data, err := ws.Read(ctx)
		if err != nil || !bytes.Contains(data, []byte(`"type":"`+want+`"`)) {
			t.Fatalf("waiting for %s: %s %v", want, data, err)
		}
		if want == "hello.ack" {
			var f client.Frame
			if err := json.Unmarshal(data, &f); err != nil || f.Decode(&d.ack) != nil {
				t.Fatalf("hello.ack %s: %v", data, err)
			}
		}
	}
	return d
}

func (d *tapDevice) writeJSON(v any) {
	d.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		d.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	if err := d.ws.Write(ctx, websocket.MessageText, b); err != nil {
		d.t.Fatalf("write: %v", err)
	}
}

// underneath reads the socket's bytes, unseen by the app, until they
// hold each of want.
func (d *tapDevice) underneath(want ...string) []byte {
	d.t.Helper()
	var got []byte
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(testgw.Wait)
	for {
		missing := false
		for _, w := range want {
			missing = missing || !bytes.Contains(got, []byte(w))
		}
		if !missing {
			return got
		}
		d.tcp.SetReadDeadline(deadline)
		n, err := d.tcp.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			d.t.Fatalf("reading beneath the WebSocket: %v (have %q)", err, got)
		}
	}
}

// The crossing case: the device sends a frame before reading what the
// gateway wrote to it, then drops without reading it. Its frame was read
// by the gateway after those frames were written, but proves nothing of
// them (the two directions of TCP are ordered each on its own): sync
// replays every one.
func TestSyncReplaysFramesACrossingFrameDidNotProve(t *testing.T) {
	g := testgw.Start(t)
	a := dialTap(t, g, "phone")
	b := g.Dial(t, "tablet")
	msg := send(t, b, def, "crossing in the wire")
	b.Expect("agent.idle", nil)
	// Everything reached a's socket, and a has read none of it.
	a.underneath(`"type":"message"`, `"type":"agent.idle"`)
	// a's ping is read by the gateway after the frames were written: it
	// must not be taken for a receipt.
	a.writeJSON(map[string]any{"v": 1, "id": 7, "type": "ping", "payload": map[string]any{}})
	a.underneath(`"type":"pong"`)
	a.tcp.Close()

	again := g.Dial(t, "phone")
	got := syncFrom(t, again, a.ack.SyncCursor)
	if want := []string{"message", "agent.busy", "message.stop", "agent.idle"}; !slices.Equal(types(got), want) {
		t.Fatalf("replayed %v, want %v", types(got), want)
	}
	if testgw.Str(t, got[0], "message_id") != msg {
		t.Errorf("replayed %s", got[0].Raw)
	}
}

// A device that read its frames answers the gateway's WebSocket ping after
// them (the WebSocket library does, without the app): they are proven,
// and a later sync does not replay them, even after an abrupt drop.
func TestSyncSkipsProvenFrames(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	from := a.HelloAck().SyncCursor
	b := g.Dial(t, "tablet")
	first := send(t, b, def, "seen live")
	b.Expect("agent.idle", nil)
	a.Expect("agent.idle", nil)
	waitProven(t, g, "phone")
	a.CloseNow()
	<-a.Done()

	second := send(t, b, def, "sent while away")
	b.Expect("agent.idle", nil)

	a = g.Dial(t, "phone")
	got := syncFrom(t, a, from)
	if want := []string{"message", "agent.busy", "message.stop", "agent.idle"}; !slices.Equal(types(got), want) {
		t.Fatalf("replayed %v, want only the frames sent while away %v", types(got), want)
	}
	if id := testgw.Str(t, got[0], "message_id"); id != second || id == first {
		t.Errorf("replayed %s", got[0].Raw)
	}
}

// waitProven waits until the gateway holds proof that deviceID has every
// outbox frame up to the head.
func waitProven(t *testing.T, g *testgw.GW, deviceID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	head, err := g.App.Store.OutboxHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.App.Hub.WaitProven(ctx, deviceID, head); err != nil {
		t.Fatalf("%s: frames up to cursor %d not proven: %v", deviceID, head, err)
	}
}

// A sync on a connection does not queue again what that connection was
// sent live: it is ahead of the replay in the same stream.
func TestSyncSkipsFramesSentOnItsConnection(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	from := a.HelloAck().SyncCursor
	b := g.Dial(t, "tablet")
	send(t, b, def, "live on a's connection")
	b.Expect("agent.idle", nil)
	a.Expect("agent.idle", nil)
	if got := syncFrom(t, a, from); len(got) != 0 {
		t.Fatalf("replayed %v on the connection that carried them live", types(got))
	}
}

// Devices dropped again and again, while they keep sending requests that
// cross the gateway's frames in the wire, catch up on everything: every
// message reaches every device, live or by sync.
func TestReconnectStormLosesNothing(t *testing.T) {
	g := testgw.Start(t)
	px := g.NewProxy(t)
	const devices, messages = 6, 30
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type seen struct {
		mu      sync.Mutex
		ids     map[string]bool
		changed chan struct{} // closed at the next new id
	}
	var wg sync.WaitGroup
	all := make([]*seen, devices)
	for i := range devices {
		s := &seen{ids: map[string]bool{}, changed: make(chan struct{})}
		all[i] = s
		c := client.New(px.URL, client.Options{Token: testgw.Token, DeviceID: fmt.Sprintf("storm-%d", i)}, 0)
		wg.Add(3)
		go func() { defer wg.Done(); c.Run(ctx) }()
		go func() {
			defer wg.Done()
			for f := range c.Events() {
				if f.Type == "message" && !f.Binary {
					var p struct {
						ID   string `json:"message_id"`
						Role string `json:"role"`
					}
					if f.Decode(&p) == nil && p.Role == "user" {
						s.mu.Lock()
						if !s.ids[p.ID] {
							s.ids[p.ID] = true
							close(s.changed)
							s.changed = make(chan struct{})
						}
						s.mu.Unlock()
					}
				}
			}
		}()
		go func() { // requests crossing the gateway's frames
			defer wg.Done()
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				c.Request(rctx, "ping", client.Lane{}, map[string]any{"ts": 1})
				rcancel()
			}
		}()
		if _, err := c.Conn(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sender := g.Dial(t, "sender")
	var want []string
	for i := range messages {
		want = append(want, send(t, sender, def, fmt.Sprintf("storm %d", i)))
		if i%3 == 2 {
			px.Cut()
		}
	}
	deadline := time.After(30 * time.Second)
	for i, s := range all {
		for {
			s.mu.Lock()
			missing := 0
			for _, id := range want {
				if !s.ids[id] {
					missing++
				}
			}
			changed := s.changed
			s.mu.Unlock()
			if missing == 0 {
				break
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("device %d never got %d of %d messages", i, missing, messages)
			}
		}
	}
	cancel()
	wg.Wait()
}
