// Package server is the gateway's network face: one HTTP listener with the
// WebSocket endpoint (/ws), health and metrics. It owns the sockets: a read
// loop and a writer per connection, with the dialect chosen by the first
// frame.
package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/version"
	"github.com/irisgate/irisgate/web"
	"github.com/irisgate/irisgate/wire"
)

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
	// dialects are offered each connection's first frame, in this order
	// (dialect.go); refusals are the frames for connections that never
	// say hello, in every dialect at once.
	dialects []wire.Dialect
	refusals struct{ timeout, evicted *wire.Fatal }

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
	s := &Server{cfg: cfg, gw: gw, auth: auth, log: log, reg: reg, m: m, base: base, cancel: cancel, budget: newBudget(cfg.MaxBuffered, max(cfg.MaxFrame, cfg.MobileMaxFrame), cfg.FrameGrace),
		helloBudget: newBudget(max(helloLimit, cfg.MaxBuffered/4), helloLimit, cfg.FrameGrace),
		socks:       make(map[*websocket.Conn]*prober), waiting: make(map[*helloWait]struct{}),
		dialects: newDialects(cfg, gw, auth, log)}
	s.refusals.timeout = s.refuse(wire.ErrHelloTimeout.New())
	s.refusals.evicted = s.refuse(wire.ErrHelloEvicted.New())
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
		s.cancel()       // stop waiting on slow peers
		s.closeSockets() // and on idle ones, which wait outside a read (idle.go)
		<-done
	}
	s.cancel()
	for _, d := range s.dialects {
		d.Close()
	}
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
	p := wire.Peer{Addr: s.clientAddr(r), Local: admin.IsLocal(r.Context())}
	// Counted as waiting for its hello before the upgrade is answered, so
	// the bounds see connections in the order they were made.
	wait := s.waitHello(p.Addr)
	c, err := websocket.Accept(hw, r, s.acceptOptions(r, pr)) // origin checked above
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
	// state for the upgrade request are freed while the device idles. This
	// one writes the hello reply first (live.first), while the read loop
	// starts: the reply waits for no goroutine to be scheduled.
	l := s.begin(c, hw.conn, pr, sess, d)
	go s.serve(l)
	l.first()
}

// closeSockets closes every socket at once.
func (s *Server) closeSockets() {
	s.mu.Lock()
	cs := make([]*websocket.Conn, 0, len(s.socks))
	for c := range s.socks {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.CloseNow()
	}
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

func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
