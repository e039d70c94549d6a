package fakehermes

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// setStatus updates a run's status as _set_run_status does; s.mu is held.
// The status's "approval" is kept only while waiting for one.
func (s *Server) setStatus(rn *run, status, lastEvent string) {
	rn.status = status
	if lastEvent != "" {
		rn.lastEvent = lastEvent
	}
	if status != "waiting_for_approval" {
		rn.approvalField = nil
	}
	rn.updated = now()
	s.changedLocked()
}

// progressEvents reach the stream through self._run_streams.get(run_id)
// (the tool-progress callback, _mark_run_event), the others through the
// queue the run holds itself. Once the legacy sweeper has dropped the
// run's entry, only the latter still arrive.
var progressEvents = map[string]bool{
	"tool.started": true, "tool.completed": true, "reasoning.available": true, "approval.responded": true,
}

// pushLocked queues an item for the run's stream (dropped when nobody can
// read it any more); s.mu is held.
func (s *Server) pushLocked(rn *run, it item, event string) {
	if rn.stream == "gone" || rn.swept && progressEvents[event] {
		return
	}
	rn.queue = append(rn.queue, it)
	select {
	case rn.notify <- struct{}{}:
	default:
	}
}

func (s *Server) pushEvent(rn *run, ev map[string]any, split int) {
	name, _ := ev["event"].(string)
	s.pushLocked(rn, item{line: eventLine(rn.id, ev), split: split}, name)
}

// approve is POST /v1/runs/{id}/approval (_handle_run_approval).
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	rn, body, bodyOK := s.openRun(w, r, true)
	if rn == nil {
		return
	}
	if !bodyOK {
		writeError(w, http.StatusBadRequest, "Invalid JSON", "")
		return
	}
	raw := strings.ToLower(strings.TrimSpace(fmt.Sprint(orEmpty(body["choice"]))))
	choice := raw
	switch raw {
	case "approve", "approved", "allow":
		choice = "once"
	}
	var requestID string
	if !s.cfg.Legacy { // the legacy handler never reads request_id
		if v, present := body["request_id"]; present && v != nil {
			str, _ := v.(string)
			requestID = strings.TrimSpace(str)
			if requestID == "" || len(requestID) > 256 {
				writeError(w, http.StatusBadRequest, "Approval request_id is invalid.", "invalid_approval_request")
				return
			}
		}
	}
	switch choice {
	case "once", "session", "always", "deny":
	default:
		msg := "Invalid approval choice; expected one of: always, deny, once, session" // sorted(allowed)
		if s.cfg.Legacy {
			msg = "Invalid approval choice; expected one of: once, session, always, deny"
		}
		writeError(w, http.StatusBadRequest, msg, "invalid_approval_choice")
		return
	}
	all := truthy(body["all"]) || truthy(body["resolve_all"])
	s.mu.Lock()
	active := !isClosed(rn.done) && !rn.swept && !rn.killed
	var targets []*approval
	if active {
		// resolve_gateway_approval: the one named, all, or the oldest.
		var keep []*approval
		for i, a := range rn.pending {
			switch {
			case requestID != "" && a.requestID == requestID, requestID == "" && all, requestID == "" && i == 0:
				targets = append(targets, a)
			default:
				keep = append(keep, a)
			}
		}
		rn.pending = keep
		for _, a := range targets {
			rn.decide(a, choice)
			a.answer <- choice
		}
		if len(targets) > 0 {
			s.setStatus(rn, "running", "approval.responded")
			ev := map[string]any{"event": "approval.responded", "choice": choice, "resolved": len(targets)}
			if requestID != "" {
				ev["request_id"] = requestID
			}
			s.pushEvent(rn, ev, 0)
		}
	}
	s.mu.Unlock()
	switch {
	case !active:
		writeError(w, http.StatusConflict, "Run has no active approval session: "+rn.id, "approval_not_active")
	case len(targets) == 0:
		writeError(w, http.StatusConflict, "Run has no pending approval: "+rn.id, "approval_not_pending")
	default:
		out := map[string]any{"object": "hermes.run.approval_response", "run_id": rn.id, "choice": choice, "resolved": len(targets)}
		if requestID != "" {
			out["request_id"] = requestID
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// truthy is _coerce_request_bool.
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "1", "true", "yes", "on":
			return true
		}
	}
	return false
}

func terminal(status string) bool {
	switch status {
	case "completed", "failed", "cancelled", "interrupted": // TERMINAL_STATUSES
		return true
	}
	return false
}

// stopRun is POST /v1/runs/{id}/stop (_handle_stop_run).
func (s *Server) stopRun(w http.ResponseWriter, r *http.Request) {
	s.log(r, nil)
	if !s.authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	rn := s.runs[id]
	var status map[string]any
	var held bool
	if rn != nil {
		status = s.statusLocked(rn)
		held = rn.controls && !rn.detached && !isClosed(rn.done)
	}
	s.mu.Unlock()
	if s.cfg.Legacy {
		// Legacy: only the agent and task refs count, and the sweeper may
		// have dropped them while the run goes on.
		if !held {
			writeError(w, http.StatusNotFound, "Run not found: "+id, "run_not_found")
			return
		}
	} else {
		switch {
		case rn == nil:
			writeError(w, http.StatusNotFound, "Run not found: "+id, "run_not_found")
			return
		case terminal(fmt.Sprint(status["status"])):
			writeJSON(w, http.StatusOK, status)
			return
		case !held:
			writeError(w, http.StatusConflict, "Run is not active in this gateway process: "+id, "run_not_active")
			return
		}
	}
	s.mu.Lock()
	rn.stopReq = true
	s.setStatus(rn, "stopping", "run.stopping")
	s.mu.Unlock()
	rn.stopOnce.Do(func() { close(rn.stop) })
	if s.cfg.Legacy {
		// The legacy handler cancels the task and waits for it, at most 5 s.
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-rn.done:
		case <-t.C:
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": id, "status": "stopping"})
}

// steer is POST /v1/runs/{id}/steer (_handle_steer_run); the legacy API
// server has no such route.
func (s *Server) steer(w http.ResponseWriter, r *http.Request) {
	rn, body, bodyOK := s.openRun(w, r, true)
	if rn == nil {
		return
	}
	s.mu.Lock()
	accepting := rn.status == "running" && rn.controls && !rn.detached && !isClosed(rn.done)
	s.mu.Unlock()
	if !accepting { // the status gate: waiting_for_approval, stopping, ended…
		writeError(w, http.StatusConflict, "Run is not currently accepting steer input: "+rn.id, "run_not_accepting_steer")
		return
	}
	if !bodyOK {
		writeError(w, http.StatusBadRequest, "Invalid JSON", "")
		return
	}
	var text string
	for _, k := range []string{"input", "message", "text"} {
		if t := contentText(body[k]); t != "" {
			text = t
			break
		}
	}
	text = strings.TrimSpace(text)
	if text == "" {
		writeError(w, http.StatusBadRequest, "Missing non-empty steer text; expected 'input', 'message', or 'text'.", "invalid_steer_input")
		return
	}
	s.mu.Lock()
	rn.steers = append(rn.steers, text)
	rn.accepted = append(rn.accepted, text)
	s.setStatus(rn, "running", "run.steered")
	s.pushEvent(rn, map[string]any{"event": "run.steered", "accepted": true}, 0)
	s.mu.Unlock()
	select {
	case rn.steered <- struct{}{}:
	default:
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "hermes.run.steer", "run_id": rn.id, "accepted": true})
}

// contentText flattens a string or a list of text parts
// (_normalize_chat_content).
func contentText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, p := range x {
			switch q := p.(type) {
			case string:
				parts = append(parts, q)
			case map[string]any:
				if t, _ := q["text"].(string); t != "" {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// sweeper runs Sweep every SweepEvery, as _sweep_orphaned_runs does.
func (s *Server) sweeper() {
	defer s.playing.Done()
	t := time.NewTicker(s.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.sweep(time.Now())
		case <-s.closing:
			return
		}
	}
}

// Sweep runs one pass of Hermes's sweeper now, with streams taken as older
// than the time-to-live: the default generation drops the streams nobody
// subscribed to (the run's controls live on until it ends); the legacy one
// drops every run's stream entry, agent, task and approval session, even
// while a client reads the stream, so /stop answers 404, an approval 409,
// a pending approval is woken with no answer (the command is blocked) and
// tool events stop arriving, while the run goes on.
func (s *Server) Sweep() { s.sweep(time.Now().Add(s.cfg.StreamTTL + time.Second)) }

func (s *Server) sweep(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rn := range s.order {
		if rn.stream == "gone" || rn.swept || at.Sub(rn.streamCreated) <= s.cfg.StreamTTL {
			continue
		}
		if !s.cfg.Legacy {
			if rn.stream == "fresh" {
				rn.stream, rn.queue = "gone", nil
			}
			continue
		}
		rn.swept, rn.controls = true, false
		if rn.stream == "fresh" {
			rn.stream, rn.queue = "gone", nil
		}
		// unregister_gateway_notify wakes every waiting approval with no
		// choice: the command does not run.
		for _, a := range rn.pending {
			rn.decide(a, "swept")
			close(a.answer)
		}
		rn.pending = nil
	}
	s.changedLocked()
}

// approvalEvent builds approval.request as the notify callback does: the
// entry's data (request_id and approval_id in the default generation, with
// expires_at on Hermes's monotonic clock) and the choices a client may
// send back.
func (s *Server) approvalEvent(fields map[string]any, timeout time.Duration) (map[string]any, string) {
	ev := map[string]any{"event": "approval.request", "choices": []string{"once", "session", "always", "deny"}}
	for k, v := range fields {
		ev[k] = v
	}
	if s.cfg.Legacy {
		delete(ev, "request_id")
		return ev, ""
	}
	id, _ := ev["request_id"].(string)
	if id == "" {
		id = newHex()
	}
	ev["request_id"], ev["approval_id"] = id, id
	ev["expires_at"] = time.Since(s.start).Seconds() + timeout.Seconds()
	return ev, id
}
