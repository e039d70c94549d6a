package commit

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Writes one goroutine enqueues without waiting are committed in one
// transaction when they are queued together, published in the order
// queued, and each committed event is handed to AfterCommit before any
// event of its transaction is published (what the gateway's directory
// relies on).
func TestEnqueuedWritesCommitTogetherInOrder(t *testing.T) {
	st := openStore(t)
	w := newWatch(st)
	var mu sync.Mutex
	var committed []int64
	var batches []int
	cfg := Config{
		AfterCommit: func(ev *core.Event) {
			mu.Lock()
			committed = append(committed, ev.Cursor)
			mu.Unlock()
		},
		Batch: func(n int) {
			mu.Lock()
			batches = append(batches, n)
			mu.Unlock()
		},
	}
	l := New(st, w, quiet, cfg)
	const n = 20
	w.check = func(ev *core.Event) {
		mu.Lock()
		defer mu.Unlock()
		if len(committed) < n {
			t.Errorf("cursor %d published when AfterCommit had seen %d of the batch's %d events", ev.Cursor, len(committed), n)
		}
	}
	var ps []*Pending
	for i := range n { // queued before the loop runs: one batch
		p, err := l.Enqueue(context.Background(), nil, &core.Event{Type: core.EvMessageDeleted, Lane: core.Lane{ChatID: "default"}, MessageIDs: []string{string(rune('a' + i))}})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	stop := run(l)
	defer stop()
	for i, p := range ps {
		if err := p.Wait(); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	seen := w.published()
	for i := 1; i < len(seen); i++ {
		if seen[i] != seen[i-1]+1 {
			t.Fatalf("published cursors out of order: %v", seen)
		}
	}
	if ps[0].w.ev.Cursor != seen[0] || ps[n-1].w.ev.Cursor != seen[n-1] {
		t.Fatalf("cursors %d..%d, published %v", ps[0].w.ev.Cursor, ps[n-1].w.ev.Cursor, seen)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 1 || batches[0] != n {
		t.Fatalf("transactions %v, want one of %d writes", batches, n)
	}
}

// A write enqueued once the Log has stopped is refused (by Enqueue, or
// by Wait when it found room in the queue nobody reads any more).
func TestEnqueueAfterStop(t *testing.T) {
	st := openStore(t)
	l := New(st, newWatch(st), quiet, Config{})
	run(l)()
	for range 20 {
		p, err := l.Enqueue(context.Background(), nil, idle("default"))
		if err == nil {
			err = p.Wait()
		}
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("err = %v, want ErrStopped", err)
		}
	}
}

// Busy says whether a write queued now would share a transaction: while
// one is queued or committing, and not once the log is idle again.
func TestBusyWhileWritesAreQueuedOrCommitting(t *testing.T) {
	st := openStore(t)
	l := New(st, newWatch(st), quiet, Config{})
	if l.Busy() {
		t.Fatal("a log with nothing queued is busy")
	}
	started, release := make(chan struct{}), make(chan struct{})
	p, err := l.Enqueue(context.Background(), func(store.Tx) error {
		close(started)
		<-release
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Busy() {
		t.Fatal("a log with a write queued is not busy")
	}
	stop := run(l)
	defer stop()
	<-started
	if !l.Busy() {
		t.Fatal("a log committing a write is not busy")
	}
	close(release)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if l.Busy() {
		t.Fatal("the log is busy once its one write is committed")
	}
}
