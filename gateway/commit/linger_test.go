package commit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/store"
)

// batches hands on the writes of each transaction (Config.Batch).
type batches struct{ ch chan int }

func newBatches() *batches { return &batches{ch: make(chan int, 64)} }

func (b *batches) note(n int) { b.ch <- n }

func (b *batches) next(t *testing.T) int {
	t.Helper()
	select {
	case n := <-b.ch:
		return n
	case <-time.After(wait):
		t.Fatal("no transaction")
		return 0
	}
}

// order records the order writes were applied in.
type order struct {
	mu  sync.Mutex
	got []string
}

func (o *order) write(name string) func(store.Tx) error {
	return func(store.Tx) error {
		o.mu.Lock()
		o.got = append(o.got, name)
		o.mu.Unlock()
		return nil
	}
}

func (o *order) names() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.got...)
}

// Lingering writes queued while nothing else comes share one transaction,
// committed once the linger is over, not one each.
func TestLingeringWritesShareATransaction(t *testing.T) {
	st := openStore(t)
	b := newBatches()
	var o order
	l := New(st, newWatch(st), quiet, Config{Linger: time.Hour, Batch: b.note})
	stop := run(l)
	defer stop()
	for _, name := range []string{"a", "b", "c"} {
		if err := l.Linger(context.Background(), o.write(name)); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing commits while they linger (an hour here): a write that is
	// waited for takes them along, first, in the order they came.
	select {
	case n := <-b.ch:
		t.Fatalf("a transaction of %d writes while they lingered", n)
	default:
	}
	if err := l.Commit(context.Background(), o.write("waited"), nil); err != nil {
		t.Fatal(err)
	}
	if n := b.next(t); n != 4 {
		t.Fatalf("the waited write's transaction had %d writes, want the 3 lingering and itself", n)
	}
	if got := o.names(); len(got) != 4 || got[0] != "a" || got[1] != "b" || got[2] != "c" || got[3] != "waited" {
		t.Fatalf("applied in the order %v", got)
	}
}

// A lingering write alone commits once Config.Linger has passed.
func TestALingeringWriteAloneCommitsAfterTheLinger(t *testing.T) {
	st := openStore(t)
	b := newBatches()
	var o order
	const linger = 20 * time.Millisecond
	l := New(st, newWatch(st), quiet, Config{Linger: linger, Batch: b.note})
	stop := run(l)
	defer stop()
	start := time.Now()
	if err := l.Linger(context.Background(), o.write("alone")); err != nil {
		t.Fatal(err)
	}
	if n := b.next(t); n != 1 {
		t.Fatalf("a transaction of %d writes, want 1", n)
	}
	if waited := time.Since(start); waited < linger {
		t.Fatalf("committed after %v, before the linger of %v", waited, linger)
	}
	if got := o.names(); len(got) != 1 {
		t.Fatalf("applied %v", got)
	}
}

// A stop commits the writes still lingering: Run returns with them in the
// store.
func TestStopCommitsLingeringWrites(t *testing.T) {
	st := openStore(t)
	l := New(st, newWatch(st), quiet, Config{Linger: time.Hour})
	held := make(chan int, 4)
	l.lingered = func(n int) { held <- n }
	stop := run(l)
	for _, id := range []string{"one", "two"} {
		if err := l.Linger(context.Background(), putChannel(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Stop only once the committer holds both, lingering.
	for n := 0; n < 2; {
		select {
		case n = <-held:
		case <-time.After(wait):
			t.Fatal("the committer never took the writes")
		}
	}
	stop()
	for _, id := range []string{"one", "two"} {
		if _, err := st.Channel(context.Background(), id); err != nil {
			t.Fatalf("channel %s after the stop: %v", id, err)
		}
	}
}

// With Linger negative a lingering write commits at once.
func TestNoLinger(t *testing.T) {
	st := openStore(t)
	b := newBatches()
	l := New(st, newWatch(st), quiet, Config{Linger: -1, Batch: b.note})
	stop := run(l)
	defer stop()
	if err := l.Linger(context.Background(), putChannel("now")); err != nil {
		t.Fatal(err)
	}
	if n := b.next(t); n != 1 {
		t.Fatalf("a transaction of %d writes, want 1", n)
	}
}
