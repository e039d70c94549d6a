// Package server is the gateway's network face: one HTTP listener with the
// WebSocket endpoint (/ws), health and metrics. It owns the sockets: a read
// loop and a writer per connection, with the dialect chosen by the first
// frame.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/wire/iris"
)

// Config holds the server's settings.
type Config struct {
	HelloTimeout time.Duration // for the first frame
	PingInterval time.Duration // WebSocket pings; a peer silent for two is dead
	WriteTimeout time.Duration // one frame's write
	MaxFrame     int64         // largest text or binary frame accepted
	Push         string        // push backend named in hello.ack
	NtfyServer   string
}

// Defaults fills unset fields.
func (c *Config) defaults() {
	if c.HelloTimeout == 0 {
		c.HelloTimeout = 15 * time.Second
	}
	if c.PingInterval == 0 {
		c.PingInterval = 20 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = 1 << 20
	}
}

// helloLimit bounds the first frame, read before anyone is authenticated.
const helloLimit = 64 << 10

// Server serves devices.
type Server struct {
	cfg  Config
	gw   *gateway.Gateway
	auth *gateway.Auth
	log  *slog.Logger
	reg  *prometheus.Registry
	m    *gateway.Metrics

	base   context.Context // ends at shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup // connection handlers

	mu      sync.Mutex
	socks   map[*websocket.Conn]struct{}
	waiting map[*websocket.Conn]*helloWait // sockets that have not said hello yet
	down    bool
}

// New makes a server for gw. reg and m are the registry and series the
// gateway was built with (reg may be nil).
func New(cfg Config, gw *gateway.Gateway, auth *gateway.Auth, log *slog.Logger, reg *prometheus.Registry, m *gateway.Metrics) *Server {
	cfg.defaults()
	base, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, gw: gw, auth: auth, log: log, reg: reg, m: m, base: base, cancel: cancel,
		socks: make(map[*websocket.Conn]struct{}), waiting: make(map[*websocket.Conn]*helloWait)}
}

// Handler routes /ws, /healthz and /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.handleWS)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	if s.reg != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	}
	return mux
}

// Run pings every connection periodically until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		socks := make([]*websocket.Conn, 0, len(s.socks))
		for c := range s.socks {
			socks = append(socks, c)
		}
		s.mu.Unlock()
		for _, c := range socks {
			go func() {
				pctx, cancel := context.WithTimeout(ctx, s.cfg.PingInterval)
				defer cancel()
				if err := c.Ping(pctx); err != nil && ctx.Err() == nil {
					c.CloseNow() // dead peer: the read loop ends and cleans up
				}
			}()
		}
	}
}

// Shutdown ends the gateway's turns, tells devices it is restarting,
// closes every socket with 1001 and waits for the handlers.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.down = true
	for _, w := range s.waiting {
		w.cut()
	}
	s.mu.Unlock()
	s.gw.Shutdown(ctx)
	s.gw.Hub().Each(func(c *hub.Conn) { c.Close(errGoingAway) })
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel() // stop waiting on slow peers
		<-done
	}
	s.cancel()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	head, err := s.gw.Store().OutboxHead(r.Context())
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"status": "error", "error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"status": "ok", "connections": s.gw.Hub().Count(), "outbox_head": head, "agent": s.gw.Agent().Name()})
}

// closeErr closes a connection with a WebSocket status.
type closeErr struct {
	code   websocket.StatusCode
	reason string
}

func (e *closeErr) Error() string { return e.reason }

var errGoingAway = &closeErr{websocket.StatusGoingAway, "gateway restarting"}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	if !down {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if down {
		http.Error(w, "gateway restarting", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	// Any origin may connect: every connection must present a token in its
	// first frame, so a foreign page gains nothing it could not do anyway.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(-1) // enforced per frame in readFrame, with an error frame
	s.mu.Lock()
	s.socks[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.socks, c)
		s.mu.Unlock()
		c.CloseNow()
	}()
	s.serve(c, remoteHost(r.RemoteAddr))
}

func (s *Server) serve(c *websocket.Conn, addr string) {
	ctx := s.base
	w := s.waitHello(c)
	typ, first, err := readFrame(ctx, c, helloLimit)
	if !s.helloCame(c, w) {
		return
	}
	if err != nil {
		if errors.Is(err, errTooBig) {
			c.Close(websocket.StatusMessageTooBig, "hello too large")
		}
		return
	}
	if typ != websocket.MessageText || !iris.Is(first) {
		c.Close(websocket.StatusPolicyViolation, "the first frame must be a hello")
		return
	}
	sess, err := iris.Open(ctx, iris.Config{GW: s.gw, Auth: s.auth, Log: s.log, Push: s.cfg.Push, PushNtfyServer: s.cfg.NtfyServer}, addr, first)
	if err != nil {
		var f *iris.Fatal
		if errors.As(err, &f) {
			s.writeRaw(c, f.Frame)
			c.Close(websocket.StatusPolicyViolation, f.Reason)
			return
		}
		c.Close(websocket.StatusInternalError, "internal error")
		return
	}
	conn := sess.Conn()
	s.mu.Lock()
	if s.down {
		// Shutdown may have closed the live connections before this one
		// was registered.
		conn.Close(errGoingAway)
	}
	s.mu.Unlock()
	s.m.FramesIn.WithLabelValues("iris", "hello").Inc()
	writerDone := make(chan struct{})
	go s.writer(c, conn, writerDone)

	for {
		typ, data, err := readFrame(ctx, c, s.cfg.MaxFrame)
		if err != nil {
			if errors.Is(err, errTooBig) {
				conn.Send(hub.Out{Data: tooBigFrame(s.cfg.MaxFrame)})
				conn.Close(&closeErr{websocket.StatusMessageTooBig, "frame too large"})
			}
			if websocket.CloseStatus(err) != -1 {
				// The peer's close frame came after everything we wrote
				// before it: that is a receipt too. A reset is not.
				conn.Read()
			}
			break
		}
		conn.Read()
		if typ == websocket.MessageBinary {
			s.m.FramesIn.WithLabelValues("iris", "binary").Inc()
			s.safely(conn, func() error { sess.HandleBinary(ctx, data); return nil })
			continue
		}
		if err := s.safely(conn, func() error {
			typ, err := sess.Handle(ctx, data)
			s.m.FramesIn.WithLabelValues("iris", typ).Inc()
			return err
		}); err != nil {
			var f *iris.Fatal
			if errors.As(err, &f) {
				conn.Send(hub.Out{Data: f.Frame})
				conn.Close(&closeErr{websocket.StatusPolicyViolation, f.Reason})
				break
			}
		}
	}
	sess.Close()
	s.gw.Disconnect(conn)
	conn.Close(&closeErr{websocket.StatusNormalClosure, ""})
	<-writerDone
}

// helloWait bounds the wait for a connection's first frame. The read
// is not given a deadline: a read whose context ends closes the socket at
// once, with no way to tell the device why. Closing the socket with a
// status ends the read just as well.
type helloWait struct {
	t        *time.Timer
	done     chan struct{} // closed when the timer's close has run
	shutdown atomic.Bool
}

func (s *Server) waitHello(c *websocket.Conn) *helloWait {
	w := &helloWait{done: make(chan struct{})}
	w.t = time.AfterFunc(s.cfg.HelloTimeout, func() {
		defer close(w.done)
		if w.shutdown.Load() {
			c.Close(websocket.StatusGoingAway, "gateway restarting")
			return
		}
		s.writeRaw(c, helloTimeoutFrame)
		c.Close(websocket.StatusPolicyViolation, "no hello within the timeout")
	})
	s.mu.Lock()
	s.waiting[c] = w
	if s.down { // Shutdown has been through the waiting sockets already
		w.cut()
	}
	s.mu.Unlock()
	return w
}

// cut ends the wait now, for a shutdown.
func (w *helloWait) cut() {
	w.shutdown.Store(true)
	if w.t.Stop() {
		w.t.Reset(0)
	}
}

// helloCame ends c's wait for its first frame. False means the wait was
// cut (the socket is closed or closing) and the frame must be ignored.
func (s *Server) helloCame(c *websocket.Conn, w *helloWait) bool {
	s.mu.Lock()
	delete(s.waiting, c)
	s.mu.Unlock()
	if w.t.Stop() {
		return true
	}
	<-w.done
	return false
}

// safely runs one frame's handling; a panic is logged and answered as an
// internal error instead of taking the process down.
func (s *Server) safely(conn *hub.Conn, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic handling a frame", "device", conn.DeviceID, "panic", fmt.Sprint(p))
			conn.Send(hub.Out{Data: internalErrorFrame})
			err = nil
		}
	}()
	return fn()
}

// writer drains the connection's queue onto the socket, then closes the
// socket with the status the queue was closed with.
func (s *Server) writer(c *websocket.Conn, conn *hub.Conn, done chan<- struct{}) {
	defer close(done)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in writer", "device", conn.DeviceID, "panic", fmt.Sprint(p))
			c.CloseNow()
		}
	}()
	out := s.m.FramesOut.WithLabelValues("iris")
	var buf []hub.Out
	for {
		var err error
		buf, err = conn.Take(context.Background(), buf)
		for _, o := range buf {
			typ := websocket.MessageText
			if o.Binary {
				typ = websocket.MessageBinary
			}
			wctx, cancel := context.WithTimeout(s.base, s.cfg.WriteTimeout)
			werr := c.Write(wctx, typ, o.Data)
			cancel()
			if werr != nil {
				c.CloseNow()
				conn.Close(werr)
				return
			}
			conn.Written(o.Cursor)
			out.Inc()
		}
		if err != nil {
			var ce *closeErr
			switch {
			case errors.As(err, &ce):
				c.Close(ce.code, ce.reason)
			case errors.Is(err, hub.ErrSlow):
				s.log.Warn("closing a device that reads too slowly", "device", conn.DeviceID)
				c.Close(websocket.StatusTryAgainLater, "too slow: reconnect and sync")
			case errors.Is(err, hub.ErrReplaced):
				c.Close(websocket.StatusNormalClosure, "replaced by a newer connection of this device")
			default:
				c.CloseNow()
			}
			return
		}
	}
}

func (s *Server) writeRaw(c *websocket.Conn, data []byte) {
	ctx, cancel := context.WithTimeout(s.base, s.cfg.WriteTimeout)
	defer cancel()
	c.Write(ctx, websocket.MessageText, data)
}

var errTooBig = errors.New("frame too large")

// readFrame reads one message, refusing it once it passes limit bytes:
// memory grows with the bytes that arrive, never beyond the limit.
func readFrame(ctx context.Context, c *websocket.Conn, limit int64) (websocket.MessageType, []byte, error) {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return 0, nil, err
	}
	if n > limit {
		return 0, nil, errTooBig
	}
	return typ, b.Bytes(), nil
}

func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

var (
	helloTimeoutFrame  = []byte(`{"v":1,"type":"error","payload":{"code":"unsupported","message":"no hello within the timeout"}}`)
	internalErrorFrame = []byte(`{"v":1,"type":"error","payload":{"code":"internal","message":"internal error"}}`)
)

func tooBigFrame(limit int64) []byte {
	return []byte(fmt.Sprintf(`{"v":1,"type":"error","payload":{"code":"unsupported","message":"frame larger than %d bytes"}}`, limit))
}
