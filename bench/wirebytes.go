package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// countingConn counts the bytes read from a connection: on a device's
// socket, what the server wrote, WebSocket framing and all.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// wireStats is what one streamed reply cost on the wire.
type wireStats struct {
	bytes      int64 // read from the socket, from the send to agent.idle
	updates    int64 // message.update frames
	reply      int   // bytes of the reply's final text
	negotiated bool  // the server answered the deflate offer
	ext        string
	// longest is the longest time between two message.updates (as the
	// device read them): how long the reply stood still for a watcher.
	longest time.Duration
}

var keyFinal = []byte(`"final_text":"`)

// replyBytes has one device (offering permessage-deflate when deflate is
// set) ask for a streamed reply and counts the bytes the server writes on
// its socket for the whole turn.
func replyBytes(ctx context.Context, url string, ask streamAsk, deflate bool) (wireStats, error) {
	var st wireStats
	var n atomic.Int64
	var nd net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, n: &n}, nil
	}}
	defer tr.CloseIdleConnections()
	opts := &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, CompressionMode: websocket.CompressionDisabled}
	if deflate {
		opts.CompressionMode = websocket.CompressionContextTakeover
	}
	id := "wire-plain"
	if deflate {
		id = "wire-deflate"
	}
	d, resp, _, err := dialRawOpts(ctx, url, id, opts)
	if err != nil {
		return st, err
	}
	defer d.close()
	st.ext = resp.Header.Get("Sec-WebSocket-Extensions")
	st.negotiated = strings.Contains(st.ext, "permessage-deflate")
	status, idle := make(chan struct{}, 1), make(chan struct{}, 1)
	var updates atomic.Int64
	var final, longest atomic.Int64
	var lastUpdate time.Time // only serve's goroutine touches it
	sent := make(chan struct{})
	d.serve(func(b []byte) {
		switch string(frameType(b)) {
		case irisv1.TypeStatus:
			select {
			case status <- struct{}{}:
			default:
			}
		case irisv1.TypeMessageUpdate:
			updates.Add(1)
			now := time.Now()
			if !lastUpdate.IsZero() && int64(now.Sub(lastUpdate)) > longest.Load() {
				longest.Store(int64(now.Sub(lastUpdate)))
			}
			lastUpdate = now
		case irisv1.TypeMessageStop:
			if i := bytes.Index(b, keyFinal); i >= 0 {
				final.Store(int64(bytes.IndexByte(b[i+len(keyFinal):], '"')))
			}
		case irisv1.TypeAgentIdle:
			select {
			case <-sent:
				select {
				case idle <- struct{}{}:
				default:
				}
			default:
			}
		}
	})
	// The status frame follows hello.ack: let it pass before counting.
	select {
	case <-status:
	case <-time.After(2 * time.Second):
	}
	n0 := n.Load()
	close(sent)
	if _, err := d.send(ctx, irisv1.TypeMessageSend, core.DefaultChatID, fmt.Appendf(nil, `{"text":%q}`, ask.text())); err != nil {
		return st, err
	}
	limit := 30*time.Second + time.Duration(float64(ask.events)/max(ask.rate, 1)*float64(time.Second))
	select {
	case <-idle:
	case <-d.done:
		return st, fmt.Errorf("connection ended during the reply: %v", d.err)
	case <-ctx.Done():
		return st, ctx.Err()
	case <-time.After(limit):
		return st, fmt.Errorf("no agent.idle within %v", limit)
	}
	st.bytes = n.Load() - n0
	st.updates = updates.Load()
	st.longest = time.Duration(longest.Load())
	st.reply = int(final.Load())
	if want := ask.events * ask.chunk; st.reply != want {
		return st, fmt.Errorf("final text of %d bytes, want %d", st.reply, want)
	}
	return st, nil
}

// idleRSS opens n idle connections to a fresh child of mode and returns the
// child's resident memory per connection (bytes). Each Iris device says
// hello (offering permessage-deflate when deflate is set, as browsers do);
// each bare one sends one message and gets its echo.
func idleRSS(ctx context.Context, o *Options, mode string, n int, deflate bool) (float64, error) {
	m, err := idleMem(ctx, o, mode, n, deflate)
	return float64(m.rss), err
}

// idleMem is idleRSS with the Go heap, stacks and goroutines per
// connection beside the RSS (zero for a child without /metrics).
func idleMem(ctx context.Context, o *Options, mode string, n int, deflate bool) (memSample, error) {
	child, err := startChild(ctx, o, mode, 0)
	if err != nil {
		return memSample{}, err
	}
	defer child.stop()
	dial := dialRaw
	if mode == childBare {
		dial = dialBare
	}
	if deflate {
		dial = dialDeflate
	}
	settle := time.Second
	if o.Quick {
		settle = 200 * time.Millisecond
	}
	pid := child.cmd.Process.Pid
	// Warm up, as the memory scenario does, so one-time costs are in the
	// baseline.
	if w, err := dialManyWith(ctx, child.url, 10, 10, func(i int) string { return fmt.Sprintf("warm-%d", i) }, dial); err == nil {
		for _, d := range w {
			d.serve(nil)
		}
		closeAll(w)
	}
	time.Sleep(settle / 2)
	before, err := sample(ctx, pid, child.base)
	if err != nil {
		return memSample{}, err
	}
	devs, err := dialManyWith(ctx, child.url, n, 64, func(i int) string { return fmt.Sprintf("idle-%05d", i) }, dial)
	if err != nil {
		return memSample{}, err
	}
	defer closeAll(devs)
	for _, d := range devs {
		d.serve(nil)
	}
	time.Sleep(settle)
	after, err := sample(ctx, pid, child.base)
	if err != nil {
		return memSample{}, err
	}
	time.Sleep(settle)
	if a2, err := sample(ctx, pid, child.base); err == nil && a2.rss > after.rss {
		after = a2
	}
	if o.ProfileDir != "" {
		child.cmd.Process.Signal(syscall.SIGUSR1) // a heap profile of the idle connections
		time.Sleep(settle / 2)
	}
	for _, d := range devs {
		select {
		case <-d.done:
			return memSample{}, fmt.Errorf("device %s dropped while idle: %v", d.id, d.err)
		default:
		}
	}
	per := func(a, b float64) float64 { return (b - a) / float64(n) }
	return memSample{rss: int64(per(float64(before.rss), float64(after.rss))), heapInuse: per(before.heapInuse, after.heapInuse),
		stackInuse: per(before.stackInuse, after.stackInuse), goroutines: per(before.goroutines, after.goroutines)}, nil
}

// dialDeflate is dialRaw offering permessage-deflate.
func dialDeflate(ctx context.Context, url, id string) (*rawDev, error) {
	d, _, _, err := dialRawOpts(ctx, url, id, &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover})
	return d, err
}

// dialBare connects to the bare server and makes one round trip.
func dialBare(ctx context.Context, url, id string) (*rawDev, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	if err := roundTrip(ctx, ws, fmt.Appendf(nil, `{"v":1,"type":"hello","payload":{"device_id":%q}}`, id)); err != nil {
		ws.CloseNow()
		return nil, err
	}
	return &rawDev{id: id, ws: ws, done: make(chan struct{})}, nil
}
