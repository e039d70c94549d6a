// Package server is the gateway's network face: one HTTP listener with the
// WebSocket endpoint (/ws), health and metrics. It owns the sockets: a read
// loop and a writer per connection, with the dialect chosen by the first
// frame.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/version"
	"github.com/irisgate/irisgate/web"
	"github.com/irisgate/irisgate/wire/iris"
	"github.com/irisgate/irisgate/wire/mobile"
)

// Config holds the server's settings.
type Config struct {
	HelloTimeout time.Duration // for the first frame
	PingInterval time.Duration // WebSocket pings; a peer silent for two is dead
	WriteTimeout time.Duration // one frame's write
	MaxFrame     int64         // largest text or binary frame accepted
	Push         string        // push backend named in hello.ack
	NtfyServer   string
	WebPushKey   string // VAPID public key offered to browsers

	// MaxWaiting and MaxWaitingPerAddr bound the connections that have
	// not said hello yet, in all and from one address (see preHello).
	MaxWaiting, MaxWaitingPerAddr int
	// HelloGrace is how long a waiting connection is safe from being
	// pushed out by newer ones of its own address (see room): a device's
	// round trip between the upgrade and its hello (500 ms).
	HelloGrace time.Duration
	// BodyTimeout is how long an HTTP request body has for its first
	// bytes (30 s), and MaxRequestsPerAddr how many requests of one
	// client address are served at once (32): see httpBounds.
	BodyTimeout        time.Duration
	MaxRequestsPerAddr int
	// MaxBuffered bounds the bytes of the large frames being read and
	// handled at once, over all connections, and FrameGrace is how long
	// a large frame may take before it must arrive at 32 KiB/s (10 s):
	// see budget.
	MaxBuffered int64
	FrameGrace  time.Duration

	// Hermes Mobile.
	MobileMaxFrame int64 // largest frame of a Hermes Mobile connection (16 MiB)
	Mobile         mobile.Settings

	// TrustedProxies are the peers believed when they name the client or
	// the public host in forwarding headers (peer.go); AllowedOrigins are
	// web origins besides our own whose pages may connect.
	TrustedProxies []netip.Prefix
	AllowedOrigins []string
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
	if c.MobileMaxFrame == 0 {
		c.MobileMaxFrame = mobile.MaxFrameBytes
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = 1024
	}
	if c.FrameGrace == 0 {
		c.FrameGrace = 10 * time.Second
	}
	if c.MaxBuffered < max(c.MaxFrame, c.MobileMaxFrame) {
		c.MaxBuffered = max(64<<20, c.MaxFrame, c.MobileMaxFrame)
	}
	if c.MaxWaitingPerAddr == 0 {
		c.MaxWaitingPerAddr = c.MaxWaiting / 4
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = 30 * time.Second
	}
	if c.MaxRequestsPerAddr == 0 {
		c.MaxRequestsPerAddr = 32
	}
	if c.HelloGrace == 0 {
		c.HelloGrace = 500 * time.Millisecond
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
	mob  *mobile.Dialect
	// dialects are Hermes Mobile's and Iris's read-loop settings, made
	// once rather than per connection.
	dialects [2]dialect

	base   context.Context // ends at shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup // connection handlers

	tokens tokenConns // live connections by token, for revocation

	mu      sync.Mutex
	socks   map[*websocket.Conn]*prober
	waiting map[*helloWait]struct{} // sockets that have not said hello yet
	pre     preHello                // their count, by address
	down    bool

	hmu         sync.Mutex
	http        httpWaiting // connections before their upgrade (ConnState)
	active      active      // requests being served (httpBounds)
	budget      *budget     // bytes of the large frames being read (readFrame)
	helloBudget *budget     // the same, of hellos
}

// New makes a server for gw. reg and m are the registry and series the
// gateway was built with (reg may be nil).
func New(cfg Config, gw *gateway.Gateway, auth *gateway.Auth, log *slog.Logger, reg *prometheus.Registry, m *gateway.Metrics) *Server {
	cfg.defaults()
	base, cancel := context.WithCancel(context.Background())
	mob := mobile.New(mobile.Config{
		GW: gw, Auth: auth, Log: log, Settings: cfg.Mobile,
	})
	s := &Server{cfg: cfg, gw: gw, auth: auth, log: log, reg: reg, m: m, mob: mob, base: base, cancel: cancel, budget: newBudget(cfg.MaxBuffered, max(cfg.MaxFrame, cfg.MobileMaxFrame), cfg.FrameGrace),
		helloBudget: newBudget(max(helloLimit, cfg.MaxBuffered/4), helloLimit, cfg.FrameGrace),
		socks:       make(map[*websocket.Conn]*prober), waiting: make(map[*helloWait]struct{}),
		dialects: [2]dialect{
			{name: "mobile", limit: cfg.MobileMaxFrame, tooBig: mobile.TooBigFrame(cfg.MobileMaxFrame),
				tooBigErr: &closeErr{websocket.StatusPolicyViolation, mobile.CodeTooBig}},
			{name: "iris", limit: cfg.MaxFrame, proofs: true, tooBig: tooBigFrame(cfg.MaxFrame), badText: badTextFrame,
				tooBigErr: &closeErr{websocket.StatusMessageTooBig, "frame too large"}},
		}}
	s.registerBudgets()
	return s
}

// Handler routes /ws, /healthz and /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.handleWS)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.Handle("GET /", web.Handler())
	s.apiRoutes(mux)
	if s.reg != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	}
	return s.httpBounds(s.sameOriginWrites(mux))
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
		socks := make([]*prober, 0, len(s.socks))
		for _, p := range s.socks {
			socks = append(socks, p)
		}
		s.mu.Unlock()
		for _, p := range socks {
			p.ping() // a peer that does not answer within the interval is closed
		}
	}
}

// Shutdown ends the gateway's turns, tells devices it is restarting,
// closes every socket with 1001 and waits for the handlers.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.down = true
	for w := range s.waiting {
		w.shutdown = true
		w.cutLocked()
	}
	s.mu.Unlock()
	s.auth.StopDelays() // failing hellos held back are answered now
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
	s.mob.Close()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	head, err := s.gw.Store().OutboxHead(r.Context())
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"status": "error", "error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"status": "ok", "connections": s.gw.Hub().Count(), "outbox_head": head, "agent": s.gw.Agent().Name(),
		"version": version.String()})
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
	// Pages of other sites may not connect (peer.go): a token in the
	// first frame is still required of everyone, but a foreign page has no
	// business making a visitor's browser try.
	if !s.sameOrigin(r) {
		s.wg.Done()
		http.Error(w, "cross-origin WebSocket refused: serve the web app from this gateway, or list its origin in --allowed-origins", http.StatusForbidden)
		return
	}
	hw := &hijackWriter{ResponseWriter: w, timeout: s.cfg.WriteTimeout}
	pr := &prober{s: s}
	p := peer{addr: s.clientAddr(r), local: admin.IsLocal(r.Context())}
	// Counted as waiting for its hello before the upgrade is answered, so
	// the bounds see connections in the order they were made.
	wait := s.waitHello(p.addr)
	c, err := websocket.Accept(hw, r, &websocket.AcceptOptions{InsecureSkipVerify: true, OnPongReceived: pr.pong}) // origin checked above
	if err != nil {
		s.helloCame(wait)
		s.wg.Done()
		return
	}
	pr.ws = c
	c.SetReadLimit(-1) // enforced per frame in readFrame, with an error frame
	s.mu.Lock()
	s.socks[c] = pr
	s.mu.Unlock()
	sess, d, ok := s.hello(c, pr, p, wait)
	if !ok {
		s.closed(c)
		return
	}
	// The connection lives on in a goroutine of its own, so that this one's
	// stack (grown by net/http and the hello's database work) and net/http's
	// state for the upgrade request are freed while the device idles.
	go func() {
		defer s.closed(c)
		s.serve(c, hw.conn, pr, sess, d)
	}()
}

// closed forgets a connection's socket once its handling is over.
func (s *Server) closed(c *websocket.Conn) {
	s.mu.Lock()
	if p := s.socks[c]; p != nil {
		p.end()
	}
	delete(s.socks, c)
	s.mu.Unlock()
	c.CloseNow()
	s.wg.Done()
}

// session is one dialect's authenticated connection.
type session interface {
	Conn() *hub.Conn
	// TokenID is the token the session said hello with (revocation).
	TokenID() string
	// Handle processes a text frame, returning its type for metrics and,
	// when the connection must close, an error fatalFrame understands.
	Handle(ctx context.Context, data []byte) (string, error)
	HandleBinary(ctx context.Context, data []byte)
	Close()
}

// dialect is what the read loop needs to know of the connection's
// dialect besides its session.
type dialect struct {
	name   string // metrics label
	limit  int64  // largest frame accepted
	proofs bool   // outbox frames are proven (for sync): Iris; Hermes Mobile has no replay
	// tooBig is the error frame and close for a frame over limit.
	tooBig    []byte
	tooBigErr *closeErr
	// badText, when set, is the error frame for a text frame that is not
	// UTF-8, which then closes the connection with 1007 (Iris, as RFC 6455
	// §8.1 asks). Hermes Mobile answers such a frame itself with a
	// non-fatal bad_frame, as its protocol says.
	badText []byte
}

// fatalFrame reads a dialect's fatal error: the error frame to send and
// the close reason (the status is always 1008).
func fatalFrame(err error) ([]byte, string, bool) {
	var fi *iris.Fatal
	if errors.As(err, &fi) {
		return fi.Frame, fi.Reason, true
	}
	var fm *mobile.Fatal
	if errors.As(err, &fm) {
		return fm.Frame, fm.Reason, true
	}
	return nil, "", false
}

// open authenticates the first frame in the dialect it picks: "t":"hello"
// is Hermes Mobile, a "type" member is Iris, another "t" frame gets a
// Hermes Mobile bad_frame. ok is false when the connection was closed.
func (s *Server) open(ctx context.Context, c *websocket.Conn, p peer, first []byte) (session, dialect, bool) {
	var (
		sess session
		d    dialect
		err  error
	)
	switch {
	case mobile.Is(first) || (!iris.Is(first) && mobile.Looks(first)):
		d = s.dialects[0]
		var ms *mobile.Session
		if ms, err = s.mob.Open(ctx, mobile.Peer{Addr: p.addr, Local: p.local}, first); err == nil {
			sess = ms
		}
	case iris.Is(first) && !utf8.Valid(first):
		s.writeRaw(c, badTextFrame)
		c.Close(errBadText.code, errBadText.reason)
		return nil, d, false
	case iris.Is(first):
		d = s.dialects[1]
		var is *iris.Session
		if is, err = iris.Open(ctx, iris.Config{GW: s.gw, Auth: s.auth, Log: s.log, Push: s.cfg.Push, PushNtfyServer: s.cfg.NtfyServer, VAPIDPublicKey: s.cfg.WebPushKey}, p.addr, first); err == nil {
			sess = is
		}
	default:
		c.Close(websocket.StatusPolicyViolation, "the first frame must be a hello")
		return nil, d, false
	}
	if err != nil {
		if frame, reason, ok := fatalFrame(err); ok {
			s.writeRaw(c, frame)
			c.Close(websocket.StatusPolicyViolation, reason)
			return nil, d, false
		}
		c.Close(websocket.StatusInternalError, "internal error")
		return nil, d, false
	}
	return sess, d, true
}

// peer is where a connection comes from.
type peer struct {
	addr  string // the client's address (clientAddr)
	local bool   // over the admin socket
}

// hello reads and authenticates a connection's first frame, within the
// wait w (waitHello).
func (s *Server) hello(c *websocket.Conn, pr *prober, p peer, w *helloWait) (session, dialect, bool) {
	s.startHello(c, w)
	typ, first, release, err := readFrame(s.base, c, helloLimit, s.helloBudget, gateway.AddrKey(p.addr), pr.stall)
	defer release()
	if !s.helloCame(w) {
		return nil, dialect{}, false
	}
	if err != nil {
		if errors.Is(err, errTooBig) {
			c.Close(websocket.StatusMessageTooBig, "hello too large")
		}
		return nil, dialect{}, false
	}
	if typ != websocket.MessageText {
		c.Close(websocket.StatusPolicyViolation, "the first frame must be a hello")
		return nil, dialect{}, false
	}
	sess, d, ok := s.open(s.base, c, p, first)
	if ok {
		s.sawHello(p.addr)
	}
	return sess, d, ok
}

// serve is a connection's read loop after its hello; writers are started
// by the connection's queue when frames wait.
func (s *Server) serve(c *websocket.Conn, sock *corkedConn, pr *prober, sess session, d dialect) {
	ctx := s.base
	conn := sess.Conn()
	if d.proofs {
		pr.attach(conn)
		conn.TrackProofs()
	}
	s.mu.Lock()
	if s.down {
		// Shutdown may have closed the live connections before this one
		// was registered.
		conn.Close(errGoingAway)
	}
	s.mu.Unlock()
	s.m.FramesIn.WithLabelValues(d.name, "hello").Inc()
	if tok := sess.TokenID(); s.tokens.add(tok, conn, d.name) {
		defer s.tokens.remove(tok, conn)
	}
	writerDone := make(chan struct{})
	w := &writer{s: s, c: c, sock: sock, conn: conn, out: s.m.FramesOut.WithLabelValues(d.name), done: writerDone}
	if d.proofs {
		w.prober = pr
	}
	conn.Drive(w.drain)

	for {
		typ, data, release, err := readFrame(ctx, c, d.limit, s.budget, conn.Token, pr.stall)
		if err != nil {
			if errors.Is(err, errTooBig) {
				conn.Send(hub.Out{Data: d.tooBig})
				conn.Close(d.tooBigErr)
			}
			// A close frame proves nothing: a peer that has sent Close may
			// drop the data frames that reach it afterwards (coder/websocket
			// does), so frames written before it stay unproven. Nor does
			// any other frame: see prober.
			break
		}
		stop := s.handleFrame(ctx, conn, sess, d, typ, data)
		release()
		if stop {
			break
		}
	}
	sess.Close()
	s.gw.Disconnect(conn)
	conn.Close(&closeErr{websocket.StatusNormalClosure, ""})
	<-writerDone
}

// handleFrame handles one frame after the hello; true means the
// connection is closing.
func (s *Server) handleFrame(ctx context.Context, conn *hub.Conn, sess session, d dialect, typ websocket.MessageType, data []byte) bool {
	if d.badText != nil && typ == websocket.MessageText && !utf8.Valid(data) {
		// JSON decoding would turn the bad bytes into U+FFFD and store
		// what the device never wrote.
		conn.Send(hub.Out{Data: d.badText})
		conn.Close(errBadText)
		return true
	}
	if typ == websocket.MessageBinary {
		s.m.FramesIn.WithLabelValues(d.name, "binary").Inc()
		s.safely(conn, d.name, func() error { sess.HandleBinary(ctx, data); return nil })
		return false
	}
	if err := s.safely(conn, d.name, func() error {
		typ, err := sess.Handle(ctx, data)
		s.m.FramesIn.WithLabelValues(d.name, typ).Inc()
		return err
	}); err != nil {
		if frame, reason, ok := fatalFrame(err); ok {
			conn.Send(hub.Out{Data: frame})
			conn.Close(&closeErr{websocket.StatusPolicyViolation, reason})
			return true
		}
	}
	return false
}

// safely runs one frame's handling; a panic is logged and answered as an
// internal error instead of taking the process down.
func (s *Server) safely(conn *hub.Conn, dialect string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic handling a frame", "device", conn.DeviceID, "panic", fmt.Sprint(p))
			if dialect == "mobile" {
				conn.Send(hub.Out{Data: mobile.InternalErrorFrame})
			} else {
				conn.Send(hub.Out{Data: internalErrorFrame})
			}
			err = nil
		}
	}()
	return fn()
}

// writer puts a connection's queued frames on its socket. A drain runs
// while frames wait and ends when the queue is empty; the one that finds
// the queue closed closes the socket with the status it was closed with.
type writer struct {
	s    *Server
	c    *websocket.Conn
	sock *corkedConn
	conn *hub.Conn
	out  prometheus.Counter
	done chan struct{} // closed once the socket is closed
	// prober, when set, is pinged after a batch that carried outbox
	// frames: its answer proves them.
	prober *prober
}

var outBufs = sync.Pool{New: func() any { return new([]hub.Out) }}

func (w *writer) drain() {
	finished := false
	defer func() {
		if p := recover(); p != nil {
			w.s.log.Error("panic in writer", "device", w.conn.DeviceID, "panic", fmt.Sprint(p))
			w.c.CloseNow()
			w.conn.Close(errors.New("writer failed"))
			if !finished {
				close(w.done)
			}
		}
	}()
	bp := outBufs.Get().(*[]hub.Out)
	defer outBufs.Put(bp)
	for {
		buf, err := w.conn.Next(*bp)
		*bp = buf
		if len(buf) > 0 {
			if werr := w.write(buf); werr != nil {
				w.c.CloseNow()
				w.conn.Close(werr)
				finished = true
				close(w.done)
				return
			}
			clear(buf) // the pool must not keep frames alive
		}
		if err != nil {
			w.closeSocket(err)
			finished = true
			close(w.done)
			return
		}
		if len(buf) == 0 {
			return
		}
	}
}

// write sends a batch in as few system calls as the socket allows. Its
// frames count as written (for proofs of delivery) only once they have
// left the cork, never while they wait in it.
func (w *writer) write(buf []hub.Out) error {
	w.sock.cork()
	var err error
	for _, o := range buf {
		typ := websocket.MessageText
		if o.Binary {
			typ = websocket.MessageBinary
		}
		if err = w.c.Write(context.Background(), typ, o.Data); err != nil {
			break
		}
	}
	if uerr := w.sock.uncork(); err == nil {
		err = uerr
	}
	if err != nil {
		return err
	}
	if w.prober != nil && w.conn.Wrote(buf) {
		w.prober.ping()
	}
	w.out.Add(float64(len(buf)))
	return nil
}

func (w *writer) closeSocket(err error) {
	var ce *closeErr
	switch {
	case errors.As(err, &ce):
		w.c.Close(ce.code, ce.reason)
	case errors.Is(err, hub.ErrSlow):
		w.s.log.Warn("closing a device that reads too slowly", "device", w.conn.DeviceID)
		w.c.Close(websocket.StatusTryAgainLater, "too slow: reconnect and sync")
	case errors.Is(err, hub.ErrReplaced):
		w.c.Close(websocket.StatusNormalClosure, "replaced by a newer connection of this device")
	default:
		w.c.CloseNow()
	}
}

func (s *Server) writeRaw(c *websocket.Conn, data []byte) {
	ctx, cancel := context.WithTimeout(s.base, s.cfg.WriteTimeout)
	defer cancel()
	c.Write(ctx, websocket.MessageText, data)
}

var (
	errTooBig  = errors.New("frame too large")
	errBadText = &closeErr{websocket.StatusInvalidFramePayloadData, "text frame is not valid UTF-8"}
)

func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

const helloTimeoutReason = "auth_required"

var (
	// helloTimeoutFrame is sent before the dialect is known: it is an
	// error frame of both, Iris (type, payload) and Hermes Mobile (t,
	// code, fatal), each ignoring the other's members. Its close reason is
	// the Hermes Mobile code, which also names the problem for Iris.
	helloTimeoutFrame = []byte(`{"v":1,"type":"error","payload":{"code":"unsupported","message":"no hello within the timeout"},` +
		`"t":"error","code":"auth_required","message":"no hello within the timeout","fatal":true}`)
	internalErrorFrame = []byte(`{"v":1,"type":"error","payload":{"code":"internal","message":"internal error"}}`)
	badTextFrame       = []byte(`{"v":1,"type":"error","payload":{"code":"unsupported","message":"text frame is not valid UTF-8"}}`)
)

func tooBigFrame(limit int64) []byte {
	return []byte(fmt.Sprintf(`{"v":1,"type":"error","payload":{"code":"unsupported","message":"frame larger than %d bytes"}}`, limit))
}
