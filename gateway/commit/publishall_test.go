package commit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// allWatch is an AllPublisher that keeps the cursors of each PublishAll.
type allWatch struct {
	mu    sync.Mutex
	all   [][]int64
	alone int // events given to Publish
}

func (w *allWatch) Publish(*core.Event) { w.mu.Lock(); w.alone++; w.mu.Unlock() }

func (w *allWatch) PublishAll(evs []*core.Event) {
	var cs []int64
	for _, ev := range evs {
		cs = append(cs, ev.Cursor)
	}
	w.mu.Lock()
	w.all = append(w.all, cs)
	w.mu.Unlock()
}

func (w *allWatch) calls() ([][]int64, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.all), w.alone
}

// A publisher that takes a transaction's events at once gets them in one
// call, in commit order and without the event of a write that failed;
// each write is answered only after that call.
func TestATransactionIsPublishedAtOnce(t *testing.T) {
	st := openStore(t)
	w := &allWatch{}
	l := New(st, w, quiet, Config{})
	ctx := context.Background()
	boom := errors.New("boom")
	// Queued before the log runs, so they share its first transaction.
	var ps []*Pending
	for i, apply := range []func(store.Tx) error{nil, func(store.Tx) error { return boom }, nil} {
		p, err := l.Enqueue(ctx, apply, idle("c"+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	stop := run(l)
	defer stop()
	for i, p := range ps {
		err := p.Wait()
		if (i == 1) != (err != nil) {
			t.Fatalf("write %d answered %v", i, err)
		}
		if all, _ := w.calls(); len(all) != 1 {
			t.Fatalf("write %d answered before its transaction's events were published (%d calls)", i, len(all))
		}
	}
	all, alone := w.calls()
	if alone != 0 || len(all) != 1 || len(all[0]) != 2 || all[0][0] == 0 || all[0][0] >= all[0][1] ||
		all[0][0] != ps[0].w.ev.Cursor || all[0][1] != ps[2].w.ev.Cursor {
		t.Fatalf("published %v at once and %d alone; want the two committed events in one call", all, alone)
	}
}
