// Package fakehermes is a fake Hermes Agent API server for tests. It speaks
// the run endpoints as ../shared/spec/hermes-api-server.md describes them and
// as Hermes Agent's own code answers them, in two generations:
//
//   - the default copies gateway/platforms/api_server_runs.py (NousResearch/
//     hermes-agent @005b4b7, with tools/approval.py and
//     tools/approval_gateway_wait.py of the same time): approvals carry a
//     request_id, POST /v1/runs/{id}/steer exists, POST /v1/runs honours an
//     Idempotency-Key, a run whose gateway restarted is "interrupted", the
//     sweeper drops only unread streams and /stop answers 409 run_not_active
//     for a run this process does not hold;
//   - Config.Legacy copies the run routes inside gateway/platforms/
//     api_server.py @002b7c34 (mid-2026): bare approvals, no steer route
//     (aiohttp's plain-text 404), no idempotency, and a sweeper that drops a
//     run's controls ~300 s after it started even while its stream is read,
//     after which /stop answers 404 and approvals 409 while the run goes on.
//
// Both: Bearer auth (the exact 401 body), POST /v1/runs (202, 400, 429 past
// 10 live runs), GET /v1/runs/{id}/events (one `data: <json>` line per event,
// `: keepalive` after silence, `: stream closed` at the end, single consumer,
// gone once closed), GET /v1/runs/{id}, POST /v1/runs/{id}/approval and
// POST /v1/runs/{id}/stop.
//
// Each run plays a Script: events, keepalives, lines split across TCP
// writes, approvals it waits for (until Hermes's own approval timeout),
// holds, steers it waits for, and a connection dropped mid-run while the run
// goes on.
package fakehermes

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Unauthorized is the exact body of a 401.
const Unauthorized = `{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}`

// Config adjusts the server; zero values are Hermes's.
type Config struct {
	Key string // required Bearer token; "" accepts any request, as Hermes without API_SERVER_KEY
	// Legacy selects the mid-2026 API server (see the package comment).
	Legacy bool
	// KeepaliveEvery is the silence after which a stream gets ": keepalive"
	// (Hermes: 30 s).
	KeepaliveEvery time.Duration
	// UnknownRunWait is how long subscribing to an unknown (or gone) run
	// waits before the 404 (Hermes: 20 × 50 ms).
	UnknownRunWait time.Duration
	// MaxRuns is how many runs may be live at once (Hermes: 10).
	MaxRuns int
	// StreamTTL is _RUN_STREAM_TTL: how old a run's stream may get before
	// the sweeper takes it (Hermes: 300 s). SweepEvery is how often the
	// sweeper runs (Hermes: 60 s); Sweep runs it at once.
	StreamTTL, SweepEvery time.Duration
	// ApprovalTimeout is approvals.timeout: an approval nobody answers
	// within it is denied by Hermes, which says nothing on the stream
	// (tools/approval_gateway_wait.py). Hermes: 300 s (60 s in the legacy
	// generation).
	ApprovalTimeout time.Duration
}

// Step is one thing a run does. Exactly one field is set (Split goes with
// Event).
type Step struct {
	// Event is emitted as one SSE event; "event" names it, run_id and
	// timestamp are added. run.completed and run.failed end the run (and
	// set its status).
	Event map[string]any
	// Split writes the event's line in this many pieces, each flushed on
	// its own (so a line arrives across TCP writes).
	Split int
	// Keepalive writes ": keepalive" on the stream.
	Keepalive bool
	// Disconnect drops the stream's connection at this point; the run goes
	// on, and its stream is gone for good.
	Disconnect bool
	// Approval asks for an approval (approval.request with these fields)
	// and waits for POST …/approval, Hermes's approval timeout or a stop.
	Approval map[string]any
	// ApprovalTimeout, with Approval, overrides Config.ApprovalTimeout.
	ApprovalTimeout time.Duration
	// Hold waits until the channel closes (or a stop).
	Hold <-chan struct{}
	// AwaitPolls waits until the run's status has been polled this many
	// more times (or a stop).
	AwaitPolls int
	// AwaitSteer waits until a steer has been accepted (or a stop).
	AwaitSteer bool
	// Together asks these Approval steps at once, in order, and waits until
	// each has its answer or its timeout (or a stop): tools running in
	// parallel, such as delegate_task's batch, whose children run in
	// threads of their own (tools/delegate_tool.py) and each block on an
	// approval in the session's one FIFO queue (tools/approval.py,
	// _gateway_queues), so several are pending at once.
	Together []Step
}

// Script is what one run does. Without a run.completed or run.failed step
// it completes with the text of its deltas.
type Script struct{ Steps []Step }

// Request is a request the server received.
type Request struct {
	Method, Path string
	Auth         string
	SessionKey   string         // X-Hermes-Session-Key
	Idempotency  string         // Idempotency-Key
	Body         map[string]any // decoded JSON body, if any
	RunID        string         // for POST /v1/runs: the run it started (202, not a replay)
}

// Run describes a run the server made.
type Run struct {
	ID, SessionID, Status string
	// Approvals are the choices Hermes took, in order: once, session,
	// always, deny, or "timeout" (its own approval timeout denied it) and
	// "swept" (the legacy sweeper dropped the approval session).
	Approvals []string
	// Decided says which command each of them went to: "once rm -rf build".
	Decided       []string
	StopRequested bool
	Polls         int
	Input         any
	Stream        string   // fresh | open | gone
	Steers        []string // steers accepted
	Delivered     []string // steers the agent read (at a tool boundary)
	PendingSteer  string   // steers the run ended without reading
	Swept         bool     // the legacy sweeper dropped its controls
}

// Server is a running fake.
type Server struct {
	URL string // http://127.0.0.1:PORT, without /v1

	cfg   Config
	addr  string
	hs    *http.Server
	start time.Time

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]bool
	scripts  []Script
	runs     map[string]*run
	order    []*run
	requests []Request
	idem     map[string]*run // Idempotency-Key → the run it admitted
	changed  chan struct{}   // closed and replaced on every change

	closing chan struct{}
	serving sync.WaitGroup
	playing sync.WaitGroup
}

type run struct {
	id, session, model string
	input              any
	created, updated   float64
	status, lastEvent  string
	output             *string
	usage              map[string]any
	errMsg             *string
	approvalField      map[string]any // the status's "approval" while waiting
	pendingSteerField  string

	idemKey, fingerprint string

	queue         []item
	notify        chan struct{} // cap 1: the queue grew
	stream        string        // fresh | open | gone
	streamCreated time.Time
	swept         bool // legacy: the sweeper dropped stream, controls and approval session
	controls      bool // the agent and task are held by this process
	detached      bool // held by another process (Detach)

	pending   []*approval // FIFO, as tools/approval.py's _gateway_queues
	approvals []string
	decided   []string
	polls     int
	steers    []string // accepted, not yet read
	accepted  []string
	delivered []string
	steered   chan struct{} // cap 1: a steer was accepted

	stop     chan struct{}
	stopOnce sync.Once
	stopReq  bool
	killed   bool // Restart: the process died under it
	done     chan struct{}
}

type approval struct {
	requestID string
	data      map[string]any
	answer    chan string // cap 1; closed when woken without a choice
}

// decide records what became of an approval; s.mu is held.
func (rn *run) decide(a *approval, choice string) {
	rn.approvals = append(rn.approvals, choice)
	cmd, _ := a.data["command"].(string)
	rn.decided = append(rn.decided, choice+" "+cmd)
}

type item struct {
	line       []byte
	split      int
	keepalive  bool
	disconnect bool
	end        bool
}

// New starts a server until the test ends.
func New(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.KeepaliveEvery <= 0 {
		cfg.KeepaliveEvery = 30 * time.Second
	}
	if cfg.UnknownRunWait <= 0 {
		cfg.UnknownRunWait = time.Second
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 10
	}
	if cfg.StreamTTL <= 0 {
		cfg.StreamTTL = 300 * time.Second
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = 60 * time.Second
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 300 * time.Second
		if cfg.Legacy {
			cfg.ApprovalTimeout = 60 * time.Second
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		cfg: cfg, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{}, start: time.Now(),
		runs: map[string]*run{}, idem: map[string]*run{}, changed: make(chan struct{}), closing: make(chan struct{}),
	}
	s.URL = "http://" + s.addr
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", s.startRun)
	mux.HandleFunc("GET /v1/runs/{id}", s.getRun)
	mux.HandleFunc("GET /v1/runs/{id}/events", s.events)
	mux.HandleFunc("POST /v1/runs/{id}/approval", s.approve)
	mux.HandleFunc("POST /v1/runs/{id}/stop", s.stopRun)
	if !cfg.Legacy {
		mux.HandleFunc("POST /v1/runs/{id}/steer", s.steer)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.log(r, nil)
		notFound(w)
	})
	s.hs = &http.Server{Handler: mux, ConnState: s.track}
	s.serve(ln)
	s.playing.Add(1)
	go s.sweeper()
	t.Cleanup(s.close)
	return s
}

// notFound is aiohttp's answer for a route the app does not have: plain
// text, not the OpenAI error shape (the legacy API server has no /steer).
func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte("404: Not Found"))
}

func (s *Server) serve(ln net.Listener) {
	s.serving.Add(1)
	go func() { defer s.serving.Done(); s.hs.Serve(ln) }()
}

func (s *Server) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.conns[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	}
}

func (s *Server) close() {
	close(s.closing)
	s.hs.Close()
	s.serving.Wait()
	s.playing.Wait()
}

// Down makes the server unreachable: its port refuses connections and the
// open ones are dropped. Runs go on.
func (s *Server) Down() {
	s.mu.Lock()
	ln := s.ln
	s.ln = nil
	conns := s.conns
	s.conns = map[net.Conn]bool{}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for c := range conns {
		c.Close()
	}
}

// Up listens again on the same address after Down.
func (s *Server) Up(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatalf("fakehermes: listening again on %s: %v", s.addr, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	s.serve(ln)
}

// Restart is `hermes gateway` restarting: connections drop and every run
// dies with the process. What is known afterwards is what Hermes persists:
// the default generation keeps the status of runs started with an
// Idempotency-Key (runs_idempotency.db), and one that had not settled reads
// "interrupted" (api_server_runs.py, _durable_run_status); everything else,
// and in the legacy generation everything, is forgotten (404).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Down()
	s.mu.Lock()
	for _, rn := range s.order {
		if !isClosed(rn.done) {
			rn.killed = true
		}
		rn.stopOnce.Do(func() { close(rn.stop) })
	}
	s.mu.Unlock()
	s.mu.Lock()
	all := append([]*run(nil), s.order...)
	s.mu.Unlock()
	for _, rn := range all {
		<-rn.done
	}
	s.mu.Lock()
	for id, rn := range s.runs {
		rn.stream, rn.queue, rn.controls, rn.pending = "gone", nil, false, nil
		if s.cfg.Legacy || rn.idemKey == "" {
			delete(s.runs, id)
			continue
		}
		if rn.killed {
			msg := "The gateway restarted before this run settled."
			rn.errMsg = &msg
			s.setStatus(rn, "interrupted", "run.interrupted")
		}
	}
	s.changedLocked()
	s.mu.Unlock()
	s.Up(t)
}

// Detach makes a run's controls belong to another Hermes gateway process
// sharing the same state (its status stays readable, the run goes on):
// /stop answers 409 run_not_active, as api_server_runs.py does for a run
// with a status but no agent or task in this process.
func (s *Server) Detach(id string) {
	s.mu.Lock()
	if rn := s.runs[id]; rn != nil {
		rn.detached = true
	}
	s.changedLocked()
	s.mu.Unlock()
}

// SetKey changes the key the server requires.
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	s.cfg.Key = key
	s.mu.Unlock()
}

// Push queues scripts for the next runs, in order. A run without a script
// answers "ok".
func (s *Server) Push(scripts ...Script) {
	s.mu.Lock()
	s.scripts = append(s.scripts, scripts...)
	s.mu.Unlock()
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RunBodies returns the bodies of the runs started (202, not replays),
// oldest first.
func (s *Server) RunBodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, r := range s.requests {
		if r.RunID != "" {
			out = append(out, r.Body)
		}
	}
	return out
}

// Runs describes the runs made so far, oldest first.
func (s *Server) Runs() []Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Run, len(s.order))
	for i, r := range s.order {
		out[i] = Run{ID: r.id, SessionID: r.session, Status: r.status, Approvals: append([]string(nil), r.approvals...), Decided: append([]string(nil), r.decided...),
			StopRequested: r.stopReq, Polls: r.polls, Input: r.input, Stream: r.stream, Steers: append([]string(nil), r.accepted...),
			Delivered: append([]string(nil), r.delivered...), PendingSteer: r.pendingSteerField, Swept: r.swept}
	}
	return out
}

// Wait waits until cond holds for the runs (checked at every change), or
// timeout; it reports whether cond held.
func (s *Server) Wait(timeout time.Duration, cond func([]Run) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond(s.Runs()) {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return cond(s.Runs())
		}
	}
}

func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func newHex() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
