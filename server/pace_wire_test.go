package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/internal/testgw"
)

// countedDevice is an Iris device whose socket counts the bytes the
// server wrote to it, framing and compression included.
type countedDevice struct {
	ws  *websocket.Conn
	n   atomic.Int64
	ext string
}

func dialCounted(t *testing.T, g *testgw.GW, id string, offer bool) *countedDevice {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	d := &countedDevice{}
	var nd net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{c, &d.n}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	mode := websocket.CompressionDisabled
	if offer {
		mode = websocket.CompressionContextTakeover // offers plain "permessage-deflate", as browsers do
	}
	ws, resp, err := websocket.Dial(ctx, g.URL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, CompressionMode: mode})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	ws.SetReadLimit(1 << 20)
	d.ws, d.ext = ws, resp.Header.Get("Sec-WebSocket-Extensions")
	r := &raw{t: t, ws: ws}
	r.writeJSON(helloFrame(testgw.Token, id))
	for _, want := range []string{"hello.ack", "status"} {
		if f, err := r.read(); err != nil || f.Type != want {
			t.Fatalf("%s: waiting for %s, got %s %v", id, want, f.Type, err)
		}
	}
	return d
}

// turnStats is what a device read of one turn.
type turnStats struct {
	wire    int64 // bytes on its socket from message.start to agent.idle
	updates int
	first   string // the first message.update's text
	final   string
	err     error
}

// readTurn reads d's frames until agent.idle (in its own goroutine: no
// t.Fatal here).
func (d *countedDevice) readTurn(ctx context.Context) turnStats {
	n0 := d.n.Load()
	var st turnStats
	for {
		_, data, err := d.ws.Read(ctx)
		if err != nil {
			st.err = err
			return st
		}
		var f struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			st.err = fmt.Errorf("frame %.100s: %v", data, err)
			return st
		}
		switch f.Type {
		case "message.start":
			// The reply's bytes from here (the person's message, which
			// the echo agent repeats, came before).
			n0 = d.n.Load() - int64(len(data))
		case "message.update":
			st.updates++
			if st.updates == 1 {
				var p struct {
					Text string `json:"text"`
				}
				json.Unmarshal(f.Payload, &p)
				st.first = p.Text
			}
		case "message.stop":
			var p struct {
				FinalText string `json:"final_text"`
			}
			json.Unmarshal(f.Payload, &p)
			st.final = p.FinalText
		case "agent.idle":
			st.wire = d.n.Load() - n0
			return st
		}
	}
}

// A reply streamed word by word costs a device a bounded multiple of its
// size on the wire, paced by bytes (hub/pace.go): at most 30 times without
// permessage-deflate and 3 times with it (issue 17), and the final text
// arrives whole on both.
func TestStreamedReplyBytesOnTheWireBounded(t *testing.T) {
	g := testgw.Start(t, slowEcho(2*time.Millisecond))
	plain := dialCounted(t, g, "plain", false)
	deflated := dialCounted(t, g, "deflated", true)
	if !strings.Contains(deflated.ext, "permessage-deflate") || strings.Contains(plain.ext, "permessage-deflate") {
		t.Fatalf("extensions: plain %q, deflate %q", plain.ext, deflated.ext)
	}
	text := words(1500)
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	type result struct {
		name  string
		bound float64
		st    turnStats
	}
	got := make(chan result, 2)
	for _, d := range []struct {
		name  string
		dev   *countedDevice
		bound float64
	}{{"without deflate", plain, 30}, {"with deflate", deflated, 3}} {
		go func() { got <- result{d.name, d.bound, d.dev.readTurn(ctx)} }()
	}
	// Sent from a third device: its own frames are not counted.
	send(t, g.Dial(t, "sender"), def, text)
	for range 2 {
		r := <-got
		if r.st.err != nil {
			t.Fatalf("%s: reading the turn: %v", r.name, r.st.err)
		}
		if r.st.final != text {
			t.Fatalf("%s: final text of %d bytes, want the whole %d", r.name, len(r.st.final), len(text))
		}
		ratio := float64(r.st.wire) / float64(len(text))
		t.Logf("%s: %d bytes on the wire for a %d-byte reply (%.2fx), %d updates", r.name, r.st.wire, len(text), ratio, r.st.updates)
		if ratio > r.bound {
			t.Errorf("%s: %.2fx the reply on the wire, want at most %.0fx", r.name, ratio, r.bound)
		}
	}
}

// A reply streamed slowly (about 400 B/s, a model's pace) costs a device
// that offers permessage-deflate at most 3 times its size on the wire,
// and moves as often as on a device that does not: its updates are
// compressed with the device's window (compress.go), so each costs about
// what it adds; compressed on their own each cost half its size again,
// and fewer of them were sent (3.2x here with a quarter of the updates;
// 3.9x at 300 B/s in irisgate bench). The first update goes at once (it
// carries the first word only: the next comes 12 ms later), and the final
// text arrives whole.
func TestSlowStreamBytesOnTheWireWithDeflate(t *testing.T) {
	g := testgw.Start(t, slowEcho(12*time.Millisecond))
	plain := dialCounted(t, g, "plain", false)
	deflated := dialCounted(t, g, "deflated", true)
	if !strings.Contains(deflated.ext, "permessage-deflate") || strings.Contains(plain.ext, "permessage-deflate") {
		t.Fatalf("extensions: plain %q, deflate %q", plain.ext, deflated.ext)
	}
	text := words(1200) // 6.1 KB, over about 14 s
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait+20*time.Second)
	defer cancel()
	got := make(chan turnStats, 2)
	for _, d := range []*countedDevice{plain, deflated} {
		go func() { got <- d.readTurn(ctx) }()
	}
	send(t, g.Dial(t, "sender"), def, text)
	var sts [2]turnStats
	for i := range sts {
		sts[i] = <-got
		if sts[i].err != nil {
			t.Fatalf("reading the turn: %v", sts[i].err)
		}
	}
	if sts[0].wire > sts[1].wire {
		sts[0], sts[1] = sts[1], sts[0]
	}
	dst, pst := sts[0], sts[1] // the deflate device read fewer bytes
	for _, st := range sts {
		if st.final != text {
			t.Fatalf("final text of %d bytes, want the whole %d", len(st.final), len(text))
		}
		if st.first != "w1 " {
			t.Errorf("first update %.40q: want the first word alone, sent at once", st.first)
		}
	}
	ratio := float64(dst.wire) / float64(len(text))
	t.Logf("deflate: %d bytes on the wire for a %d-byte reply (%.2fx), %d updates; plain: %.2fx, %d updates",
		dst.wire, len(text), ratio, dst.updates, float64(pst.wire)/float64(len(text)), pst.updates)
	if ratio > 3 {
		t.Errorf("deflate: %.2fx the reply on the wire, want at most 3x", ratio)
	}
	if dst.updates*2 < pst.updates {
		t.Errorf("deflate: %d updates, plain %d: want the reply to move about as often", dst.updates, pst.updates)
	}
}
