// Package fakehermes is a fake Hermes Agent API server for tests. It speaks
// the run endpoints as ../shared/spec/hermes-api-server.md describes them:
// Bearer auth (the exact 401 body), POST /v1/runs (202 {run_id,status}, 400
// for a missing input, 429 past 10 live runs), GET /v1/runs/{id}/events (one
// `data: <json>` line per event, no event names, `: keepalive` after
// silence, `: stream closed` at the end, single consumer, gone once closed),
// GET /v1/runs/{id} (status for polling), POST /v1/runs/{id}/approval and
// POST /v1/runs/{id}/stop.
//
// Each run plays a Script: events, keepalives, lines split across TCP
// writes, approvals it waits for, holds, and a connection dropped mid-run
// while the run goes on.
package fakehermes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Unauthorized is the exact body of a 401.
const Unauthorized = `{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}`

// Config adjusts the server; zero values are Hermes's.
type Config struct {
	Key string // required Bearer token; "" accepts any request, as Hermes without API_SERVER_KEY
	// KeepaliveEvery is the silence after which a stream gets ": keepalive"
	// (Hermes: 30 s).
	KeepaliveEvery time.Duration
	// UnknownRunWait is how long subscribing to an unknown (or gone) run
	// waits before the 404 (Hermes: about 1 s).
	UnknownRunWait time.Duration
	// MaxRuns is how many runs may have a live stream at once (Hermes: 10).
	MaxRuns int
}

// Step is one thing a run does. Exactly one field is set.
type Step struct {
	// Event is emitted as one SSE event; "event" names it, run_id and
	// timestamp are added. run.completed and run.failed end the run (and set
	// its status).
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
	// and waits for POST …/approval or a stop.
	Approval map[string]any
	// Hold waits until the channel closes (or a stop).
	Hold <-chan struct{}
	// AwaitPolls waits until the run's status has been polled this many
	// more times (or a stop).
	AwaitPolls int
}

// Script is what one run does. Without a run.completed or run.failed step
// it completes with the text of its deltas.
type Script struct{ Steps []Step }

// Request is a request the server received.
type Request struct {
	Method, Path string
	Auth         string
	SessionKey   string         // X-Hermes-Session-Key
	Body         map[string]any // decoded JSON body, if any
	RunID        string         // for POST /v1/runs: the run it started (202)
}

// Run describes a run the server made.
type Run struct {
	ID, SessionID, Status string
	Approvals             []string // choices received
	StopRequested         bool
	Polls                 int
	Input                 any
	Stream                string // fresh | open | gone
}

// Server is a running fake.
type Server struct {
	URL string // http://127.0.0.1:PORT, without /v1

	cfg  Config
	addr string
	hs   *http.Server

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]bool
	scripts  []Script
	runs     map[string]*run
	order    []*run
	requests []Request
	changed  chan struct{} // closed and replaced on every change

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

	queue  []item
	notify chan struct{} // cap 1: the queue grew
	stream string        // fresh | open | gone

	approvalPending bool
	answer          chan string // cap 1
	approvals       []string
	polls           int

	stop     chan struct{}
	stopOnce sync.Once
	stopReq  bool
	done     chan struct{}
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		cfg: cfg, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{},
		runs: map[string]*run{}, changed: make(chan struct{}), closing: make(chan struct{}),
	}
	s.URL = "http://" + s.addr
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", s.startRun)
	mux.HandleFunc("GET /v1/runs/{id}", s.getRun)
	mux.HandleFunc("GET /v1/runs/{id}/events", s.events)
	mux.HandleFunc("POST /v1/runs/{id}/approval", s.approval)
	mux.HandleFunc("POST /v1/runs/{id}/stop", s.stopRun)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.log(r, nil)
		writeError(w, http.StatusNotFound, "Not found", "")
	})
	s.hs = &http.Server{Handler: mux, ConnState: s.track}
	s.serve(ln)
	t.Cleanup(s.close)
	return s
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

// RunBodies returns the bodies of the runs started (202), oldest first.
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
		out[i] = Run{ID: r.id, SessionID: r.session, Status: r.status, Approvals: append([]string(nil), r.approvals...),
			StopRequested: r.stopReq, Polls: r.polls, Input: r.input, Stream: r.stream}
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

// Sweep drops the streams nobody consumed, as Hermes's time-to-live sweep
// does: they no longer count against the limit of live runs.
func (s *Server) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.order {
		if r.stream == "fresh" {
			r.stream, r.queue = "gone", nil
		}
	}
	s.changedLocked()
}

func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// --- handlers ---

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers in the OpenAI error shape Hermes uses.
func writeError(w http.ResponseWriter, status int, msg, code string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": c}})
}

func (s *Server) log(r *http.Request, body map[string]any) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"),
		SessionKey: r.Header.Get("X-Hermes-Session-Key"), Body: body})
	s.changedLocked()
	return len(s.requests) - 1
}

// authorized checks the Bearer key, answering the 401 itself.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	key := s.cfg.Key
	s.mu.Unlock()
	if key == "" || r.Header.Get("Authorization") == "Bearer "+key {
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	io.WriteString(w, Unauthorized)
	return false
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func newRunID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "run_" + hex.EncodeToString(b)
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	bodyErr := json.Unmarshal(raw, &body)
	n := s.log(r, body)
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	live := 0
	for _, x := range s.order {
		if x.stream != "gone" {
			live++
		}
	}
	max := s.cfg.MaxRuns
	s.mu.Unlock()
	if live >= max {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("Too many concurrent runs (max %d)", max), "rate_limit_exceeded")
		return
	}
	if bodyErr != nil || body == nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON", "")
		return
	}
	input := body["input"]
	if input == nil || input == "" {
		writeError(w, http.StatusBadRequest, "Missing 'input' field", "")
		return
	}
	if l, ok := input.([]any); ok && len(l) == 0 {
		writeError(w, http.StatusBadRequest, "Missing 'input' field", "")
		return
	}
	id := newRunID()
	session, _ := body["session_id"].(string)
	if session == "" {
		session = id
	}
	model, _ := body["model"].(string)
	if model == "" {
		model = "hermes-agent"
	}
	t := now()
	rn := &run{id: id, session: session, model: model, input: input, created: t, updated: t, status: "queued",
		notify: make(chan struct{}, 1), stream: "fresh", answer: make(chan string, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	sc := Script{Steps: append(Deltas("ok", 1), Completed("ok", 5, 1))}
	if len(s.scripts) > 0 {
		sc = s.scripts[0]
		s.scripts = s.scripts[1:]
	}
	s.runs[id] = rn
	s.order = append(s.order, rn)
	s.requests[n].RunID = id
	s.changedLocked()
	s.mu.Unlock()
	s.playing.Add(1)
	go s.play(rn, sc)
	if k := r.Header.Get("X-Hermes-Session-Key"); k != "" {
		w.Header().Set("X-Hermes-Session-Key", k)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"run_id": id, "status": "started"})
}

func (s *Server) runOr404(w http.ResponseWriter, id string) *run {
	s.mu.Lock()
	rn := s.runs[id]
	s.mu.Unlock()
	if rn == nil {
		writeError(w, http.StatusNotFound, "Run not found: "+id, "run_not_found")
	}
	return rn
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	s.log(r, nil)
	if !s.authorized(w, r) {
		return
	}
	rn := s.runOr404(w, r.PathValue("id"))
	if rn == nil {
		return
	}
	s.mu.Lock()
	rn.polls++
	st := map[string]any{"object": "hermes.run", "run_id": rn.id, "status": rn.status, "created_at": rn.created,
		"updated_at": rn.updated, "session_id": rn.session, "model": rn.model, "last_event": nil}
	if rn.lastEvent != "" {
		st["last_event"] = rn.lastEvent
	}
	if rn.output != nil {
		st["output"] = *rn.output
	}
	if rn.usage != nil {
		st["usage"] = rn.usage
	}
	if rn.errMsg != nil {
		st["error"] = *rn.errMsg
	}
	s.changedLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) approval(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	bodyErr := json.Unmarshal(raw, &body)
	s.log(r, body)
	if !s.authorized(w, r) {
		return
	}
	rn := s.runOr404(w, r.PathValue("id"))
	if rn == nil {
		return
	}
	if bodyErr != nil || body == nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON", "")
		return
	}
	choice := strings.ToLower(strings.TrimSpace(fmt.Sprint(body["choice"])))
	switch choice {
	case "approve", "approved", "allow":
		choice = "once"
	}
	switch choice {
	case "once", "session", "always", "deny":
	default:
		writeError(w, http.StatusBadRequest, "Invalid approval choice; expected one of: once, session, always, deny", "invalid_approval_choice")
		return
	}
	s.mu.Lock()
	ended := isClosed(rn.done)
	pending := rn.approvalPending
	if !ended && pending {
		rn.approvalPending = false
		rn.approvals = append(rn.approvals, choice)
		rn.answer <- choice
		s.setStatus(rn, "running", "approval.responded")
		s.pushLocked(rn, item{line: eventLine(rn.id, map[string]any{"event": "approval.responded", "choice": choice, "resolved": 1})})
	}
	s.mu.Unlock()
	switch {
	case ended:
		writeError(w, http.StatusConflict, "Run has no active approval session: "+rn.id, "approval_not_active")
	case !pending:
		writeError(w, http.StatusConflict, "Run has no pending approval: "+rn.id, "approval_not_pending")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"object": "hermes.run.approval_response", "run_id": rn.id, "choice": choice, "resolved": 1})
	}
}

func (s *Server) stopRun(w http.ResponseWriter, r *http.Request) {
	s.log(r, nil)
	if !s.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	rn := s.runs[id]
	active := rn != nil && !isClosed(rn.done)
	if active {
		rn.stopReq = true
		s.setStatus(rn, "stopping", "run.stopping")
	}
	s.mu.Unlock()
	if !active { // Hermes knows only runs still going here
		writeError(w, http.StatusNotFound, "Run not found: "+id, "run_not_found")
		return
	}
	rn.stopOnce.Do(func() { close(rn.stop) })
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-rn.done:
	case <-t.C:
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": id, "status": "stopping"})
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// events serves a run's stream: single consumer, gone once it closes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	s.log(r, nil)
	if !s.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	var rn *run
	wait := time.NewTimer(s.cfg.UnknownRunWait)
	defer wait.Stop()
	for rn == nil {
		s.mu.Lock()
		if x := s.runs[id]; x != nil && x.stream == "fresh" {
			rn = x
			rn.stream = "open"
			s.changedLocked()
		}
		s.mu.Unlock()
		if rn != nil {
			break
		}
		tick := time.NewTimer(50 * time.Millisecond)
		select {
		case <-tick.C:
			continue
		case <-wait.C:
			tick.Stop()
			writeError(w, http.StatusNotFound, "Run not found: "+id, "run_not_found")
			return
		case <-r.Context().Done():
			tick.Stop()
			return
		}
	}
	defer func() {
		s.mu.Lock()
		rn.stream, rn.queue = "gone", nil
		s.changedLocked()
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	ka := time.NewTimer(s.cfg.KeepaliveEvery)
	defer ka.Stop()
	write := func(b []byte) bool {
		_, err := w.Write(b)
		fl.Flush()
		return err == nil
	}
	for {
		s.mu.Lock()
		var it *item
		if len(rn.queue) > 0 {
			it = &rn.queue[0]
			rn.queue = rn.queue[1:]
		}
		s.mu.Unlock()
		if it == nil {
			select {
			case <-rn.notify:
			case <-ka.C:
				if !write([]byte(": keepalive\n\n")) {
					return
				}
				ka.Reset(s.cfg.KeepaliveEvery)
			case <-r.Context().Done():
				return
			case <-s.closing:
				return
			}
			continue
		}
		switch {
		case it.disconnect:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
				}
			}
			return
		case it.end:
			write([]byte(": stream closed\n\n"))
			return
		case it.keepalive:
			if !write([]byte(": keepalive\n\n")) {
				return
			}
		default:
			for _, p := range pieces(it.line, it.split) {
				if !write(p) {
					return
				}
			}
		}
		if !ka.Stop() {
			select {
			case <-ka.C:
			default:
			}
		}
		ka.Reset(s.cfg.KeepaliveEvery)
	}
}

// pieces cuts b into n parts of about equal size, on byte boundaries (a
// multi-byte character may be cut too, as TCP would).
func pieces(b []byte, n int) [][]byte {
	if n <= 1 || len(b) < n {
		return [][]byte{b}
	}
	out := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, b[i*len(b)/n:(i+1)*len(b)/n])
	}
	return out
}

func eventLine(runID string, ev map[string]any) []byte {
	m := make(map[string]any, len(ev)+2)
	for k, v := range ev {
		m[k] = v
	}
	m["run_id"] = runID
	m["timestamp"] = now()
	b, _ := json.Marshal(m)
	return []byte("data: " + string(b) + "\n\n")
}

// setStatus updates a run's status; s.mu is held.
func (s *Server) setStatus(rn *run, status, lastEvent string) {
	rn.status = status
	if lastEvent != "" {
		rn.lastEvent = lastEvent
	}
	rn.updated = now()
	s.changedLocked()
}

// pushLocked queues an item for the run's stream (dropped when nobody can
// read it any more); s.mu is held.
func (s *Server) pushLocked(rn *run, it item) {
	if rn.stream == "gone" {
		return
	}
	rn.queue = append(rn.queue, it)
	select {
	case rn.notify <- struct{}{}:
	default:
	}
}

func (s *Server) push(rn *run, it item) {
	s.mu.Lock()
	s.pushLocked(rn, it)
	s.mu.Unlock()
}

var errStopped = errors.New("stopped")

// play runs a script.
func (s *Server) play(rn *run, sc Script) {
	defer s.playing.Done()
	defer func() {
		s.mu.Lock()
		close(rn.done)
		s.changedLocked()
		s.mu.Unlock()
	}()
	s.mu.Lock()
	s.setStatus(rn, "running", "")
	s.mu.Unlock()
	var text strings.Builder
	err := func() error {
		for _, st := range sc.Steps {
			select {
			case <-rn.stop:
				return errStopped
			case <-s.closing:
				return context.Canceled
			default:
			}
			switch {
			case st.Keepalive:
				s.push(rn, item{keepalive: true})
			case st.Disconnect:
				s.push(rn, item{disconnect: true})
			case st.Hold != nil:
				select {
				case <-st.Hold:
				case <-rn.stop:
					return errStopped
				case <-s.closing:
					return context.Canceled
				}
			case st.AwaitPolls > 0:
				s.mu.Lock()
				target := rn.polls + st.AwaitPolls
				s.mu.Unlock()
				for {
					s.mu.Lock()
					ok, ch := rn.polls >= target, s.changed
					s.mu.Unlock()
					if ok {
						break
					}
					select {
					case <-ch:
					case <-rn.stop:
						return errStopped
					case <-s.closing:
						return context.Canceled
					}
				}
			case st.Approval != nil:
				ev := map[string]any{"event": "approval.request", "choices": []string{"once", "session", "always", "deny"}}
				for k, v := range st.Approval {
					ev[k] = v
				}
				s.mu.Lock()
				rn.approvalPending = true
				s.setStatus(rn, "waiting_for_approval", "approval.request")
				s.pushLocked(rn, item{line: eventLine(rn.id, ev)})
				s.mu.Unlock()
				select {
				case <-rn.answer:
				case <-rn.stop:
					return errStopped
				case <-s.closing:
					return context.Canceled
				}
			case st.Event != nil:
				name, _ := st.Event["event"].(string)
				s.mu.Lock()
				switch name {
				case "message.delta":
					d, _ := st.Event["delta"].(string)
					text.WriteString(d)
				case "run.completed":
					out, _ := st.Event["output"].(string)
					rn.output = &out
					rn.usage, _ = st.Event["usage"].(map[string]any)
					s.setStatus(rn, "completed", name)
				case "run.failed":
					msg, _ := st.Event["error"].(string)
					rn.errMsg = &msg
					s.setStatus(rn, "failed", name)
				default:
					rn.lastEvent = name
					s.changedLocked()
				}
				s.pushLocked(rn, item{line: eventLine(rn.id, st.Event), split: st.Split})
				ended := name == "run.completed" || name == "run.failed"
				if ended {
					s.pushLocked(rn, item{end: true})
				}
				s.mu.Unlock()
				if ended {
					return nil
				}
			}
		}
		out := text.String()
		s.mu.Lock()
		rn.output = &out
		rn.usage = map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
		s.setStatus(rn, "completed", "run.completed")
		s.pushLocked(rn, item{line: eventLine(rn.id, map[string]any{"event": "run.completed", "output": out, "usage": rn.usage})})
		s.pushLocked(rn, item{end: true})
		s.mu.Unlock()
		return nil
	}()
	if errors.Is(err, errStopped) {
		s.mu.Lock()
		rn.approvalPending = false
		s.setStatus(rn, "cancelled", "run.cancelled")
		s.pushLocked(rn, item{line: eventLine(rn.id, map[string]any{"event": "run.cancelled"})})
		s.pushLocked(rn, item{end: true})
		s.mu.Unlock()
	}
}

// --- script steps ---

// Event is a step emitting one event.
func Event(name string, fields map[string]any) Step {
	ev := map[string]any{"event": name}
	for k, v := range fields {
		ev[k] = v
	}
	return Step{Event: ev}
}

// Delta is one message.delta.
func Delta(s string) Step { return Event("message.delta", map[string]any{"delta": s}) }

// Deltas streams text in n message.delta events (cut on rune boundaries).
func Deltas(text string, n int) []Step {
	r := []rune(text)
	if n < 1 {
		n = 1
	}
	var out []Step
	for i := 0; i < n; i++ {
		a, b := i*len(r)/n, (i+1)*len(r)/n
		if a < b {
			out = append(out, Delta(string(r[a:b])))
		}
	}
	return out
}

// Reasoning is a reasoning.available event.
func Reasoning(text string) Step { return Event("reasoning.available", map[string]any{"text": text}) }

// ToolStarted is a tool.started event; preview may be nil.
func ToolStarted(tool string, preview any) Step {
	return Event("tool.started", map[string]any{"tool": tool, "preview": preview})
}

// ToolCompleted is a tool.completed event.
func ToolCompleted(tool string, duration float64, failed bool) Step {
	return Event("tool.completed", map[string]any{"tool": tool, "duration": duration, "error": failed})
}

// Completed ends the run with its output and usage.
func Completed(output string, in, out int) Step {
	return Event("run.completed", map[string]any{"output": output,
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out}})
}

// Failed ends the run with an error.
func Failed(msg string) Step { return Event("run.failed", map[string]any{"error": msg}) }

// Approval asks to approve a command and waits for the answer.
func Approval(command, description string) Step {
	return Step{Approval: map[string]any{"command": command, "description": description,
		"pattern_key": "dangerous", "pattern_keys": []string{"dangerous"}}}
}

// Keepalive writes a keepalive comment.
func Keepalive() Step { return Step{Keepalive: true} }

// Disconnect drops the stream's connection; the run goes on.
func Disconnect() Step { return Step{Disconnect: true} }

// Hold waits for ch to close.
func Hold(ch <-chan struct{}) Step { return Step{Hold: ch} }

// AwaitPolls waits for n more status polls.
func AwaitPolls(n int) Step { return Step{AwaitPolls: n} }

// Split makes an event step write its line in n pieces.
func Split(st Step, n int) Step {
	st.Split = n
	return st
}

// Reply is a script answering text in n deltas, then completing with it.
func Reply(text string, n int) Script {
	return Script{Steps: append(Deltas(text, n), Completed(text, 10, len(text)/4+1))}
}
