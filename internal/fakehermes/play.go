package fakehermes

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"
)

var errStopped = errors.New("stopped")

// play runs a script as the run's agent.
func (s *Server) play(rn *run, sc Script) {
	defer s.playing.Done()
	defer func() {
		s.mu.Lock()
		rn.controls = false // _retire_live_run
		for _, a := range rn.pending {
			close(a.answer)
		}
		rn.pending = nil
		close(rn.done)
		s.changedLocked()
		s.mu.Unlock()
	}()
	s.mu.Lock()
	s.setStatus(rn, "running", "")
	s.mu.Unlock()
	var text strings.Builder
	ended, err := s.steps(rn, sc, &text)
	if err == nil && !ended {
		out := text.String()
		s.mu.Lock()
		ev := map[string]any{"event": "run.completed", "output": out, "usage": map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}}
		s.completeLocked(rn, ev)
		s.mu.Unlock()
	}
	if errors.Is(err, errStopped) {
		s.mu.Lock()
		if !rn.killed { // a restart kills the run with its process: nobody writes its end
			s.setStatus(rn, "cancelled", "run.cancelled")
			s.pushEvent(rn, map[string]any{"event": "run.cancelled"}, 0)
			s.pushLocked(rn, item{end: true}, "")
		}
		s.mu.Unlock()
	}
}

// completeLocked ends the run with run.completed; steers the agent never
// read ride on it as pending_steer (_execute_run). s.mu is held.
func (s *Server) completeLocked(rn *run, ev map[string]any) {
	out, _ := ev["output"].(string)
	rn.output = &out
	rn.usage, _ = ev["usage"].(map[string]any)
	if len(rn.steers) > 0 && !s.cfg.Legacy {
		rn.pendingSteerField = strings.Join(rn.steers, "\n")
		ev = maps.Clone(ev)
		ev["pending_steer"] = rn.pendingSteerField
		rn.steers = nil
	}
	s.setStatus(rn, "completed", "run.completed")
	s.pushEvent(rn, ev, 0)
	s.pushLocked(rn, item{end: true}, "")
}

// steps plays the script; ended says a step ended the run.
func (s *Server) steps(rn *run, sc Script, text *strings.Builder) (ended bool, err error) {
	for _, st := range sc.Steps {
		select {
		case <-rn.stop:
			return false, errStopped
		case <-s.closing:
			return false, context.Canceled
		default:
		}
		switch {
		case st.Keepalive:
			s.mu.Lock()
			s.pushLocked(rn, item{keepalive: true}, "")
			s.mu.Unlock()
		case st.Disconnect:
			s.mu.Lock()
			s.pushLocked(rn, item{disconnect: true}, "")
			s.mu.Unlock()
		case st.Hold != nil:
			select {
			case <-st.Hold:
			case <-rn.stop:
				return false, errStopped
			case <-s.closing:
				return false, context.Canceled
			}
		case st.AwaitSteer:
			select {
			case <-rn.steered:
			case <-rn.stop:
				return false, errStopped
			case <-s.closing:
				return false, context.Canceled
			}
		case st.AwaitPolls > 0:
			if err := s.awaitPolls(rn, st.AwaitPolls); err != nil {
				return false, err
			}
		case st.Approval != nil:
			if err := s.askApprovals(rn, st); err != nil {
				return false, err
			}
		case len(st.Together) > 0:
			if err := s.askApprovals(rn, st.Together...); err != nil {
				return false, err
			}
		case st.Event != nil:
			if s.event(rn, st, text) {
				return true, nil
			}
		}
	}
	return false, nil
}

func (s *Server) awaitPolls(rn *run, n int) error {
	s.mu.Lock()
	target := rn.polls + n
	s.mu.Unlock()
	for {
		s.mu.Lock()
		ok, ch := rn.polls >= target, s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-rn.stop:
			return errStopped
		case <-s.closing:
			return context.Canceled
		}
	}
}

// askApprovals is the agent blocked in _await_gateway_decision, in one
// thread per approval: each asks, in order, then waits for an answer,
// Hermes's approval timeout (a deny nobody hears of: the status keeps
// saying waiting_for_approval, since only an answer or the next control
// event moves it) or a stop.
func (s *Server) askApprovals(rn *run, steps ...Step) error {
	type waiting struct {
		a       *approval
		timeout time.Duration
	}
	var ws []waiting
	s.mu.Lock()
	for _, st := range steps {
		timeout := s.cfg.ApprovalTimeout
		if st.ApprovalTimeout > 0 {
			timeout = st.ApprovalTimeout
		}
		ev, id := s.approvalEvent(st.Approval, timeout)
		a := &approval{requestID: id, data: ev, answer: make(chan string, 1)}
		if rn.swept {
			// The legacy sweeper unregistered the run's notify callback:
			// nobody can be asked, and the command does not run.
			rn.decide(a, "swept")
			continue
		}
		rn.pending = append(rn.pending, a)
		s.setStatus(rn, "waiting_for_approval", "approval.request")
		if !s.cfg.Legacy {
			rn.approvalField = maps.Clone(ev)
		}
		s.pushEvent(rn, ev, 0)
		ws = append(ws, waiting{a, timeout})
	}
	s.mu.Unlock()
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() { errs <- s.awaitApproval(rn, w.a, w.timeout) }()
	}
	var err error
	for range ws {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (s *Server) awaitApproval(rn *run, a *approval, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-a.answer:
	case <-t.C:
		s.mu.Lock()
		for i, p := range rn.pending {
			if p == a {
				rn.pending = append(rn.pending[:i], rn.pending[i+1:]...)
				rn.decide(a, "timeout")
				break
			}
		}
		s.changedLocked()
		s.mu.Unlock()
	case <-rn.stop:
		return errStopped
	case <-s.closing:
		return context.Canceled
	}
	return nil
}

// event emits one scripted event; it reports whether it ended the run.
func (s *Server) event(rn *run, st Step, text *strings.Builder) bool {
	name, _ := st.Event["event"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch name {
	case "run.completed":
		s.completeLocked(rn, st.Event)
		return true
	case "run.failed":
		msg, _ := st.Event["error"].(string)
		rn.errMsg = &msg
		s.setStatus(rn, "failed", name)
		s.pushEvent(rn, st.Event, st.Split)
		s.pushLocked(rn, item{end: true}, "")
		return true
	case "message.delta":
		d, _ := st.Event["delta"].(string)
		text.WriteString(d)
	case "tool.completed":
		// A steer reaches the agent with the next tool result.
		rn.delivered = append(rn.delivered, rn.steers...)
		rn.steers = nil
		fallthrough
	default:
		if name != "message.delta" {
			rn.lastEvent = name // _push keeps the status, moves last_event
			rn.updated = now()
		}
	}
	s.pushEvent(rn, st.Event, st.Split)
	s.changedLocked()
	return false
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

// Reasoning is a reasoning.available event. Hermes fills it with the
// assistant message's content, tags stripped, cut to 500 characters
// (_think_text[:500] in run_agent.py): mostly the reply text itself.
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

// ApprovalWithin is Approval with its own approval timeout.
func ApprovalWithin(command, description string, timeout time.Duration) Step {
	st := Approval(command, description)
	st.ApprovalTimeout = timeout
	return st
}

// Together asks approvals at once (see Step.Together).
func Together(approvals ...Step) Step { return Step{Together: approvals} }

// Keepalive writes a keepalive comment.
func Keepalive() Step { return Step{Keepalive: true} }

// Disconnect drops the stream's connection; the run goes on.
func Disconnect() Step { return Step{Disconnect: true} }

// Hold waits for ch to close.
func Hold(ch <-chan struct{}) Step { return Step{Hold: ch} }

// AwaitPolls waits for n more status polls.
func AwaitPolls(n int) Step { return Step{AwaitPolls: n} }

// AwaitSteer waits until a steer is accepted.
func AwaitSteer() Step { return Step{AwaitSteer: true} }

// Split makes an event step write its line in n pieces.
func Split(st Step, n int) Step {
	st.Split = n
	return st
}

// Reply is a script answering text in n deltas, then completing with it.
func Reply(text string, n int) Script {
	return Script{Steps: append(Deltas(text, n), Completed(text, 10, len(text)/4+1))}
}
