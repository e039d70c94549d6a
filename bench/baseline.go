package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// baselines are the raw costs under every figure of the ratios scenario,
// measured on this machine at the start of the run with the libraries
// irisgate uses (coder/websocket, modernc.org/sqlite through package
// store), so that a figure reads as a multiple of what the machine can do
// at best rather than as an absolute on a noisy, shared machine.
type baselines struct {
	frame int // bytes of the text frame written

	wsWrite  time.Duration // coder/websocket Conn.Write of one frame
	rawWrite time.Duration // one hand-built frame per write(2)
	rawBatch time.Duration // per frame, batch frames in one write(2)
	batch    int

	rtt            time.Duration // p50 message round trip to a bare echo server
	rttRate        float64       // sequential round trips per second
	dial50, dial99 time.Duration // dial + upgrade + one round trip
	stormN         int
	storm          time.Duration // stormN such dials at once (stormPar in flight)

	commit   time.Duration // p50: one transaction of what a send writes
	commit64 time.Duration // per send, 64 sends per transaction
	outbox   time.Duration // per outbox row, 512 rows per transaction
	scan     time.Duration // per outbox frame read back and decoded (ScanEvents, as sync does)
}

// stormPar is how many devices dial at once in the storm (and its baseline).
const stormPar = 200

func measureBaselines(ctx context.Context, o *Options) (baselines, error) {
	b := baselines{batch: 16, stormN: o.RatioStorm}
	frame := sampleFrame(300)
	b.frame = len(frame)
	// Enough bytes (30 MB, 6 MB quick) to overflow the sockets' buffers:
	// the figure is the sustained cost, not that of filling a buffer.
	writes, reps := 100_000, 3
	if o.Quick {
		writes, reps = 20_000, 1
	}
	var err error
	o.progress("ratios: baseline: loopback WebSocket writes")
	if b.wsWrite, b.rawWrite, b.rawBatch, err = measureWrites(ctx, writes, reps, b.batch, frame); err != nil {
		return b, fmt.Errorf("write baseline: %w", err)
	}
	o.progress("ratios: baseline: round trips, dials, a storm of %d bare dials", b.stormN)
	if err := measureBare(ctx, o, &b, frame); err != nil {
		return b, fmt.Errorf("bare server baseline: %w", err)
	}
	o.progress("ratios: baseline: SQLite commits")
	if err := measureCommits(ctx, o, &b); err != nil {
		return b, fmt.Errorf("commit baseline: %w", err)
	}
	return b, nil
}

// sampleFrame is an Iris message frame of about n bytes, like a send's.
func sampleFrame(n int) []byte {
	head := `{"v":1,"type":"message","chat_id":"c_0123456789abcdef","payload":{"message_id":"m_0123456789abcdef","role":"user","text":"`
	tail := `","ts":1700000000000}}`
	return []byte(head + textOf("baseline", max(n-len(head)-len(tail), 8)) + tail)
}

// wsFrame appends an unmasked, final text frame (server to client) holding p.
func wsFrame(b, p []byte) []byte {
	b = append(b, 0x81)
	switch n := len(p); {
	case n < 126:
		b = append(b, byte(n))
	case n < 1<<16:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, p...)
}

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// measureWrites times writing n copies of frame to a peer that only drains
// its socket: through coder/websocket's Conn.Write (one write(2) a
// message), and hand-framed, one and batch frames per write(2). Each is
// the median of reps runs after one untimed, per frame.
func measureWrites(ctx context.Context, n, reps, batch int, frame []byte) (ws, raw, batched time.Duration, err error) {
	type result struct {
		d   time.Duration
		err error
	}
	results := make(chan result, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/lib", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			results <- result{err: err}
			return
		}
		defer c.CloseNow()
		start := time.Now()
		for range n {
			if err := c.Write(r.Context(), websocket.MessageText, frame); err != nil {
				results <- result{err: err}
				return
			}
		}
		results <- result{d: time.Since(start) / time.Duration(n)}
	})
	mux.HandleFunc("/raw", func(w http.ResponseWriter, r *http.Request) {
		k := batch
		if r.URL.Query().Get("batch") == "1" {
			k = 1
		}
		conn, err := hijackUpgrade(w, r)
		if err != nil {
			results <- result{err: err}
			return
		}
		defer conn.Close()
		var buf []byte
		for range k {
			buf = wsFrame(buf, frame)
		}
		start := time.Now()
		for range n / k {
			if _, err := conn.Write(buf); err != nil {
				results <- result{err: err}
				return
			}
		}
		results <- result{d: time.Since(start) / time.Duration(n/k*k)}
	})
	srv, addr, err := serveLoopback(mux)
	if err != nil {
		return 0, 0, 0, err
	}
	defer srv.Close()
	run := func(path string) (time.Duration, error) {
		var ds []time.Duration
		for i := range reps + 1 {
			if err := drainPeer(ctx, addr, path); err != nil {
				return 0, err
			}
			r := <-results
			if r.err != nil {
				return 0, r.err
			}
			if i > 0 {
				ds = append(ds, r.d)
			}
		}
		slices.Sort(ds)
		return ds[len(ds)/2], nil
	}
	if ws, err = run("/lib"); err != nil {
		return
	}
	if raw, err = run("/raw?batch=1"); err != nil {
		return
	}
	batched, err = run("/raw")
	return
}

// hijackUpgrade answers a WebSocket upgrade by hand and returns the
// connection, for frames written without the library.
func hijackUpgrade(w http.ResponseWriter, r *http.Request) (net.Conn, error) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if key == "" || !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "not a WebSocket upgrade", http.StatusBadRequest)
		return nil, errors.New("not a WebSocket upgrade")
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(key))
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// drainPeer upgrades a connection to path by hand and reads it to its end,
// doing nothing with the bytes: the cheapest reader there is.
func drainPeer(ctx context.Context, addr, path string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	var k [16]byte
	rand.Read(k[:])
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		path, addr, base64.StdEncoding.EncodeToString(k[:]))
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fmt.Errorf("upgrade answered %s", resp.Status)
	}
	_, err = io.Copy(io.Discard, br)
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func serveLoopback(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}

// measureBare times round trips, dials and a storm of dials against the
// bare echo server, in-process.
func measureBare(ctx context.Context, o *Options, b *baselines, frame []byte) error {
	srv, addr, err := serveLoopback(bareMux())
	if err != nil {
		return err
	}
	defer srv.Close()
	url := "ws://" + addr + "/ws"
	trips, dials := 5_000, 300
	if o.Quick {
		trips, dials = 300, 20
	}
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return err
	}
	lat := make([]time.Duration, 0, trips)
	start := time.Now()
	for range trips {
		t := time.Now()
		if err := roundTrip(ctx, c, frame); err != nil {
			c.CloseNow()
			return err
		}
		lat = append(lat, time.Since(t))
	}
	b.rttRate = rate(int64(trips), time.Since(start))
	c.CloseNow()
	slices.Sort(lat)
	b.rtt = pct(lat, 0.5)

	lat = lat[:0]
	for range dials {
		t := time.Now()
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			return err
		}
		err = roundTrip(ctx, c, frame)
		lat = append(lat, time.Since(t))
		c.CloseNow()
		if err != nil {
			return err
		}
	}
	slices.Sort(lat)
	b.dial50, b.dial99 = pct(lat, 0.5), pct(lat, 0.99)

	conns := make([]*websocket.Conn, b.stormN)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.CloseNow()
			}
		}
	}()
	sem := make(chan struct{}, stormPar)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start = time.Now()
	for i := range conns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := websocket.Dial(ctx, url, nil)
			if err == nil {
				conns[i] = c
				err = roundTrip(ctx, c, frame)
			}
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.storm = time.Since(start)
	return firstErr
}

func roundTrip(ctx context.Context, c *websocket.Conn, p []byte) error {
	if err := c.Write(ctx, websocket.MessageText, p); err != nil {
		return err
	}
	_, _, err := c.Read(ctx)
	return err
}

// measureCommits times, in a fresh store, what one message.send commits
// (its history row with the search index's entry, the turn it owes, its
// outbox row), alone and 64 sends to a transaction, outbox rows alone 512
// to a transaction, and reading frames back as a sync does.
func measureCommits(ctx context.Context, o *Options, b *baselines) error {
	dir, err := os.MkdirTemp(o.TempDir, "irisgate-bench-commit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(filepath.Join(dir, "baseline.db"), store.WithLog(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer st.Close()
	singles, batches := 500, 20
	if o.Quick {
		singles, batches = 50, 3
	}
	lane := core.Lane{ChatID: core.DefaultChatID}
	text := textOf("commit baseline", 120)
	send := func(tx store.Tx) error {
		m := core.Message{ID: core.NewMessageID(), Lane: lane, Role: core.RoleUser, Text: text, TS: time.Now().UnixMilli()}
		if err := tx.InsertMessage(m, false); err != nil {
			return err
		}
		if err := tx.QueueTurn(lane, m.ID); err != nil {
			return err
		}
		_, _, err := tx.AppendEvent(&core.Event{Type: core.EvMessage, Lane: lane, TS: m.TS, Message: &m})
		return err
	}
	lat := make([]time.Duration, 0, singles)
	for range singles {
		t := time.Now()
		if err := st.Write(ctx, send); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	b.commit = pct(lat, 0.5)
	start := time.Now()
	for range batches {
		if err := st.Write(ctx, func(tx store.Tx) error {
			for range 64 {
				if err := send(tx); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	b.commit64 = time.Since(start) / time.Duration(batches*64)
	m := core.Message{ID: core.NewMessageID(), Lane: lane, Role: core.RoleUser, Text: text, TS: time.Now().UnixMilli()}
	ev := &core.Event{Type: core.EvMessage, Lane: lane, TS: m.TS, Message: &m}
	start = time.Now()
	for range batches / 2 {
		if err := st.Write(ctx, func(tx store.Tx) error {
			for range 512 {
				if _, _, err := tx.AppendEvent(ev); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if n := batches / 2; n > 0 {
		b.outbox = time.Since(start) / time.Duration(n*512)
	}
	head, err := st.OutboxHead(ctx)
	if err != nil {
		return err
	}
	var rows int64
	start = time.Now()
	if err := st.ScanEvents(ctx, max(head-1000, 0), head, func(*core.Event) error { rows++; return nil }); err != nil {
		return err
	}
	if rows > 0 {
		b.scan = time.Since(start) / time.Duration(rows)
	}
	return nil
}
