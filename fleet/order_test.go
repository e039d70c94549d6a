package fleet

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// orderRig is a sequencer over a real SQLite store, with a clock the test
// moves: what another replica commits is appended to the store here and
// announced with note.
type orderRig struct {
	t   *testing.T
	st  *store.Store
	seq *sequencer
	got []*core.Event
	now time.Time
}

func newOrderRig(t *testing.T) *orderRig {
	st, err := store.Open(filepath.Join(t.TempDir(), "irisgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &orderRig{t: t, st: st, now: time.Unix(1e6, 0)}
	r.seq = &sequencer{st: st, met: newMetrics(nil, nil), hold: 250 * time.Millisecond, now: func() time.Time { return r.now }}
	r.seq.deliver = func(ev *core.Event) { r.got = append(r.got, ev) }
	return r
}

// commit appends a durable frame as a replica's commit does and returns it
// with its cursor.
func (r *orderRig) commit(text string) *core.Event {
	ev := &core.Event{Type: core.EvNotification, Notification: &core.Notification{Title: text}, TS: 1}
	err := r.st.Write(context.Background(), func(tx store.Tx) error {
		var err error
		ev.Cursor, _, err = tx.AppendEvent(ev)
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return ev
}

func (r *orderRig) local(ev *core.Event) {
	r.seq.mu.Lock()
	r.seq.localLocked(ev)
	r.seq.mu.Unlock()
}

func (r *orderRig) step() time.Duration { return r.seq.step(context.Background()) }

// cursors are the durable frames delivered, in order.
func (r *orderRig) cursors() []int64 {
	var cs []int64
	for _, ev := range r.got {
		if ev.Cursor != 0 {
			cs = append(cs, ev.Cursor)
		}
	}
	return cs
}

func (r *orderRig) want(cs ...int64) {
	r.t.Helper()
	if got := r.cursors(); !slices.Equal(got, cs) {
		r.t.Fatalf("delivered %v, want %v", got, cs)
	}
}

// A remote frame announced right after the last one delivered is read from
// the store at once; one past a gap waits for the gap's own frame, which
// here is local and keeps the request it answers.
func TestSequencerHoldsAGapForTheLocalFrame(t *testing.T) {
	r := newOrderRig(t)
	c1 := r.commit("remote 1")
	r.seq.note(c1.Cursor)
	r.step()
	r.want(1)
	mine := r.commit("local 2")
	mine.ReplyTo = &core.ReplyAddr{ConnID: 7, ReqID: 9}
	c3 := r.commit("remote 3")
	r.seq.note(c3.Cursor)
	if w := r.step(); w != 250*time.Millisecond {
		t.Fatalf("held for %v, want the hold", w)
	}
	r.want(1)
	r.local(mine)
	r.step()
	r.want(1, 2, 3)
	if r.got[1] != mine || r.got[1].ReplyTo == nil {
		t.Fatal("the local frame was not delivered as published, with its request")
	}
	if n := testutil.ToFloat64(r.seq.met.lateLocal); n != 0 {
		t.Fatalf("late local frames: %v", n)
	}
}

// A gap nobody fills (its cursor message lost) is read from the store once
// the hold has passed.
func TestSequencerReadsALostCursorAfterTheHold(t *testing.T) {
	r := newOrderRig(t)
	r.commit("lost 1")
	c2 := r.commit("remote 2")
	r.seq.note(c2.Cursor)
	r.step()
	r.want()
	r.now = r.now.Add(249 * time.Millisecond)
	r.step()
	r.want()
	r.now = r.now.Add(time.Millisecond)
	r.step()
	r.want(1, 2)
	if n := testutil.ToFloat64(r.seq.met.gaps); n != 1 {
		t.Fatalf("gaps filled: %v", n)
	}
}

// A local frame after remote ones not announced yet: they are committed
// (its cursor is higher), so they are read first.
func TestSequencerReadsBeforeALocalFrame(t *testing.T) {
	r := newOrderRig(t)
	r.commit("remote 1")
	r.commit("remote 2")
	mine := r.commit("local 3")
	r.local(mine)
	r.want(1, 2, 3)
	// Their cursor messages come late: nothing twice.
	r.seq.note(1)
	r.seq.note(2)
	r.step()
	r.want(1, 2, 3)
}

// A cursor beyond the store's head (a hostile peer, or another fleet's on
// the same subject) is not believed: the frames committed later still come.
func TestSequencerIgnoresCursorsBeyondTheHead(t *testing.T) {
	r := newOrderRig(t)
	r.commit("one")
	r.seq.note(1 << 40)
	r.now = r.now.Add(time.Second)
	r.step()
	r.want(1)
	c2 := r.commit("two")
	r.seq.note(c2.Cursor)
	r.step()
	r.want(1, 2)
	if n := testutil.ToFloat64(r.seq.met.dropped.WithLabelValues("beyond_head")); n != 1 {
		t.Fatalf("beyond_head: %v", n)
	}
}

// A transient frame goes after the durable frame its origin published
// before it; one whose frame never comes is dropped in the end.
func TestSequencerTransientAfterItsCursor(t *testing.T) {
	r := newOrderRig(t)
	r.commit("remote 1")
	upd := &core.Event{Type: core.EvMessageUpdate, StreamID: "s", Text: "hi"}
	r.seq.transient(1, upd, 10)
	r.want()
	if len(r.got) != 0 {
		t.Fatal("the transient frame went before its cursor")
	}
	r.seq.note(1)
	r.step()
	if len(r.got) != 2 || r.got[0].Cursor != 1 || r.got[1] != upd {
		t.Fatalf("got %+v", r.got)
	}
	r.seq.transient(1<<40, &core.Event{Type: core.EvTyping}, 10)
	for i := 0; i < 10 && len(r.seq.held) > 0; i++ {
		r.now = r.now.Add(time.Second)
		r.step()
	}
	if len(r.seq.held) != 0 || len(r.got) != 2 {
		t.Fatalf("held %d, delivered %d", len(r.seq.held), len(r.got))
	}
}

// Frames gone before they are read (pruned, a message deleted) leave no
// hole to wait on: everything below a committed cursor is visible, so what
// the store lacks is gone.
func TestSequencerSkipsFramesGone(t *testing.T) {
	r := newOrderRig(t)
	for i := 0; i < 3; i++ {
		r.commit("x")
	}
	if _, err := r.st.PruneOutbox(context.Background(), 1, 0); err != nil {
		t.Fatal(err)
	}
	r.seq.note(3)
	r.now = r.now.Add(time.Second)
	r.step()
	r.want(3)
}

// The memory held for peers is bounded whatever they send.
func TestSequencerBounds(t *testing.T) {
	r := newOrderRig(t)
	for c := int64(2); c < 3*maxNoted; c += 2 {
		r.seq.note(c)
	}
	if len(r.seq.noted) > maxNoted {
		t.Fatalf("%d cursors noted", len(r.seq.noted))
	}
	for i := 0; i < 3*maxHeld; i++ {
		r.seq.transient(1<<40, &core.Event{Type: core.EvTyping}, 1<<10)
	}
	if len(r.seq.held) > maxHeld || r.seq.heldSize > maxHeldBytes {
		t.Fatalf("%d held, %d bytes", len(r.seq.held), r.seq.heldSize)
	}
}

// A resync (a reconnect, the periodic head read) reads up to the store's
// head, but only after the hold: this replica's own frame, committed and
// not yet published, may be the head.
func TestSequencerResyncWaitsForLocalFrames(t *testing.T) {
	r := newOrderRig(t)
	mine := r.commit("local 1")
	mine.ReplyTo = &core.ReplyAddr{ConnID: 1, ReqID: 2}
	r.seq.resync = true
	r.step()
	r.want()
	r.local(mine)
	r.want(1)
	if r.got[0].ReplyTo == nil {
		t.Fatal("the local frame lost its request")
	}
	r.commit("remote 2, never announced")
	r.seq.resync = true
	r.step()
	r.want(1)
	r.now = r.now.Add(250 * time.Millisecond)
	r.step()
	r.want(1, 2)
}

// A gap filled by a local frame gives the next gap a hold of its own.
func TestSequencerEachGapItsHold(t *testing.T) {
	r := newOrderRig(t)
	r.commit("remote 1")
	mine := r.commit("local 2")
	r.commit("remote 3")
	r.seq.note(1)
	r.seq.note(3)
	r.step()
	r.want(1)
	r.now = r.now.Add(200 * time.Millisecond)
	r.local(mine)
	r.want(1, 2)
	r.commit("local 4, not published yet")
	r.commit("remote 5")
	r.seq.note(5) // before the next step: 3 and 5 noted, 4 missing
	r.now = r.now.Add(100 * time.Millisecond)
	if w := r.step(); w != 250*time.Millisecond {
		t.Fatalf("the new gap is held %v, want a whole hold", w)
	}
	r.want(1, 2, 3)
}
