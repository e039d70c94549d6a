package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// The history cache (histcache.go) must never answer what the database
// would not: each test reads pages through History (cached) and compares
// them with historyQuery (the database) after every kind of write.

var (
	hcLane   = core.Lane{ChatID: "chan_a"}
	hcThread = core.Lane{ChatID: "chan_a", ThreadID: "t_1"}
	hcOther  = core.Lane{ChatID: "chan_b"}
)

// hcCheck reads every lane at several limits twice (the first may fill
// the cache, the second is answered by it) and compares with the database.
func hcCheck(t *testing.T, s *Store, step string) {
	t.Helper()
	ctx := context.Background()
	for _, lane := range []core.Lane{hcLane, hcThread, hcOther} {
		for _, limit := range []int{1, 2, 3, 5, 50} {
			want, wantMore, err := s.historyQuery(ctx, lane, "", limit)
			if err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				got, more, err := s.History(ctx, lane, "", limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 0 && len(want) == 0 {
					got, want = nil, nil
				}
				if !reflect.DeepEqual(got, want) || more != wantMore {
					t.Fatalf("after %s, lane %v, limit %d, read %d: history %v (more %v); the database has %v (more %v)",
						step, lane, limit, round+1, ids(got), more, ids(want), wantMore)
				}
			}
		}
	}
}

func ids(ms []core.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%s:%q", m.ID, m.Text)
	}
	return out
}

func hcWrite(t *testing.T, s *Store, fn func(Tx) error) {
	t.Helper()
	if err := s.Write(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func hcMsg(lane core.Lane, id, text string) core.Message {
	return core.Message{ID: id, Lane: lane, Role: core.RoleUser, Text: text, TS: 1,
		Media:   []core.Media{{ID: "m_" + id, Kind: "image", Mime: "image/png", Size: 3, MessageID: id}},
		Runtime: &core.Runtime{Model: "x", ContextPct: new(int)}}
}

func TestHistoryCacheFollowsEveryWrite(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	hcWrite(t, s, func(tx Tx) error {
		for _, c := range []core.Channel{{ChatID: "chan_a", Name: "A", Kind: core.KindChannel},
			{ChatID: "t_1", Name: "T", Kind: core.KindThread, ParentChatID: "chan_a"},
			{ChatID: "chan_b", Name: "B", Kind: core.KindChannel}} {
			if err := tx.PutChannel(c); err != nil {
				return err
			}
		}
		return nil
	})
	hcCheck(t, s, "nothing")
	n := 0
	insert := func(lane core.Lane, streaming bool) string {
		n++
		id := fmt.Sprintf("msg_%02d", n)
		hcWrite(t, s, func(tx Tx) error { return tx.InsertMessage(hcMsg(lane, id, "text "+id), streaming) })
		return id
	}
	for range 4 {
		insert(hcLane, false)
		insert(hcThread, false)
		insert(hcOther, false)
		hcCheck(t, s, fmt.Sprintf("insert %d", n))
	}
	reply := insert(hcLane, true)
	hcCheck(t, s, "a streaming insert")
	hcWrite(t, s, func(tx Tx) error { return tx.SaveProgress(reply, "so far", "thinking") })
	hcCheck(t, s, "SaveProgress")
	final := hcMsg(hcLane, reply, "final text")
	final.Stopped = true
	hcWrite(t, s, func(tx Tx) error { return tx.FinishMessage(final) })
	hcCheck(t, s, "FinishMessage")
	final.Text = "edited"
	final.Lane = core.Lane{} // FinishMessage goes by id: the lane it names does not matter
	hcWrite(t, s, func(tx Tx) error { return tx.FinishMessage(final) })
	hcCheck(t, s, "FinishMessage of a final message, by id alone")

	// A savepoint rolled back inside a committed transaction, and a
	// transaction rolled back whole: nothing changes, and the cache says so.
	hcWrite(t, s, func(tx Tx) error {
		tx.Savepoint(func(tx Tx) error {
			tx.InsertMessage(hcMsg(hcLane, "msg_undone", "undone"), false)
			return errors.New("undo it")
		})
		return tx.InsertMessage(hcMsg(hcOther, "msg_kept", "kept"), false)
	})
	hcCheck(t, s, "a savepoint rolled back")
	err := s.Write(ctx, func(tx Tx) error {
		tx.InsertMessage(hcMsg(hcLane, "msg_rolled", "rolled back"), false)
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("the failing write succeeded")
	}
	hcCheck(t, s, "a transaction rolled back")

	// Deletes: one lane's messages (an id of another lane is not deleted
	// through it), a thread, a channel with its threads.
	hcWrite(t, s, func(tx Tx) error { return tx.DeleteMessages(hcLane, []string{reply, "msg_kept", "msg_01"}) })
	hcCheck(t, s, "DeleteMessages")
	hcWrite(t, s, func(tx Tx) error { _, err := tx.DeleteChannel("t_1"); return err })
	hcCheck(t, s, "deleting the thread")
	insert(hcThread, false)
	hcCheck(t, s, "an insert into the deleted thread's lane")
	hcWrite(t, s, func(tx Tx) error { _, err := tx.DeleteChannel("chan_a"); return err })
	hcCheck(t, s, "deleting the channel")

	i := 0
	if _, err := s.ImportMessages(ctx, func() (core.Message, bool) {
		i++
		return core.Message{ID: fmt.Sprintf("imp_%d", i), Lane: hcOther, Role: core.RoleUser, Text: "imported", TS: 2}, i <= 3
	}); err != nil {
		t.Fatal(err)
	}
	hcCheck(t, s, "ImportMessages")
}

// A page read from a snapshot taken before a commit is not kept once the
// commit's invalidation is done: the reader began before the write ended.
func TestHistoryCacheKeepsNoPageReadBeforeACommit(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	hcWrite(t, s, func(tx Tx) error { return tx.InsertMessage(hcMsg(hcLane, "msg_1", "one"), false) })
	gen := s.hist.begin()
	old, more, err := s.historyQuery(ctx, hcLane, "", 10) // the old snapshot
	if err != nil {
		t.Fatal(err)
	}
	hcWrite(t, s, func(tx Tx) error { return tx.InsertMessage(hcMsg(hcLane, "msg_2", "two"), false) })
	s.hist.put(gen, hcLane, old, more) // too late: must be refused
	got, _, err := s.History(ctx, hcLane, "", 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("history after the commit: %v, %v; want msg_1 and msg_2", ids(got), err)
	}
	// A write that touches no messages leaves pages and readers be.
	gen = s.hist.begin()
	hcWrite(t, s, func(tx Tx) error { return tx.MarkRead(hcLane, "msg_2", "dev", 1) })
	if s.hist.begin() != gen {
		t.Fatal("a read receipt invalidated history")
	}
}

// What History returns is the caller's: changing it changes no later
// answer.
func TestHistoryCacheAnswersCopies(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	hcWrite(t, s, func(tx Tx) error { return tx.InsertMessage(hcMsg(hcLane, "msg_1", "one"), false) })
	for range 2 { // filled by the first, answered from memory by the second
		ms, _, err := s.History(ctx, hcLane, "", 5)
		if err != nil || len(ms) != 1 {
			t.Fatalf("%v, %v", ids(ms), err)
		}
		ms[0].Text, ms[0].Media[0].ID, *ms[0].Runtime.ContextPct = "changed", "changed", 99
		ms[0].Runtime.Model = "changed"
	}
	ms, _, err := s.History(ctx, hcLane, "", 5)
	if err != nil || ms[0].Text != "one" || ms[0].Media[0].ID != "m_msg_1" || *ms[0].Runtime.ContextPct != 0 || ms[0].Runtime.Model != "x" {
		t.Fatalf("a caller's change reached the cache: %+v, %v", ms, err)
	}
}

// The cache stays within its bounds whatever is read.
func TestHistoryCacheBounded(t *testing.T) {
	c := newHistCache()
	big := make([]byte, histMaxPageBytes/8)
	for i := range 3 * histMaxPages {
		lane := core.Lane{ChatID: fmt.Sprintf("chan_%d", i)}
		ms := []core.Message{{ID: fmt.Sprintf("m%d", i), Lane: lane, Text: string(big)}}
		c.put(c.begin(), lane, ms, false)
		if len(c.pages) > histMaxPages || c.bytes > histMaxBytes || len(c.ids) != len(c.pages) {
			t.Fatalf("after %d pages: %d pages, %d bytes, %d ids", i+1, len(c.pages), c.bytes, len(c.ids))
		}
	}
	huge := []core.Message{{ID: "huge", Text: string(make([]byte, histMaxPageBytes))}}
	c.put(c.begin(), hcLane, huge, false)
	if _, _, ok := c.get(hcLane, 1); ok {
		t.Fatal("a page above histMaxPageBytes was kept")
	}
}

// A page shorter than asked answers only when the lane has no more.
func TestHistoryCachePageLimits(t *testing.T) {
	c := newHistCache()
	ms := []core.Message{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	c.put(c.begin(), hcLane, ms, true)
	for _, tc := range []struct {
		limit    int
		ok, more bool
		first    string
	}{{1, true, true, "c"}, {3, true, true, "a"}, {4, false, false, ""}} {
		got, more, ok := c.get(hcLane, tc.limit)
		if ok != tc.ok || more != tc.more || (ok && (len(got) != tc.limit || got[0].ID != tc.first)) {
			t.Errorf("limit %d: %v, more %v, ok %v", tc.limit, ids(got), more, ok)
		}
	}
	c.put(c.begin(), hcLane, ms, false)
	if got, more, ok := c.get(hcLane, 10); !ok || more || len(got) != 3 {
		t.Errorf("the whole lane, asked for more than it has: %v, more %v, ok %v", ids(got), more, ok)
	}
}

// Readers filling the cache meanwhile, every write is seen by the next
// read once Write has returned: what publication after commit relies on.
func TestHistoryCacheReadsEachWriteWhileOthersRead(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, _, err := s.History(ctx, hcLane, "", 3); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		for range 4 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}()
	for i := range 150 {
		id := fmt.Sprintf("msg_%03d", i)
		hcWrite(t, s, func(tx Tx) error { return tx.InsertMessage(hcMsg(hcLane, id, "new"), true) })
		if ms, _, err := s.History(ctx, hcLane, "", 3); err != nil || len(ms) == 0 || ms[len(ms)-1].ID != id {
			t.Fatalf("after inserting %s: %v, %v", id, ids(ms), err)
		}
		hcWrite(t, s, func(tx Tx) error { return tx.SaveProgress(id, "progress", "") })
		if ms, _, err := s.History(ctx, hcLane, "", 3); err != nil || ms[len(ms)-1].Text != "progress" {
			t.Fatalf("after SaveProgress of %s: %v, %v", id, ids(ms), err)
		}
		if i%3 == 0 {
			hcWrite(t, s, func(tx Tx) error { return tx.DeleteMessages(hcLane, []string{id}) })
			if ms, _, err := s.History(ctx, hcLane, "", 3); err != nil || (len(ms) > 0 && ms[len(ms)-1].ID == id) {
				t.Fatalf("after deleting %s: %v, %v", id, ids(ms), err)
			}
		}
	}
}

// BenchmarkHistory is a page of ten of a lane's twelve messages, read from
// the database (historyQuery, what History did before the cache) and
// through History, answered from memory after the first read.
//
//	go test -run x -bench 'History$' -count 6 ./store
func BenchmarkHistory(b *testing.B) {
	s, err := Open(b.TempDir() + "/b.db")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Write(ctx, func(tx Tx) error {
		for i := range 12 {
			m := core.Message{ID: fmt.Sprintf("msg_%02d", i), Lane: hcLane, Role: core.RoleUser, Text: fmt.Sprintf("pub %d %0120d", i, 0), TS: int64(i)}
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for name, read := range map[string]func() ([]core.Message, bool, error){
		"query":  func() ([]core.Message, bool, error) { return s.historyQuery(ctx, hcLane, "", 10) },
		"cached": func() ([]core.Message, bool, error) { return s.History(ctx, hcLane, "", 10) },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ms, _, err := read(); err != nil || len(ms) != 10 {
					b.Fatalf("%d messages, %v", len(ms), err)
				}
			}
		})
	}
}
