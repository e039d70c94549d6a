package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/wire/mobile"
)

// Tests of the bounds on what one client can make the gateway hold. Each
// reproduces a flood; the figures (goroutines, memory, a healthy device's
// latency during it) come from `irisgate bench --scenarios floods`.

// framesIn is how many frames of typ the gateway has handled, as its
// /metrics says.
func framesIn(t *testing.T, g *testgw.GW, dialect, typ string) int {
	t.Helper()
	return int(metric(t, g, fmt.Sprintf(`irisgate_frames_in_total{dialect=%q,type=%q}`, dialect, typ)))
}

// waitFramesIn waits until the gateway has handled n frames of typ.
func waitFramesIn(t *testing.T, g *testgw.GW, dialect, typ string, n int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testgw.Wait)
	for framesIn(t, g, dialect, typ) < n {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the gateway handled %d %s frames, want %d", framesIn(t, g, dialect, typ), typ, n)
		}
	}
}

// goroutinesIn counts the goroutines whose stack has fn in it.
func goroutinesIn(fn string) int {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// A flood of sync requests on one connection holds one sync, not one
// goroutine per request: while a sync runs, another is answered
// rate_limited at once. Every request gets exactly one reply.
func TestSyncFloodHoldsOneSync(t *testing.T) {
	g := testgw.Start(t)
	b := g.Dial(t, "tablet")
	// Enough outbox to fill a's socket: its first sync then waits for a
	// to read, which a does not do until the flood is in.
	text := strings.Repeat("x", 60<<10)
	for range 40 {
		send(t, b, def, text)
		b.Expect("agent.idle", nil)
	}
	a := dialRaw(t, g)
	a.ws.SetReadLimit(1 << 20)
	a.writeJSON(helloFrame(testgw.Token, "phone"))
	if f, _ := a.read(); f.Type != "hello.ack" {
		t.Fatalf("hello answered with %s", f.Raw)
	}
	const flood = 400
	before := framesIn(t, g, "iris", "sync")
	for i := range flood {
		a.writeJSON(map[string]any{"v": 1, "id": 100 + i, "type": "sync", "payload": map[string]any{"cursor": 0}})
	}
	waitFramesIn(t, g, "iris", "sync", before+flood)
	if n := goroutinesIn("wire/iris.(*Session).sync("); n > 1 {
		t.Fatalf("%d goroutines hold a sync of one connection, want at most 1", n)
	}

	answers := map[int64][]string{}
	for len(answers) < flood {
		f, err := a.read()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(answers), err)
		}
		if f.ID >= 100 {
			kind := f.Type
			if f.Type == "error" {
				kind += ":" + testgw.Str(t, f, "code")
			}
			answers[f.ID] = append(answers[f.ID], kind)
		}
	}
	done := 0
	for id, as := range answers {
		if len(as) != 1 {
			t.Errorf("sync %d answered %v", id, as)
		}
		switch as[0] {
		case "sync.done":
			done++
		case "error:rate_limited":
		default:
			t.Errorf("sync %d answered %v", id, as)
		}
	}
	// The first sync usually holds the rest off until the flood is in,
	// but the kernel's socket buffers can take its whole replay first, and
	// then a later sync runs too: what must hold is that they run one at a
	// time (the goroutine count above) and that most of the flood is
	// refused rather than queued.
	if done < 1 || done > flood/2 {
		t.Errorf("%d of %d syncs ran, want the first and few others", done, flood)
	}
	// Once the sync is done, the next one runs.
	a.writeJSON(map[string]any{"v": 1, "id": 9, "type": "sync", "payload": map[string]any{"cursor": 0}})
	for {
		f, err := a.read()
		if err != nil {
			t.Fatal(err)
		}
		if f.ID == 9 {
			if f.Type != "sync.done" {
				t.Fatalf("sync after the flood answered %s", f.Raw)
			}
			break
		}
	}
}

// A read.receipt with an id gets exactly one reply (DECISIONS: every
// request with an id does): the receipt itself, with the id. The other
// devices get the receipt without it.
func TestReadReceiptWithIDIsAnswered(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	msg := send(t, b, def, "read me")
	b.Expect("agent.idle", nil)
	a.Expect("agent.idle", nil)

	f := a.MustDo("read.receipt", def, map[string]any{"message_id": msg})
	if f.Type != "read.receipt" || testgw.Str(t, f, "message_id") != msg || f.ChatID != "default" {
		t.Fatalf("read.receipt answered with %s", f.Raw)
	}
	got := b.Expect("read.receipt", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == msg })
	if got.ID != 0 {
		t.Errorf("the other device's receipt carries an id: %s", got.Raw)
	}
	none(t, "phone", barrier(t, a), func(f client.Frame) bool { return f.ID == 0 && f.Type == "read.receipt" })

	// Without an id: no reply (the request asked for none).
	if err := a.SendRaw(context.Background(), fmt.Appendf(nil, `{"v":1,"type":"read.receipt","chat_id":"default","payload":{"message_id":%q}}`, msg), false); err != nil {
		t.Fatal(err)
	}
	none(t, "phone", barrier(t, a), func(f client.Frame) bool { return f.Type == "read.receipt" })
}

// A text frame that is not UTF-8 is refused, never stored with U+FFFD in
// place of the bad bytes: Iris answers error{unsupported} and closes the
// connection with 1007 (RFC 6455 §8.1).
func TestInvalidUTF8IsRefused(t *testing.T) {
	g := testgw.Start(t)
	a := dialRaw(t, g)
	a.writeJSON(helloFrame(testgw.Token, "phone"))
	if f, _ := a.read(); f.Type != "hello.ack" {
		t.Fatalf("hello answered with %s", f.Raw)
	}
	a.write(websocket.MessageText, []byte("{\"v\":1,\"id\":3,\"type\":\"message.send\",\"chat_id\":\"default\",\"payload\":{\"text\":\"caf\xe9 au lait\"}}"))
	got, st := a.untilClose()
	var errs []client.Frame
	for _, f := range got {
		if f.Type == "error" {
			errs = append(errs, f)
		}
		if f.Type == "message" {
			t.Errorf("the message was taken: %s", f.Raw)
		}
	}
	if len(errs) != 1 || testgw.Str(t, errs[0], "code") != "unsupported" {
		t.Fatalf("frames before the close: %s, want one unsupported error", typesOf(got))
	}
	if st != websocket.StatusInvalidFramePayloadData {
		t.Fatalf("close status %v, want 1007", st)
	}
	b := g.Dial(t, "tablet")
	if h, err := history(t, b, def, nil); err != nil || len(h.Messages) != 0 {
		t.Fatalf("history after the refused frame: %+v, %v", h.Messages, err)
	}

	// The same for a hello, before the dialect is known.
	h := dialRaw(t, g)
	h.write(websocket.MessageText, []byte("{\"v\":1,\"id\":1,\"type\":\"hello\",\"payload\":{\"token\":\"test-token\",\"device_id\":\"ph\xffne\"}}"))
	got, st = h.untilClose()
	if len(got) != 1 || got[0].Type != "error" || st != websocket.StatusInvalidFramePayloadData {
		t.Fatalf("bad hello: %s, close %v", typesOf(got), st)
	}
}

// A lane queues at most gateway.MaxQueuedTurns messages behind its running
// turn: the next is refused (rate_limited) before it is stored, so a
// restart reloads no more than that. /stop all stops the turn and drops
// what is queued, in memory and in the store.
func TestLaneQueueIsBounded(t *testing.T) {
	g := testgw.Start(t, slowEcho(50*time.Millisecond))
	a := g.Dial(t, "phone")
	send(t, a, def, words(400)) // runs for 20 s unless stopped
	a.Expect("message.start", nil)
	accepted, refused := 0, 0
	for i := range gateway.MaxQueuedTurns + 10 {
		_, err := a.Do("message.send", def, map[string]any{"text": fmt.Sprintf("queued %d", i)})
		if err != nil {
			wantCode(t, err, "rate_limited")
			refused++
			continue
		}
		if refused > 0 {
			t.Fatalf("message %d accepted after %d refused", i, refused)
		}
		accepted++
	}
	if accepted != gateway.MaxQueuedTurns || refused != 10 {
		t.Fatalf("%d queued, %d refused; want %d and 10", accepted, refused, gateway.MaxQueuedTurns)
	}
	ctx := context.Background()
	owed, err := g.App.Store.Turns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(owed) != gateway.MaxQueuedTurns+1 {
		t.Fatalf("%d turns owed in the store, want %d", len(owed), gateway.MaxQueuedTurns+1)
	}
	h, _ := history(t, a, def, map[string]any{"limit": 200})
	users := 0
	for _, m := range h.Messages {
		if m.Role == "user" {
			users++
		}
	}
	if users != gateway.MaxQueuedTurns+1 {
		t.Fatalf("history holds %d messages of the person, want the %d accepted", users, gateway.MaxQueuedTurns+1)
	}

	send(t, a, def, "/stop all")
	// Its note and the stopped turn's agent.idle, in either order.
	var sys client.Frame
	idle := false
	until(t, a, func(f client.Frame) bool {
		if f.Type == "message" && testgw.Str(t, f, "role") == "system" {
			sys = f
		}
		idle = idle || f.Type == "agent.idle"
		return idle && sys.Type != ""
	})
	if !strings.Contains(testgw.Str(t, sys, "text"), fmt.Sprintf("dropped %d queued", gateway.MaxQueuedTurns)) {
		t.Errorf("/stop all said %s", sys.Raw)
	}
	// Nothing runs next, nothing is owed any more.
	a.Quiet("agent.busy", 300*time.Millisecond)
	if owed, _ := g.App.Store.Turns(ctx); len(owed) != 0 {
		t.Fatalf("%d turns still owed after /stop all", len(owed))
	}
	// And the lane takes messages again.
	send(t, a, def, "after the stop")
	a.Expect("agent.busy", nil)
}

// Hermes Mobile: a device holds 8 unfinished multi-part uploads and 8 MiB
// of their parts (the protocol's limits); the devices of one token
// together hold mobile.TokenDevices times that, so a device id of the
// client's choosing does not buy memory without end.
func TestMobileUploadsBoundedPerToken(t *testing.T) {
	g := mobileGW(t)
	chunk := func(id string) map[string]any {
		return map[string]any{"t": "media", "id": id, "kind": "image", "data": b64(10), "part": 0, "parts": 2}
	}
	for d := range mobile.TokenDevices {
		p := connectPhone(t, g, fmt.Sprint("tel-", d))
		for i := range mobilev1.MaxUploads {
			p.send(chunk(fmt.Sprintf("u%d-%d", d, i)))
		}
		if fs := p.barrier(); countT(fs, "error") != 0 {
			t.Fatalf("device %d: %v", d, fs)
		}
	}
	p := connectPhone(t, g, "tel-another-name")
	e := p.wantError(chunk("u-more"), "too_big")
	if !strings.Contains(e.S("message"), "token") {
		t.Fatalf("refused with %v", e)
	}
}

// dialFrom opens a WebSocket from a loopback address of its own
// (127.0.0.0/8 is all loopback), saying nothing.
func dialFrom(t *testing.T, g *testgw.GW, local string) *raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ws, _, err := websocket.Dial(ctx, g.URL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &raw{t: t, ws: ws}
}

// Connections that never say hello are bounded, per address and in all.
// Past its address's bound a newcomer is turned away (error{rate_limited},
// then the close, at once: no handshake a flood could stall) while the
// connections of that address are within their grace; past the bound in
// all, the address with the most waiting makes room, never one at or
// below its fair share. A device that says hello gets in throughout.
func TestConnectionsBeforeHelloAreBounded(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Server.MaxWaiting, c.Server.MaxWaitingPerAddr, c.Server.HelloGrace = 12, 8, time.Minute
	})
	// Per address: 8 wait from 127.0.0.2; 4 more are turned away.
	var two []*raw
	for range 8 {
		two = append(two, dialFrom(t, g, "127.0.0.2"))
	}
	for range 4 {
		if got, _ := dialFrom(t, g, "127.0.0.2").untilClose(); len(got) != 1 || testgw.Str(t, got[0], "code") != "rate_limited" {
			t.Fatalf("a ninth connection from .2: %s; want rate_limited, then the close", typesOf(got))
		}
	}
	// In all: 4 from .3 fill the bound. Each of 4 from .4 pushes out the
	// oldest of .2, which holds the most (8, 7, 6, 5 against a fair share
	// of 4); .3's are never touched.
	var three, four []*raw
	for range 4 {
		three = append(three, dialFrom(t, g, "127.0.0.3"))
	}
	for range 4 {
		four = append(four, dialFrom(t, g, "127.0.0.4"))
	}
	for i, r := range two[:4] {
		if got, _ := r.untilClose(); len(got) != 1 || testgw.Str(t, got[0], "code") != "rate_limited" {
			t.Fatalf("squatter %d from .2: %s; want rate_limited, then the close", i, typesOf(got))
		}
	}
	// A device that says hello gets in: the bound is full, and again the
	// heaviest address makes room.
	d := g.Dial(t, "phone")
	d.MustDo("ping", client.Lane{}, nil)
	// The rest still wait (until their hello timeout): a hello from any
	// of them is answered.
	for i, r := range append(append(two[5:], three...), four...) {
		r.writeJSON(helloFrame(testgw.Token, fmt.Sprint("late-", i)))
		if f, err := r.read(); err != nil || f.Type != "hello.ack" {
			t.Fatalf("waiting connection %d: %v %s", i, err, f.Raw)
		}
	}
}

// Past its address's bound, a newcomer pushes out the oldest connection
// of its address once that has had its grace.
func TestConnectionsBeforeHelloGraceEnds(t *testing.T) {
	const grace = 200 * time.Millisecond
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Server.MaxWaiting, c.Server.MaxWaitingPerAddr, c.Server.HelloGrace = 12, 2, grace
	})
	old := dialFrom(t, g, "127.0.0.2")
	mid := dialFrom(t, g, "127.0.0.2")
	// A time to pass, not an event: the grace is the rule under test.
	time.Sleep(grace)
	dialFrom(t, g, "127.0.0.2")
	if got, _ := old.untilClose(); len(got) != 1 || testgw.Str(t, got[0], "code") != "rate_limited" {
		t.Fatalf("the oldest: %s; want rate_limited, then the close", typesOf(got))
	}
	mid.writeJSON(helloFrame(testgw.Token, "mid"))
	if f, err := mid.read(); err != nil || f.Type != "hello.ack" {
		t.Fatalf("the second: %v %s", err, f.Raw)
	}
}

// TCP connections that send no HTTP request are held to the same bounds,
// before any WebSocket; a trusted proxy's only to the bound in all.
func TestConnectionsBeforeTheirRequestAreBounded(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Server.MaxWaiting, c.Server.MaxWaitingPerAddr, c.Server.HelloGrace = 12, 8, time.Minute
		c.Server.TrustedProxies = mustPrefixes(t, "127.0.0.6")
	})
	dial := func(from string) net.Conn {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", g.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	isClosed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(testgw.Wait))
		n, err := c.Read(make([]byte, 1))
		return n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	// The server counts a connection when it accepts it and forgets it
	// when its read ends or a request starts, after the client's side
	// has moved on: wait for the room to hold n before the next step.
	room := func(n int) {
		t.Helper()
		deadline := time.Now().Add(testgw.Wait)
		for g.App.Srv.WaitingBeforeRequest() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections wait, want %d", g.App.Srv.WaitingBeforeRequest(), n)
			}
			time.Sleep(time.Millisecond) // polled: the server has no event to wait on
		}
	}
	served := func(c net.Conn) bool {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(testgw.Wait))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		return err == nil && resp.StatusCode == 200
	}
	var five []net.Conn
	for range 8 {
		five = append(five, dial("127.0.0.5"))
	}
	room(8)
	// The ninth from .5 is turned away; the first eight wait on.
	if c := dial("127.0.0.5"); !isClosed(c) {
		t.Fatal("a ninth connection from .5 is served")
	}
	for _, c := range five[2:] {
		c.Close()
	}
	room(2)
	if !served(five[1]) {
		t.Fatal("a waiting connection's request was not served")
	}
	room(2) // five[1] idles, waiting again
	// A trusted proxy is not held to one address's bound: 10 wait from
	// it. Its 11th finds the room full, and .5, below its fair share,
	// keeps its two.
	var proxy []net.Conn
	for range 10 {
		proxy = append(proxy, dial("127.0.0.6"))
	}
	room(12)
	if !isClosed(dial("127.0.0.6")) {
		t.Fatal("the proxy's 11th connection is served in a full room")
	}
	for i, c := range append(five[:2], proxy...) {
		if !served(c) {
			t.Fatalf("waiting connection %d was not served", i)
		}
		c.Close()
	}
	d := g.Dial(t, "phone")
	d.MustDo("ping", client.Lane{}, nil)
}

// Large frames being read are bounded in all, and drawn on the budget in
// steps as their bytes arrive: phones of one token that each start a
// 16 MiB frame and stop at 8 MiB hold their token's share of the budget
// (one frame's worth), plus what the oldest frame (the head, which may
// always grow) drew past it, not 8 MiB each; the
// others of that token wait (unread: TCP pushes back on them), and a
// device of another token still gets its large message in at once.
// (Before, each phone's frame took a grant of the whole 16 MiB limit, all
// or nothing: two phones held the budget, and every other large frame of
// every device waited behind them until they finished or 2 minutes
// passed.) Gone, the phones give everything back.
func TestLargeFramesBoundedInAll(t *testing.T) {
	// The share is a frame's limit; beside it, the head's reserve (a
	// frame's limit, less what the head holds) stays free, and another
	// token draws on the rest: a budget of two frames would leave it
	// only what the head holds.
	const budget = 3 * mobilev1.MaxFrameBytes
	g := mobileGW(t, func(c *server.AppConfig) { c.Server.MaxBuffered = budget })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	var phones []*phone
	for i := range 6 {
		p := connectPhone(t, g, fmt.Sprint("tel-", i))
		phones = append(phones, p)
		w, err := p.ws.Writer(ctx, websocket.MessageText)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			w.Write([]byte(`{"t":"text","id":"x","text":"`))
			for range 8 { // 8 MiB of a frame, never finished
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}()
		if i == 0 {
			// The head draws its 8 MiB before the others start: while it
			// holds less, another phone's whole 8 MiB fits in the share
			// beside it (a slow head, under load, made that one not wait).
			waitMetricAbove(t, g, `irisgate_frame_buffer_bytes{budget="frames"}`, 8<<20-1)
		}
	}
	waitMetric(t, g, `irisgate_frame_buffer_waiting{budget="frames"}`, 5)
	// The phones stop at 8 MiB (and a buffer grows past what it read by
	// at most a step): the head drew at most that past the share.
	if used := metric(t, g, `irisgate_frame_buffer_bytes{budget="frames"}`); used > mobilev1.MaxFrameBytes+8<<20+1<<20 {
		t.Fatalf("%v bytes drawn by one token's stalled phones, want at most a frame's limit and the head's 8 MiB", used)
	}
	// A laptop of another token sends a large message: it is not held up.
	other, _, err := gateway.CreateToken(context.Background(), g.App.Store, "laptop", "")
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := g.DialErr(t, "laptop", other)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("b", 60<<10) // past frameFree: it draws on the budget
	laptop.MustDo("message.send", def, map[string]any{"text": big})
	cancel()
	for _, p := range phones {
		p.ws.CloseNow()
	}
	waitMetric(t, g, `irisgate_frame_buffer_waiting{budget="frames"}`, 0)
	waitMetric(t, g, `irisgate_frame_buffer_bytes{budget="frames"}`, 0)
}

// A large frame must keep arriving: past its grace it must come at
// 32 KiB/s on average, or its connection is closed. A phone that sends
// 40 KiB of a frame and then a byte now and then holds its draw only that
// long (before, 2 minutes). A frame that arrives at a good pace, however
// large, is read whole.
func TestLargeFramesMustKeepArriving(t *testing.T) {
	g := mobileGW(t, func(c *server.AppConfig) { c.Server.FrameGrace = 300 * time.Millisecond })
	slow := connectPhone(t, g, "tel-slow")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := slow.ws.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(`{"t":"text","id":"x","text":"` + strings.Repeat("a", 40<<10)))
	go func() {
		tick := time.NewTicker(50 * time.Millisecond) // the trickler's pace
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := w.Write([]byte("a")); err != nil {
				return
			}
		}
	}()
	slow.closed() // within testgw.Wait
	waitMetric(t, g, `irisgate_frame_buffer_bytes{budget="frames"}`, 0)
	// 2 MiB at once is read whole (and refused for its length, which only
	// a frame read whole can be).
	fast := connectPhone(t, g, "tel-fast")
	fast.wantError(text("m1", strings.Repeat("c", 2<<20)), "too_big")
}

// waitMetric waits until a series of the gateway's /metrics has value v.
func waitMetric(t *testing.T, g *testgw.GW, series string, v float64) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testgw.Wait)
	for metric(t, g, series) != v {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s = %v, want %v", series, metric(t, g, series), v)
		}
	}
}

// Retention holds while the gateway runs, not only at start-up: an outbox
// that outgrows --outbox-keep is pruned back (in bounded steps), and a
// sync from before the floor says truncated.
func TestOutboxRetentionWhileRunning(t *testing.T) {
	const keep = 50
	g := testgw.Start(t, func(c *server.AppConfig) { c.OutboxKeep = keep })
	a := g.Dial(t, "phone")
	for i := range 300 {
		createChannel(t, a, fmt.Sprint("c", i), "")
	}
	ctx := context.Background()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testgw.Wait)
	for {
		n, err := g.SQLite(t).OutboxLen(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n <= keep+100 { // the bound plus the slack before the pruner wakes
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the outbox holds %d frames, keep is %d", n, keep)
		}
	}
	b := g.Dial(t, "tablet")
	if _, done := syncAll(t, b, 0); testgw.P(t, done)["truncated"] != true {
		t.Fatalf("a sync from 0 after pruning: %s", done.Raw)
	}
}

// Hermes Mobile: a message into a lane whose queue is full is a non-fatal
// bad_frame saying so (not auth_failed: "do not retry"), and the phone
// stays connected.
func TestMobileLaneQueueFull(t *testing.T) {
	g := mobileGW(t, slowEcho(50*time.Millisecond))
	p := connectPhone(t, g, "tel-1")
	p.send(text("m0", words(400)))
	p.expect("message", nil) // the reply streams: m0's turn runs, the queue is empty
	for i := range gateway.MaxQueuedTurns {
		p.send(text(fmt.Sprint("m", i+1), fmt.Sprint("queued ", i)))
	}
	e := p.wantError(text("m-over", "one too many"), "bad_frame")
	if e.S("id") != "m-over" || !strings.Contains(e.S("message"), "/stop all") {
		t.Fatalf("refused with %v", e)
	}
	p.send(text("m-stop", "/stop all"))
	p.send(map[string]any{"t": "ping", "ts": 1})
	p.expect("pong", nil)
}
