package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/fill"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

var outboxTests = []test{
	{"OutboxCursorsGapFreeAcrossAFailedWrite", testCursorsAcrossAFailedWrite},
	{"OutboxCursorNeverReused", testCursorNeverReused},
	{"OutboxConcurrentWritersLeaveNoHoles", testConcurrentWriters},
	{"OutboxScanIsOrderedAndBounded", testScanEvents},
	{"OutboxPruneFloor", testPruneFloor},
	{"OutboxEventsRoundTrip", testEventsRoundTrip},
	{"OutboxScanSkipsWhatDoesNotDecode", testScanSkipping},
}

// A frame whose row does not decode stops ScanEvents with an error naming
// it, and ScanEventsSkipping hands it to bad and goes on: sync replays
// what comes after it.
func testScanSkipping(t *testing.T, s Store) {
	c, ok := s.(Corrupter)
	if !ok {
		t.Skip("the harness cannot damage a row (storetest.Corrupter)")
	}
	for i := range 3 {
		appendEvent(t, s, idle(int64(i+1)))
	}
	if err := c.CorruptEvent(bg, 2); err != nil {
		t.Fatal(err)
	}
	var ce *store.CorruptError
	if err := s.ScanEvents(bg, 0, 3, func(*core.Event) error { return nil }); !errors.As(err, &ce) {
		t.Fatalf("ScanEvents over a damaged row: %v, want a *store.CorruptError", err)
	}
	var got, bad []int64
	err := s.ScanEventsSkipping(bg, 0, 3, func(ev *core.Event) error {
		got = append(got, ev.Cursor)
		return nil
	}, func(cursor int64, err *store.CorruptError) {
		if err == nil {
			t.Error("bad was handed no error")
		}
		bad = append(bad, cursor)
	})
	if err != nil || !slices.Equal(got, []int64{1, 3}) || !slices.Equal(bad, []int64{2}) {
		t.Fatalf("skipping: got %v, bad %v, err %v; want 1 and 3, bad 2", got, bad, err)
	}
}

// A write that fails takes no cursor with it: neither a transaction that
// is rolled back nor a savepoint undone inside one that commits (the group
// commit's slow path) leaves a gap a syncing device would wait on.
func testCursorsAcrossAFailedWrite(t *testing.T, s Store) {
	c1 := appendEvent(t, s, idle(1))
	err := s.Write(bg, func(tx store.Tx) error {
		if _, _, err := tx.AppendEvent(idle(2)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("a failing write returned %v, want its own error", err)
	}
	var c2, undone int64
	write(t, s, func(tx store.Tx) error {
		serr := tx.Savepoint(func(tx store.Tx) error {
			var err error
			if undone, _, err = tx.AppendEvent(idle(3)); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(serr, errBoom) {
			return fmt.Errorf("savepoint returned %v, want its own error", serr)
		}
		var err error
		c2, _, err = tx.AppendEvent(idle(4))
		return err
	})
	c3 := appendEvent(t, s, idle(5))
	if c2 != c1+1 || c3 != c2+1 {
		t.Fatalf("cursors %d, %d, %d (the undone savepoint had %d): a failed write left a gap", c1, c2, c3, undone)
	}
	if got := cursors(t, s); !slices.Equal(got, []int64{c1, c2, c3}) {
		t.Fatalf("outbox holds %v, want %v", got, []int64{c1, c2, c3})
	}
	if head, err := s.OutboxHead(bg); err != nil || head != c3 {
		t.Fatalf("head %d, %v; want %d", head, err, c3)
	}
}

// Deleting the newest frames does not hand their cursors out again: a
// device that has them would take the new frames for ones it holds.
func testCursorNeverReused(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	c1 := appendEvent(t, s, msgEvent(lane, "m1"))
	c2 := appendEvent(t, s, msgEvent(lane, "m2"))
	write(t, s, func(tx store.Tx) error { return tx.DeleteMessages(lane, []string{"m2"}) })
	c3 := appendEvent(t, s, msgEvent(lane, "m3"))
	if !(c1 < c2 && c2 < c3) {
		t.Fatalf("cursors %d %d %d: the deleted tail's cursor was reused", c1, c2, c3)
	}
	if head, err := s.OutboxHead(bg); err != nil || head != c3 {
		t.Fatalf("head = %d, %v; want %d", head, err, c3)
	}
	if got := cursors(t, s); !slices.Equal(got, []int64{c1, c3}) {
		t.Fatalf("outbox holds %v", got)
	}
}

// Writers committing at once never let a reader see a cursor before a
// lower one: whatever the head says, every cursor up to it is there. (A
// store whose cursors come from a sequence outside the transaction, as a
// plain Postgres sequence does, fails this: a later frame can commit
// before an earlier one.)
func testConcurrentWriters(t *testing.T, s Store) {
	const writers, each = 4, 40
	first := appendEvent(t, s, idle(1))
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Write(bg, func(tx store.Tx) error {
					_, _, err := tx.AppendEvent(idle(int64(i)))
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	check := func() bool {
		head, err := s.OutboxHead(bg)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := s.OutboxCursors(bg, first-1, head, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			if c != first+int64(i) {
				t.Fatalf("head %d but the outbox holds %v: a hole below the head", head, cs)
			}
		}
		if len(cs) == 0 || cs[len(cs)-1] != head {
			t.Fatalf("head %d but the newest frame listed is %v", head, cs[max(0, len(cs)-1):])
		}
		return len(cs) == writers*each+1
	}
	for {
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-done:
			if !check() {
				t.Fatalf("%d frames committed, want %d", len(cursors(t, s)), writers*each+1)
			}
			return
		default:
			check()
		}
	}
}

// ScanEvents gives the frames between its bounds in order, reading past
// any page size a store uses, and stops at the callback's error.
func testScanEvents(t *testing.T, s Store) {
	const n = 2500
	var cs []int64
	write(t, s, func(tx store.Tx) error {
		for i := range n {
			c, _, err := tx.AppendEvent(idle(int64(i)))
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		return nil
	})
	var got []int64
	if err := s.ScanEvents(bg, cs[9], cs[2399], func(ev *core.Event) error { got = append(got, ev.Cursor); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, cs[10:2400]) {
		t.Fatalf("scanned %d frames (%v … %v), want %d in order", len(got), got[:min(3, len(got))], got[max(0, len(got)-3):], 2390)
	}
	seen := 0
	err := s.ScanEvents(bg, 0, cs[n-1], func(*core.Event) error {
		if seen++; seen == 3 {
			return errBoom
		}
		return nil
	})
	if !errors.Is(err, errBoom) || seen != 3 {
		t.Fatalf("a callback's error: %v after %d frames", err, seen)
	}
	if page, err := s.OutboxCursors(bg, cs[0], cs[n-1], 5); err != nil || !slices.Equal(page, cs[1:6]) {
		t.Fatalf("cursors after %d, five of them: %v, %v", cs[0], page, err)
	}
}

// Retention keeps the newest frames or the young ones, whichever keeps
// fewer, removes the rest in bounded steps, and records the floor: a sync
// from below it is incomplete. The head never moves back.
func testPruneFloor(t *testing.T, s Store) {
	var cs []int64
	for i := range 10 {
		cs = append(cs, appendEvent(t, s, idle(100+int64(i))))
	}
	if floor, err := s.OutboxFloor(bg); err != nil || floor != 0 {
		t.Fatalf("floor of an outbox never pruned: %d, %v", floor, err)
	}
	n, more, err := s.PruneOutboxSome(bg, 3, 0, 5)
	if err != nil || n != 5 || !more {
		t.Fatalf("first step: removed %d, more %v, %v; want 5 and more", n, more, err)
	}
	if n, more, err = s.PruneOutboxSome(bg, 3, 0, 5); err != nil || n != 2 || more {
		t.Fatalf("second step: removed %d, more %v, %v; want 2 and no more", n, more, err)
	}
	if floor, _ := s.OutboxFloor(bg); floor != cs[6] {
		t.Fatalf("floor = %d, want %d", floor, cs[6])
	}
	if got := cursors(t, s); !slices.Equal(got, cs[7:]) {
		t.Fatalf("kept %v, want the newest three", got)
	}
	if n, _, _ := s.PruneOutboxSome(bg, 3, 0, 5); n != 0 {
		t.Fatalf("pruned %d more with nothing due", n)
	}
	// By age: everything before ts 109 goes, though keep would keep it.
	if n, more, err := s.PruneOutboxSome(bg, 1000, 109, 100); err != nil || n != 2 || more {
		t.Fatalf("age prune removed %d (more %v), %v; want 2", n, more, err)
	}
	if floor, _ := s.OutboxFloor(bg); floor != cs[8] {
		t.Fatalf("floor after the age prune = %d, want %d", floor, cs[8])
	}
	if head, _ := s.OutboxHead(bg); head != cs[9] {
		t.Fatalf("head after pruning = %d, want %d", head, cs[9])
	}
}

// notStored are the fields of core.Event the outbox leaves out (package
// record says why).
var notStored = []string{"Cursor", "ReplyTo", "Closed", "Message.Media.Path", "Media.Path"}

// Every field of an event comes back as the record keeps it: a store
// stores the record's bytes, it does not pick columns out of them.
func testEventsRoundTrip(t *testing.T, s Store) {
	full := new(core.Event)
	if err := fill.Fill(full, notStored...); err != nil {
		t.Fatal(err)
	}
	full.Type = core.EvMessageStop
	full.ReplyTo = &core.ReplyAddr{ConnID: 1, ReqID: 2} // a replay answers nothing
	lane := core.Lane{ChatID: "chan_rt", ThreadID: "t_rt"}
	evs := []*core.Event{full,
		{Type: core.EvMessageDeleted, Lane: lane, TS: 2, MessageIDs: []string{"m1", "m2"}},
		{Type: core.EvTyping, Lane: lane, TS: 3, On: true},
		{Type: core.EvChannelDeleted, TS: 4, ChatID: "chan_gone"},
		{Type: core.EvStatus, TS: 5, State: "online"},
	}
	var want []*core.Event
	for _, ev := range evs {
		b, err := record.EncodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		w, err := record.DecodeEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		w.Cursor = appendEvent(t, s, ev)
		want = append(want, w)
	}
	var got []*core.Event
	if err := s.ScanEvents(bg, 0, want[len(want)-1].Cursor, func(ev *core.Event) error { got = append(got, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("scanned %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("event %d (%s):\n got %+v\nwant %+v", i, want[i].Type, got[i], want[i])
		}
	}
}
