package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// The commit path (the group commit, then publishing) against the real
// SQLite store, seen only through the gateway's Store interface, and a
// real hub. What the hub hands a connection is seen by observer, a Codec
// (the hub's own interface) that notes each event as it is published.

// within bounds every wait of these tests for what must happen; grace is
// how long one waits for what must not (a commit returning early).
const (
	within = 10 * time.Second
	grace  = 300 * time.Millisecond
)

// observer notes the events the hub publishes to its connection. hold,
// when set, makes it stop inside Publish for an event of that type until
// released, telling entered.
type observer struct {
	mu      sync.Mutex
	cursors []int64
	seen    map[int64]bool

	holdType core.EventType
	entered  chan struct{}
	release  chan struct{}
}

func (o *observer) Frames(ev *core.Event, _ int64) []hub.Out {
	if o.holdType != "" && ev.Type == o.holdType {
		close(o.entered)
		<-o.release
	}
	if ev.Cursor > 0 {
		o.mu.Lock()
		o.cursors = append(o.cursors, ev.Cursor)
		o.seen[ev.Cursor] = true
		o.mu.Unlock()
	}
	return nil
}

func (o *observer) published(cursor int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[cursor]
}

func (o *observer) order() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.cursors)
}

var errBoom = errors.New("boom")

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openStore opens a real SQLite store, handed out as the gateway sees it.
func openStore(t *testing.T) (Store, *store.Store) {
	t.Helper()
	sq, err := store.Open(filepath.Join(t.TempDir(), "gw.db"), store.WithLog(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	return sq, sq
}

// runGateway starts a gateway on st with an observer connected, and stops
// it at the test's end.
func runGateway(t *testing.T, o *observer) (*Gateway, Store) {
	t.Helper()
	st, sq := openStore(t)
	h := hub.New(sq, quiet(), hub.DefaultLimits)
	g := New(st, h, quiet(), Config{})
	if o.seen == nil {
		o.seen = map[int64]bool{}
	}
	if _, _, err := h.Add(context.Background(), "observer", o, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	select {
	case <-g.Recovered():
	case <-time.After(within):
		t.Fatal("the gateway never finished recovering")
	}
	if err := g.RecoverErr(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	})
	return g, st
}

// Many writers committing at once, one write in seven failing after a
// change of its own: a failed write is undone alone and its event never
// published; each other commit returns only once its event is published;
// events are published in cursor order; and what was published is exactly
// what the outbox holds, without a gap.
func TestCommitsPublishInCursorOrder(t *testing.T) {
	o := &observer{}
	g, st := runGateway(t, o)
	const writers, each = 8, 40
	lane := core.Lane{ChatID: core.DefaultChatID}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := range each {
				m := core.Message{ID: fmt.Sprintf("m_%d_%d", w, i), Lane: lane, Role: core.RoleUser, Text: "hi", TS: 1}
				ev := &core.Event{Type: core.EvMessage, Lane: lane, Message: &m}
				fails := i%7 == 3
				err := g.commit(context.Background(), func(tx store.Tx) error {
					if err := tx.InsertMessage(m, false); err != nil {
						return err
					}
					if fails {
						return errBoom // after a change of its own
					}
					return nil
				}, ev)
				if fails {
					if !errors.Is(err, errBoom) {
						errs <- fmt.Errorf("writer %d: a failing write returned %v", w, err)
						return
					}
					if _, err := st.Message(context.Background(), m.ID); !errors.Is(err, store.ErrNotFound) {
						errs <- fmt.Errorf("writer %d: the failed write's message is there (%v)", w, err)
						return
					}
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				switch {
				case ev.Cursor <= last:
					errs <- fmt.Errorf("writer %d: cursor %d after its own %d", w, ev.Cursor, last)
					return
				case !o.published(ev.Cursor):
					errs <- fmt.Errorf("writer %d: commit of cursor %d returned before its event was published", w, ev.Cursor)
					return
				}
				last = ev.Cursor
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := o.order()
	failed := 0
	for i := range each {
		if i%7 == 3 {
			failed++
		}
	}
	if want := writers * (each - failed); len(got) != want {
		t.Fatalf("%d events published, want %d (the failed writes' not)", len(got), want)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("published cursor %d after %d", got[i], got[i-1])
		}
	}
	ctx := context.Background()
	head, _ := st.OutboxHead(ctx)
	stored, err := st.OutboxCursors(ctx, 0, head, 1<<20)
	if err != nil || !slices.Equal(stored, got) {
		t.Fatalf("the outbox holds %d cursors (%v), published %d", len(stored), err, len(got))
	}
	if n := len(stored); stored[n-1]-stored[0] != int64(n-1) {
		t.Fatalf("cursors %d…%d for %d frames: a gap", stored[0], stored[n-1], n)
	}
}

// A commit returns only after its event has been handed to the hub: the
// durable event is live before the caller's next (ephemeral) one can go.
func TestCommitReturnsOnlyAfterPublish(t *testing.T) {
	o := &observer{holdType: core.EvAgentBusy, entered: make(chan struct{}), release: make(chan struct{})}
	g, _ := runGateway(t, o)
	var once sync.Once
	free := func() { once.Do(func() { close(o.release) }) }
	t.Cleanup(free) // runs before the gateway's stop: a failed test must not leave the committer held
	ev := &core.Event{Type: core.EvAgentBusy, Lane: core.Lane{ChatID: core.DefaultChatID}, Reason: "processing"}
	returned := make(chan error, 1)
	go func() { returned <- g.commit(context.Background(), nil, ev) }()
	select {
	case <-o.entered:
	case err := <-returned:
		t.Fatalf("commit returned (%v) before its event was published", err)
	case <-time.After(within):
		t.Fatal("the event was never published")
	}
	// The publish is held: a commit that returns now returned too early.
	// The commit's goroutine may need a moment to run, so it is given
	// one; a correct commit waits it out.
	select {
	case err := <-returned:
		t.Fatalf("commit returned (%v) while its event was being published", err)
	case <-time.After(grace):
	}
	free()
	select {
	case err := <-returned:
		if err != nil || ev.Cursor == 0 || !o.published(ev.Cursor) {
			t.Fatalf("commit: %v, cursor %d", err, ev.Cursor)
		}
	case <-time.After(within):
		t.Fatal("commit never returned after the publish")
	}
}

// BenchmarkCommit is the commit path as a lane's turn drives it, from 8
// writers at once so batches form: a message row and its durable event,
// committed, then published to one connection.
//
//	go test -run '^$' -bench Commit -count 6 ./gateway/
func BenchmarkCommit(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "gw.db"), store.WithLog(quiet()))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h := hub.New(st, quiet(), hub.DefaultLimits)
	g := New(st, h, quiet(), Config{})
	if _, _, err := h.Add(context.Background(), "observer", &observer{seen: map[int64]bool{}}, nil); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	<-g.Recovered()
	const writers = 8
	lane := core.Lane{ChatID: core.DefaultChatID}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += writers {
				m := core.Message{ID: fmt.Sprintf("m_%d", i), Lane: lane, Role: core.RoleUser, Text: "what's the weather like tomorrow?", TS: 1}
				ev := &core.Event{Type: core.EvMessage, Lane: lane, Message: &m}
				if err := g.commit(context.Background(), func(tx store.Tx) error { return tx.InsertMessage(m, false) }, ev); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
