package fakehermes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers in the OpenAI error shape Hermes uses (_openai_error).
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
		SessionKey: r.Header.Get("X-Hermes-Session-Key"), Idempotency: r.Header.Get("Idempotency-Key"), Body: body})
	s.changedLocked()
	return len(s.requests) - 1
}

// readBody reads and logs a JSON body; ok is false when it is not a JSON
// object (the handler answers "Invalid JSON" where Hermes does).
func (s *Server) readBody(r *http.Request) (body map[string]any, n int, ok bool) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 10_000_000)) // MAX_REQUEST_BYTES
	err := json.Unmarshal(raw, &body)
	n = s.log(r, body)
	return body, n, err == nil && body != nil
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

// live counts the runs that hold a slot: a stream not yet consumed or
// swept (legacy: len(self._run_streams)), and in the default generation
// also a run still working (active_agent_work_count).
func (s *Server) liveLocked() int {
	n := 0
	for _, x := range s.order {
		if x.stream != "gone" && !x.swept || !s.cfg.Legacy && !isClosed(x.done) && !x.killed {
			n++
		}
	}
	return n
}

func (s *Server) tooMany(w http.ResponseWriter) bool {
	s.mu.Lock()
	busy := s.liveLocked() >= s.cfg.MaxRuns
	s.mu.Unlock()
	if busy {
		if !s.cfg.Legacy {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("Too many concurrent runs (max %d)", s.cfg.MaxRuns), "rate_limit_exceeded")
	}
	return busy
}

// validKey is the Idempotency-Key rule of _handle_runs: 1-255 visible ASCII
// characters.
func validKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 33 || k[i] > 126 {
			return false
		}
	}
	return true
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	body, n, bodyOK := s.readBody(r)
	if !s.authorized(w, r) {
		return
	}
	sessionKey := r.Header.Get("X-Hermes-Session-Key")
	if s.cfg.Legacy && s.tooMany(w) { // the legacy handler checks the limit first
		return
	}
	if !bodyOK {
		writeError(w, http.StatusBadRequest, "Invalid JSON", "")
		return
	}
	var key, fingerprint string
	if !s.cfg.Legacy { // the legacy handler never reads the header
		key = r.Header.Get("Idempotency-Key")
		if !validKey(key) {
			writeError(w, http.StatusBadRequest, "Idempotency-Key must be 1-255 visible ASCII characters", "invalid_idempotency_key")
			return
		}
		b, _ := json.Marshal(map[string]any{"body": body, "gateway_session_key": sessionKey}) // sorted keys, as sort_keys=True
		sum := sha256.Sum256(b)
		fingerprint = hex.EncodeToString(sum[:])
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
	if l, ok := input.([]any); ok {
		last, _ := l[len(l)-1].(map[string]any)
		if c, _ := last["content"].(string); c == "" {
			writeError(w, http.StatusBadRequest, "No user message found in input", "")
			return
		}
	}
	if key != "" {
		// A replay resolves even while its run holds the last slot
		// (lookup before _concurrency_limited_response).
		s.mu.Lock()
		orig := s.idem[key]
		var status string
		if orig != nil {
			status = orig.status
		}
		s.mu.Unlock()
		if orig != nil {
			if orig.fingerprint != fingerprint {
				writeError(w, http.StatusConflict, "Idempotency-Key was already used with a different request payload", "idempotency_key_conflict")
				return
			}
			w.Header().Set("Idempotency-Replayed", "true")
			if sessionKey != "" {
				w.Header().Set("X-Hermes-Session-Key", sessionKey)
			}
			writeJSON(w, http.StatusAccepted, map[string]any{"run_id": orig.id, "status": status, "replayed": true})
			return
		}
	}
	if !s.cfg.Legacy && s.tooMany(w) {
		return
	}
	id := "run_" + newHex()
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
		idemKey: key, fingerprint: fingerprint, controls: true, streamCreated: time.Now(),
		notify: make(chan struct{}, 1), stream: "fresh", steered: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	sc := Script{Steps: append(Deltas("ok", 1), Completed("ok", 5, 1))}
	if len(s.scripts) > 0 {
		sc = s.scripts[0]
		s.scripts = s.scripts[1:]
	}
	s.runs[id] = rn
	s.order = append(s.order, rn)
	if key != "" {
		s.idem[key] = rn
	}
	s.requests[n].RunID = id
	s.changedLocked()
	s.mu.Unlock()
	s.playing.Add(1)
	go s.play(rn, sc)
	if sessionKey != "" {
		w.Header().Set("X-Hermes-Session-Key", sessionKey)
	}
	out := map[string]any{"run_id": id, "status": "started"}
	if !s.cfg.Legacy {
		out["replayed"] = false // _accepted_response
	}
	writeJSON(w, http.StatusAccepted, out)
}

// openRun opens a handler of a run's route as Hermes's do: the request is
// logged (with its JSON body when withBody; bodyOK says it was one), the
// key checked (401), the run looked up (404). rn is nil when the answer
// was given.
func (s *Server) openRun(w http.ResponseWriter, r *http.Request, withBody bool) (rn *run, body map[string]any, bodyOK bool) {
	if withBody {
		body, _, bodyOK = s.readBody(r)
	} else {
		s.log(r, nil)
	}
	if !s.authorized(w, r) {
		return nil, nil, false
	}
	return s.runOr404(w, r.PathValue("id")), body, bodyOK
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

// statusLocked is the pollable status (_set_run_status's record).
func (s *Server) statusLocked(rn *run) map[string]any {
	st := map[string]any{"object": "hermes.run", "run_id": rn.id, "status": rn.status, "created_at": rn.created,
		"updated_at": rn.updated, "session_id": rn.session, "model": rn.model}
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
	if rn.approvalField != nil && rn.status == "waiting_for_approval" {
		st["approval"] = rn.approvalField
	}
	if rn.pendingSteerField != "" {
		st["pending_steer"] = rn.pendingSteerField
	}
	return st
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	rn, _, _ := s.openRun(w, r, false)
	if rn == nil {
		return
	}
	s.mu.Lock()
	rn.polls++
	st := s.statusLocked(rn)
	s.changedLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
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
