package turn_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
)

func bounds(b turn.Bounds) func(*turn.Config) {
	return func(c *turn.Config) { c.Bounds = b }
}

// rateLimited checks that err is the refusal of the bound that names want.
func rateLimited(t *testing.T, err error, want string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.CodeRateLimited || !strings.Contains(ce.Message, want) {
		t.Fatalf("got %v, want rate_limited naming %q", err, want)
	}
}

// Turns are bounded across lanes, per token and in all, from the moment a
// place is reserved; a place given back frees its slot.
func TestSlotsBoundTurnsAcrossLanes(t *testing.T) {
	rg := newRig(t, &agent.Echo{}, bounds(turn.Bounds{PerToken: 2, InAll: 3}))
	a, b, c := core.Lane{ChatID: "a"}, core.Lane{ChatID: "b"}, core.Lane{ChatID: "c"}
	for _, l := range []core.Lane{a, b} {
		if _, err := rg.r.Reserve(l, "tok1"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := rg.r.Reserve(c, "tok1")
	rateLimited(t, err, "token")
	held, err := rg.r.Reserve(c, "tok2")
	if err != nil {
		t.Fatalf("another token, within the bound in all: %v", err)
	}
	_, err = rg.r.Reserve(c, "tok3")
	rateLimited(t, err, "messages already wait")
	_, err = rg.r.TakeSlot("tok3")
	rateLimited(t, err, "messages already wait")
	rg.r.Release(c, held)
	if _, err := rg.r.TakeSlot("tok3"); err != nil {
		t.Fatalf("after a place was given back: %v", err)
	}
}

// A turn holds its slot until it has run: the next turn of the lane
// starts only after the slot is free again.
func TestTurnHoldsItsSlotUntilItHasRun(t *testing.T) {
	proceed := make(chan struct{})
	rg := newRig(t, blockOn(proceed), bounds(turn.Bounds{InAll: 2}))
	d := rg.join("phone")
	rg.send("one", nil)
	rg.send("two", nil)
	d.next(is(core.EvAgentBusy))
	_, err := rg.r.Reserve(lk, "")
	rateLimited(t, err, "messages already wait")
	give(t, proceed)
	d.next(is(core.EvAgentBusy)) // "two" runs: "one" has run
	slot, err := rg.r.Reserve(lk, "")
	if err != nil {
		t.Fatalf("with the first turn answered: %v", err)
	}
	rg.r.Release(lk, slot)
	give(t, proceed)
}

// A steer the turn takes holds its slot until the turn has run, and then
// gives it back with the turn's own.
func TestTakenSteerHoldsItsSlotUntilTheTurnHasRun(t *testing.T) {
	took, proceed := make(chan struct{}), make(chan struct{})
	ag := &script{fn: func(ctx context.Context, tn agent.Turn, emit func(agent.Event)) error {
		if tn.Input != "start" {
			<-ctx.Done() // holds its own slot while the test counts
			return ctx.Err()
		}
		s := <-tn.Steer
		tn.Record(agent.Msg{Role: "user", Content: s.Text, MessageID: s.MessageID})
		close(took)
		<-proceed
		return nil
	}}
	rg := newRig(t, ag, bounds(turn.Bounds{InAll: 3}))
	d := rg.join("phone")
	rg.send("start", d)
	d.next(is(core.EvAgentBusy))
	if steered, err := rg.r.Steer(context.Background(), hub.Caller{Conn: d.conn}, lk, "go left"); !steered || err != nil {
		t.Fatalf("Steer: %v, %v", steered, err)
	}
	<-took
	rg.send("third", d)
	_, err := rg.r.Reserve(lk, "")
	rateLimited(t, err, "messages already wait")
	close(proceed)
	d.next(is(core.EvAgentIdle))
	d.next(is(core.EvAgentBusy)) // "third" runs: "start" and its steer have run
	for i := range 2 {
		if _, err := rg.r.Reserve(lk, ""); err != nil {
			t.Fatalf("place %d with the steered turn answered: %v", i, err)
		}
	}
}

// The turns waiting in a lane whose channel is deleted give their slots
// back with them (they were lost, and the bound in all with them, until
// a restart).
func TestDroppedLanesFreeTheirSlots(t *testing.T) {
	proceed := make(chan struct{})
	// The running turn ignores its stop until it is let go: only the
	// waiting turn's slot can be what frees the bound.
	rg := newRig(t, &script{fn: func(ctx context.Context, tn agent.Turn, emit func(agent.Event)) error {
		<-proceed
		return nil
	}}, bounds(turn.Bounds{InAll: 2}))
	t.Cleanup(func() { close(proceed) }) // before the rig's: the turn ends, then the runner
	d := rg.join("phone")
	rg.send("running", nil)
	rg.send("waiting", nil)
	d.next(is(core.EvAgentBusy))
	_, err := rg.r.Reserve(lk, "")
	rateLimited(t, err, "messages already wait")
	rg.r.DropLanes(func(l core.Lane) bool { return l == lk })
	slot, err := rg.r.Reserve(lk, "")
	if err != nil {
		t.Fatalf("after the lane was dropped: %v", err)
	}
	rg.r.Release(lk, slot)
}
