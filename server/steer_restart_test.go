package server_test

// Steering sent with agent.steer while a turn runs is owed like a sent
// message until the turn takes it: a restart before the turn's next model
// call answers it once, as a turn of its own (what happens without a
// restart when the turn ends without taking it); a restart after the turn
// took it does not answer it again. Real gateways on one data directory
// (a real SQLite file), restarted gracefully; the model backend talks to
// internal/fakeopenai, whose held responses keep the turn running. The
// crash (kill -9) variants are in package e2e.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// steerRow returns the owed turn row of messageID, if any.
func steerRow(t *testing.T, r *agRig, messageID string) (store.QueuedTurn, bool) {
	t.Helper()
	owed, err := r.g.App.Store.Turns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range owed {
		if q.MessageID == messageID {
			return q, true
		}
	}
	return store.QueuedTurn{}, false
}

// noTurnsOwed fails when the store still owes a turn.
func noTurnsOwed(t *testing.T, r *agRig) {
	t.Helper()
	if owed, err := r.g.App.Store.Turns(context.Background()); err != nil || len(owed) != 0 {
		t.Fatalf("turns still owed: %+v (%v)", owed, err)
	}
}

// saidTimes counts the messages of a request that contain substr.
func saidTimes(t *testing.T, req map[string]any, substr string) int {
	t.Helper()
	n := 0
	for _, m := range agMsgs(t, req) {
		if strings.Contains(fmt.Sprint(m["content"]), substr) {
			n++
		}
	}
	return n
}

// countHistory counts the lane's history messages of role whose text is text.
func countHistory(t *testing.T, d *testgw.Device, role, text string) int {
	t.Helper()
	h, err := history(t, d, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range h.Messages {
		if m.Role == role && m.Text == text {
			n++
		}
	}
	return n
}

// TestSteerUnreadAtRestartIsAnsweredOnce: a steer sent while the turn waits
// on its model call has not reached the model when the gateway restarts.
// The next start answers it once, as a turn of its own (the interrupted
// turn is not run again), and nothing is owed after that.
func TestSteerUnreadAtRestartIsAnsweredOnce(t *testing.T) {
	r := agStart(t)
	hold := make(chan struct{})
	defer close(hold)
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("Working on the long thing.", 4), Hold: hold, HoldAfter: 2})
	a := r.dial("phone")
	send(t, a, def, "do the long thing")
	a.Expect("message.update", nil) // streaming, and held in the model call
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "focus on the errors"})
	steerID := testgw.Str(t, echo, "message_id")
	barrier(t, a) // requests are handled in turn: the steer is with the turn
	if q, ok := steerRow(t, r, steerID); !ok || q.Running {
		t.Fatalf("the unread steer is not owed in the store: %+v %v", q, ok)
	}

	// The steer's own turn: held until a device is there to see it.
	answer := make(chan struct{})
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("Looking at the errors.", 3), Hold: answer})
	r.restart()
	b := r.dial("tablet")
	close(answer)
	b.Expect("message.stop", func(f client.Frame) bool { return testgw.Str(t, f, "final_text") == "Looking at the errors." })
	b.Expect("agent.idle", nil)
	reqs := r.requests(2)
	if last := agLast(t, reqs[1]); last["role"] != "user" || last["content"] != "focus on the errors" {
		t.Fatalf("after the restart the model was asked %v, want the steer as the turn's input", last)
	}
	noTurnsOwed(t, r)

	// Once: the next message is the next model call, and history holds the
	// steer and its answer once each.
	r.reply("You are welcome.")
	if s := agStop(t, agTurn(t, b, def, "thanks")); s.FinalText != "You are welcome." {
		t.Fatalf("next turn %q", s.FinalText)
	}
	reqs = r.requests(3)
	if last := agLast(t, reqs[2]); last["content"] != "thanks" {
		t.Fatalf("third model call %v", last)
	}
	if n := saidTimes(t, reqs[2], "focus on the errors"); n != 1 {
		t.Fatalf("the steer is %d times in the conversation, want once: %v", n, agMsgs(t, reqs[2]))
	}
	r.noMoreRequests(3)
	if n := countHistory(t, b, "user", "focus on the errors"); n != 1 {
		t.Fatalf("the steer is %d times in history", n)
	}
	if n := countHistory(t, b, "assistant", "Looking at the errors."); n != 1 {
		t.Fatalf("the steer was answered %d times", n)
	}
	noTurnsOwed(t, r)
}

// TestSteerConsumedBeforeRestartIsNotAnsweredAgain: the turn took the steer
// into its next model call before the gateway restarted. The steer is part
// of the conversation the model keeps seeing, but no turn answers it after
// the restart.
func TestSteerConsumedBeforeRestartIsNotAnsweredAgain(t *testing.T) {
	r := agStart(t)
	hold1, hold2 := make(chan struct{}), make(chan struct{})
	defer close(hold2)
	r.script(
		fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c1", "todo", `{"todos":[{"id":"a","content":"look"}]}`, 3), Hold: hold1},
		fakeopenai.Script{Chunks: fakeopenai.Text("Using the blue one, as you say.", 4), Hold: hold2, HoldAfter: 2},
	)
	a := r.dial("phone")
	send(t, a, def, "do the thing")
	r.requests(1) // the turn waits on its first model call
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "use the blue one"})
	steerID := testgw.Str(t, echo, "message_id")
	barrier(t, a)
	close(hold1)
	reqs := r.requests(2) // the steer is recorded before this call is made
	if last := agLast(t, reqs[1]); !strings.Contains(fmt.Sprint(last["content"]), "use the blue one") {
		t.Fatalf("the steer did not reach the second call: %v", last)
	}
	if q, ok := steerRow(t, r, steerID); ok {
		t.Fatalf("the consumed steer is still owed: %+v", q)
	}
	a.Expect("message.update", nil) // the second call streams, and is held

	r.restart()
	b := r.dial("tablet")
	r.reply("Here is the rest.")
	if s := agStop(t, agTurn(t, b, def, "and then?")); s.FinalText != "Here is the rest." {
		t.Fatalf("next turn %q", s.FinalText)
	}
	// Had the steer been owed, its turn would have run first (the start
	// queues owed turns before it serves anyone).
	reqs = r.requests(3)
	if last := agLast(t, reqs[2]); last["content"] != "and then?" {
		t.Fatalf("third model call %v", last)
	}
	if n := saidTimes(t, reqs[2], "use the blue one"); n != 1 {
		t.Fatalf("the steer is %d times in the conversation, want once: %v", n, agMsgs(t, reqs[2]))
	}
	r.noMoreRequests(3)
	if n := countHistory(t, b, "user", "use the blue one"); n != 1 {
		t.Fatalf("the steer is %d times in history", n)
	}
	noTurnsOwed(t, r)
}

// TestSteerStoppedIsNotAnsweredAfterRestart: agent.stop ends the steering
// sent for the turn too (nothing runs it), and a restart does not bring it
// back.
func TestSteerStoppedIsNotAnsweredAfterRestart(t *testing.T) {
	r := agStart(t)
	hold := make(chan struct{})
	defer close(hold)
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("never said", 2), Hold: hold})
	a := r.dial("phone")
	send(t, a, def, "do the long thing")
	r.requests(1)
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "never mind"})
	steerID := testgw.Str(t, echo, "message_id")
	if stop := a.MustDo("agent.stop", def, nil); stop.Type != "agent.idle" {
		t.Fatalf("agent.stop answered %s", stop.Raw)
	}
	if q, ok := steerRow(t, r, steerID); ok {
		t.Fatalf("the stopped steer is still owed: %+v", q)
	}
	r.restart()
	b := r.dial("tablet")
	r.reply("Fresh start.")
	if s := agStop(t, agTurn(t, b, def, "hello again")); s.FinalText != "Fresh start." {
		t.Fatalf("next turn %q", s.FinalText)
	}
	if last := agLast(t, r.requests(2)[1]); last["content"] != "hello again" {
		t.Fatalf("second model call %v: the stopped steer ran", last)
	}
	r.noMoreRequests(2)
	noTurnsOwed(t, r)
}

// TestSteerNotTakenStillRunsNextWithoutRestart: nothing crashes, the turn
// ends without having taken the steer (its model call was already made):
// the steer runs next, once, and is no longer owed afterwards.
func TestSteerNotTakenStillRunsNextWithoutRestart(t *testing.T) {
	r := agStart(t)
	hold := make(chan struct{})
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("First answer.", 2), Hold: hold})
	r.reply("Second answer.")
	a := r.dial("phone")
	send(t, a, def, "first")
	r.requests(1)
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "second"})
	steerID := testgw.Str(t, echo, "message_id")
	barrier(t, a)
	close(hold) // the reply needs no further call: the steer is not taken
	first := until(t, a, is(t, "agent.idle"))
	if s := agStop(t, first); s.FinalText != "First answer." {
		t.Fatalf("first turn %q", s.FinalText)
	}
	got := until(t, a, is(t, "agent.idle"))
	if s := agStop(t, got); s.FinalText != "Second answer." {
		t.Fatalf("the steer's turn %q", s.FinalText)
	}
	if rr := agOne(t, got, "read.receipt"); testgw.Str(t, rr, "message_id") != steerID {
		t.Fatalf("read receipt %s", rr.Raw)
	}
	if last := agLast(t, r.requests(2)[1]); last["content"] != "second" {
		t.Fatalf("second model call %v", last)
	}
	r.noMoreRequests(2)
	noTurnsOwed(t, r)
}

// stubborn answers "on <input>" and ends only when released, even once
// stopped (as a turn whose tool takes its time to die would). It never
// reads steering.
type stubborn struct{ release chan struct{} }

func (s *stubborn) Name() string { return "stubborn" }

func (s *stubborn) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	emit(agent.Event{Kind: agent.Text, Text: "on " + t.Input})
	<-s.release
	return ctx.Err()
}

// TestSteerAfterStopRunsNext: a steer sent after the turn was asked to
// stop, while it is still ending, is not dropped with the turn's own
// steering: it runs next as a turn of its own.
func TestSteerAfterStopRunsNext(t *testing.T) {
	ag := &stubborn{release: make(chan struct{})}
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent = ag })
	a := g.Dial(t, "phone")
	send(t, a, def, "first")
	a.Expect("message.update", nil)
	send(t, a, def, "/stop")
	barrier(t, a) // requests are handled in turn: the stop has been made
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "second"})
	steerID := testgw.Str(t, echo, "message_id")
	barrier(t, a)

	ag.release <- struct{}{} // the stopped turn ends
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "on first" {
		t.Fatalf("first turn: %s", stop.Raw)
	}
	a.Expect("read.receipt", is(t, "read.receipt", "message_id", steerID))
	ag.release <- struct{}{}
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "on second" {
		t.Fatalf("the steer's turn: %s", stop.Raw)
	}
	a.Expect("agent.idle", nil)
	if owed, err := g.App.Store.Turns(context.Background()); err != nil || len(owed) != 0 {
		t.Fatalf("turns still owed: %+v (%v)", owed, err)
	}
}
