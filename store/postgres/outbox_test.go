package postgres

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

var errBoom = errors.New("a write that fails")

func cursors(t *testing.T, s *Store) []int64 {
	t.Helper()
	head, err := s.OutboxHead(bg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.OutboxCursors(bg, 0, head, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestOutboxCursorNeverReused(t *testing.T) {
	s := open(t)
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

// A write that fails takes no cursor with it: neither a transaction rolled
// back nor a savepoint undone inside one that commits, whether the
// savepoint took the head's lock or found it taken.
func TestOutboxCursorsGapFreeAcrossFailedWrites(t *testing.T) {
	s := open(t)
	c1 := appendEvent(t, s, idle(1))
	if err := s.Write(bg, func(tx store.Tx) error {
		if _, _, err := tx.AppendEvent(idle(2)); err != nil {
			return err
		}
		return errBoom
	}); !errors.Is(err, errBoom) {
		t.Fatalf("a failing write returned %v", err)
	}
	var got []int64
	write(t, s, func(tx store.Tx) error {
		// The first frame of the transaction is in a savepoint undone.
		if err := tx.Savepoint(func(tx store.Tx) error {
			if _, _, err := tx.AppendEvent(idle(3)); err != nil {
				return err
			}
			return errBoom
		}); !errors.Is(err, errBoom) {
			return fmt.Errorf("savepoint: %v", err)
		}
		for i := range 3 {
			c, _, err := tx.AppendEvent(idle(4))
			if err != nil {
				return err
			}
			got = append(got, c)
			// Frames counted in memory, undone by a savepoint.
			if err := tx.Savepoint(func(tx store.Tx) error {
				for range i + 1 {
					if _, _, err := tx.AppendEvent(idle(5)); err != nil {
						return err
					}
				}
				return errBoom
			}); !errors.Is(err, errBoom) {
				return fmt.Errorf("savepoint: %v", err)
			}
		}
		// A statement that fails inside a savepoint leaves the
		// transaction usable.
		if err := tx.Savepoint(func(tx store.Tx) error {
			return tx.InsertMessage(core.Message{ID: "dup", Lane: core.Lane{ChatID: "x"}}, false)
		}); err != nil {
			return err
		}
		if err := tx.Savepoint(func(tx store.Tx) error {
			return tx.InsertMessage(core.Message{ID: "dup", Lane: core.Lane{ChatID: "x"}}, false)
		}); err == nil {
			return errors.New("a duplicate id was inserted")
		}
		c, _, err := tx.AppendEvent(idle(6))
		got = append(got, c)
		return err
	})
	c3 := appendEvent(t, s, idle(7))
	want := []int64{c1, c1 + 1, c1 + 2, c1 + 3, c1 + 4, c1 + 5}
	if all := append([]int64{c1}, append(got, c3)...); !slices.Equal(all, want) {
		t.Fatalf("cursors %v, want %v: a failed write left a gap", all, want)
	}
	if got := cursors(t, s); !slices.Equal(got, want) {
		t.Fatalf("outbox holds %v, want %v", got, want)
	}
	if head, _ := s.OutboxHead(bg); head != c3 {
		t.Fatalf("head %d, want %d", head, c3)
	}
}

// Several stores on one database are replicas: they write at once, and a
// reader that follows the outbox (as a device's sync does: what follows
// the last cursor it saw) never finds a cursor later filled in below one
// it has seen. The same reader over a sequence, the obvious alternative,
// does find such holes: the check has teeth.
func TestOutboxCursorsInCommitOrderAcrossReplicas(t *testing.T) {
	s := open(t)
	dsn := s.pool.Config().ConnString()
	const replicas, each = 3, 60
	var stores []*Store
	for range replicas {
		r, err := Open(bg, dsn, WithLog(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		stores = append(stores, r)
	}
	// follow reads what follows the last cursor seen until the writers
	// are done and nothing more comes, counting cursors that were visible
	// before a lower one (a device would have skipped that one for good).
	follow := func(next func(after int64) ([]int64, error), stop <-chan struct{}) (read, holes int, err error) {
		var seen int64
		for {
			stopped := false
			select {
			case <-stop:
				stopped = true
			default:
			}
			cs, err := next(seen)
			if err != nil {
				return read, holes, err
			}
			for _, c := range cs {
				if c != seen+1 {
					holes++
				}
				seen = c
				read++
			}
			if stopped && len(cs) == 0 {
				return read, holes, nil
			}
		}
	}
	run := func(appendOne func(r *Store, i int) error, next func(after int64) ([]int64, error)) int {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, replicas)
		stop := make(chan struct{})
		for ri, r := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if err := appendOne(r, ri*each+i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		done := make(chan struct{})
		var read, holes int
		var ferr error
		go func() {
			defer close(done)
			read, holes, ferr = follow(next, stop)
		}()
		wg.Wait()
		close(stop)
		<-done
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if ferr != nil {
			t.Fatal(ferr)
		}
		if holes == 0 && read != replicas*each {
			t.Fatalf("read %d frames of %d", read, replicas*each)
		}
		return holes
	}
	// Each transaction dawdles between taking its cursor and committing,
	// as a batch of many writes does.
	dawdle := func(i int) { time.Sleep(time.Duration(i%3) * time.Millisecond) }
	holes := run(func(r *Store, i int) error {
		return r.Write(bg, func(tx store.Tx) error {
			if _, _, err := tx.AppendEvent(idle(int64(i))); err != nil {
				return err
			}
			dawdle(i)
			return nil
		})
	}, func(after int64) ([]int64, error) { return s.OutboxCursors(bg, after, 1<<62, 1000) })
	if holes != 0 {
		t.Fatalf("a reader saw %d cursors before a lower one became visible", holes)
	}
	if got := cursors(t, s); len(got) != replicas*each || got[len(got)-1] != replicas*each {
		t.Fatalf("%d frames, last %v", len(got), got[len(got)-1:])
	}

	rawExec(t, s, `CREATE TABLE seq_outbox (cursor bigserial PRIMARY KEY)`)
	seqHoles := run(func(r *Store, i int) error {
		return r.Write(bg, func(tx store.Tx) error {
			if _, err := tx.(*Tx).exec(`INSERT INTO seq_outbox DEFAULT VALUES`); err != nil {
				return err
			}
			dawdle(i)
			return nil
		})
	}, func(after int64) ([]int64, error) {
		rows, err := s.pool.Query(bg, `SELECT cursor FROM seq_outbox WHERE cursor > $1 ORDER BY cursor`, after)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var c int64
			rows.Scan(&c)
			out = append(out, c)
		}
		return out, rows.Err()
	})
	if seqHoles == 0 {
		t.Log("the sequence happened to commit in order this run (the check is still the cursor row's)")
	} else {
		t.Logf("a sequence let a reader see %d cursors before a lower one (what outbox_head prevents)", seqHoles)
	}
}

func TestScanOutboxPages(t *testing.T) {
	s := open(t)
	write(t, s, func(tx store.Tx) error {
		for range 2500 {
			if _, _, err := tx.AppendEvent(idle(100)); err != nil {
				return err
			}
		}
		return nil
	})
	n, last := 0, int64(0)
	err := s.ScanOutbox(bg, 10, 2400, func(r store.OutboxRow) error {
		if r.Cursor <= last {
			t.Fatalf("out of order: %d after %d", r.Cursor, last)
		}
		last = r.Cursor
		n++
		return nil
	})
	if err != nil || n != 2390 || last != 2400 {
		t.Fatalf("scanned %d up to %d, %v", n, last, err)
	}
	if l, err := s.OutboxLen(bg); err != nil || l != 2500 {
		t.Fatalf("length %d, %v", l, err)
	}
}

func TestPruneSetsFloor(t *testing.T) {
	s := open(t)
	for range 10 {
		appendEvent(t, s, idle(100))
	}
	n, err := s.PruneOutbox(bg, 3, 0)
	if err != nil || n != 7 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if floor, _ := s.OutboxFloor(bg); floor != 7 {
		t.Fatalf("floor = %d", floor)
	}
	// Age-based: everything older than ts 200 goes.
	if n, _ = s.PruneOutbox(bg, 1000, 200); n != 3 {
		t.Fatalf("age prune removed %d", n)
	}
	if floor, _ := s.OutboxFloor(bg); floor != 10 {
		t.Fatalf("floor after the age prune = %d", floor)
	}
	if head, _ := s.OutboxHead(bg); head != 10 {
		t.Fatalf("head after prune = %d", head)
	}
	// In bounded steps.
	for range 12 {
		appendEvent(t, s, idle(300))
	}
	removed, more, err := s.PruneOutboxSome(bg, 2, 0, 4)
	if err != nil || removed != 4 || !more {
		t.Fatalf("one step: %d, %v, %v", removed, more, err)
	}
	if n, _ := s.PruneOutbox(bg, 2, 0); n != 6 {
		t.Fatalf("the rest: %d", n)
	}
	if floor, _ := s.OutboxFloor(bg); floor != 20 {
		t.Fatalf("floor = %d", floor)
	}
}

// The order, step by step: a second replica asking for a cursor while the
// first holds one waits until the first has committed, so a reader never
// sees the second's frame without the first's. With a sequence it would.
func TestOutboxLaterWriterWaitsForEarlier(t *testing.T) {
	a := open(t)
	b, err := Open(bg, a.pool.Config().ConnString(), WithLog(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rawExec(t, a, `CREATE TABLE seq_outbox (cursor bigserial PRIMARY KEY)`)
	for _, c := range []struct {
		name   string
		append func(tx store.Tx) error
		read   func() []int64
		want   []int64 // what the reader sees once b has committed
	}{
		{"outbox_head", func(tx store.Tx) error { _, _, err := tx.AppendEvent(idle(1)); return err },
			func() []int64 { return cursors(t, a) }, []int64{1, 2}},
		{"sequence", func(tx store.Tx) error { _, err := tx.(*Tx).exec(`INSERT INTO seq_outbox DEFAULT VALUES`); return err },
			func() []int64 {
				var cs []int64
				rows, _ := a.pool.Query(bg, `SELECT cursor FROM seq_outbox ORDER BY cursor`)
				for rows.Next() {
					var c int64
					rows.Scan(&c)
					cs = append(cs, c)
				}
				return cs
			}, []int64{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			took, release, aDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				aDone <- a.Write(bg, func(tx store.Tx) error {
					if err := c.append(tx); err != nil {
						return err
					}
					close(took)
					<-release
					return nil
				})
			}()
			<-took
			bDone := make(chan error, 1)
			go func() { bDone <- b.Write(bg, c.append) }()
			waitFor(t, func() (bool, error) {
				select {
				case err := <-bDone:
					bDone <- err
					return true, nil
				default:
				}
				return blockedOnLock(a)
			})
			select {
			case err := <-bDone:
				if err != nil {
					t.Fatal(err)
				}
				if got := c.read(); fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("b committed first; the reader sees %v, want %v", got, c.want)
				}
				close(release)
				if err := <-aDone; err != nil {
					t.Fatal(err)
				}
			default:
				if c.name == "sequence" {
					t.Fatal("b waited on a with a sequence")
				}
				if got := c.read(); len(got) != 0 {
					t.Fatalf("while a holds its cursor the reader sees %v", got)
				}
				close(release)
				if err := <-aDone; err != nil {
					t.Fatal(err)
				}
				if err := <-bDone; err != nil {
					t.Fatal(err)
				}
				if got := c.read(); fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("after both: %v, want %v", got, c.want)
				}
			}
		})
	}
}

// blockedOnLock reports whether a session of the database waits on a lock.
func blockedOnLock(s *Store) (bool, error) {
	var n int
	err := s.pool.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
	return n > 0, err
}

// waitFor polls cond (a state of the server, which sends no event) until
// it holds, failing t after a deadline.
func waitFor(t *testing.T, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the condition did not hold within 30s")
		}
		time.Sleep(delay)
	}
}

// A head row gone missing is said as such, not taken for a frame's string
// PostgreSQL cannot hold (which an empty answer used to mean).
func TestOutboxWithoutHeadSaysSo(t *testing.T) {
	s := open(t)
	appendEvent(t, s, idle(1))
	rawExec(t, s, `DELETE FROM outbox_head`)
	err := s.Write(bg, func(tx store.Tx) error {
		_, _, err := tx.AppendEvent(idle(2))
		return err
	})
	if !errors.Is(err, ErrNoHead) {
		t.Fatalf("append without a head row: %v; want ErrNoHead", err)
	}
	if _, err := s.OutboxHead(bg); !errors.Is(err, ErrNoHead) {
		t.Fatalf("OutboxHead without a head row: %v; want ErrNoHead", err)
	}
	if got, err := s.OutboxCursors(bg, 0, 1<<62, 10); err != nil || !slices.Equal(got, []int64{1}) {
		t.Fatalf("outbox holds %v, %v", got, err)
	}
}
