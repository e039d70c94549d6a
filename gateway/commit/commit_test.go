package commit

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

	"go.uber.org/goleak"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// The tests run the Log over a real SQLite store and publish to a real
// hub; a Publisher in front of the hub records what reaches it, and can
// hold an event there to stand for a slow fan-out.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const wait = 10 * time.Second

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// watch is a Publisher that hands each event to the hub and keeps the
// cursors in the order they went out. An event of the lane hold waits
// in Publish (after entered is signalled) until release is closed.
type watch struct {
	hub     *hub.Hub
	hold    core.Lane
	entered chan *core.Event
	release chan struct{}
	check   func(*core.Event) // runs before the event is handed on

	mu   sync.Mutex
	seen []int64
}

func newWatch(st *store.Store) *watch {
	return &watch{hub: hub.New(st, quiet, hub.DefaultLimits), hold: core.Lane{ChatID: "hold"},
		entered: make(chan *core.Event, 16), release: make(chan struct{})}
}

func (w *watch) Publish(ev *core.Event) {
	if w.check != nil {
		w.check(ev)
	}
	if ev.Lane == w.hold {
		w.entered <- ev
		<-w.release
	}
	w.hub.Publish(ev)
	w.mu.Lock()
	w.seen = append(w.seen, ev.Cursor)
	w.mu.Unlock()
}

func (w *watch) published() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// run starts l and returns the function that stops it and waits for Run.
func run(l *Log) (stop func()) {
	done := make(chan struct{})
	ran := make(chan struct{})
	go func() { defer close(ran); l.Run(done) }()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-ran }) }
}

func putChannel(id string) func(store.Tx) error {
	return func(tx store.Tx) error {
		return tx.PutChannel(core.Channel{ChatID: id, Name: id, Kind: core.KindChannel})
	}
}

func idle(chatID string) *core.Event {
	return &core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: chatID}}
}

// A batch is committed as one transaction; a write that fails in it is
// undone alone (its own partial changes too) and the others land.
func TestCommitBatchIsolatesAFailingWrite(t *testing.T) {
	st := openStore(t)
	l := New(st, newWatch(st), quiet, Config{})
	boom := errors.New("boom")
	ws := []*write{
		{apply: putChannel("chan_a"), ev: idle("chan_a"), done: make(chan error, 1)},
		{apply: func(tx store.Tx) error {
			if err := putChannel("chan_half")(tx); err != nil {
				return err
			}
			return boom // after a change of its own
		}, ev: &core.Event{Type: core.EvAgentIdle}, done: make(chan error, 1)},
		{apply: putChannel("chan_b"), ev: idle("chan_b"), done: make(chan error, 1)},
	}
	for _, w := range ws { // queued before the loop runs: one batch
		l.writes <- w
	}
	defer run(l)()
	for i, w := range ws {
		select {
		case err := <-w.done:
			if want := i == 1; (err != nil) != want || (want && !errors.Is(err, boom)) {
				t.Fatalf("write %d: %v", i, err)
			}
		case <-time.After(wait):
			t.Fatalf("write %d never committed", i)
		}
	}
	ctx := context.Background()
	for id, want := range map[string]bool{"chan_a": true, "chan_half": false, "chan_b": true} {
		if _, err := st.Channel(ctx, id); (err == nil) != want {
			t.Errorf("channel %s: %v, want present %v", id, err, want)
		}
	}
	if ws[0].ev.Cursor == 0 || ws[2].ev.Cursor != ws[0].ev.Cursor+1 {
		t.Errorf("cursors %d, %d: the failed write must leave no gap", ws[0].ev.Cursor, ws[2].ev.Cursor)
	}
}

// A write whose insert the store holds back and which fails only when the
// rows go in (a message id already stored: SQLite puts a batch's rows in
// together, store/rowbuf.go) fails alone too, and its frame takes no
// cursor.
func TestCommitBatchIsolatesAWriteThatFailsLate(t *testing.T) {
	st := openStore(t)
	l := New(st, newWatch(st), quiet, Config{})
	lane := core.Lane{ChatID: core.DefaultChatID}
	msg := func(id string) func(store.Tx) error {
		return func(tx store.Tx) error {
			return tx.InsertMessage(core.Message{ID: id, Lane: lane, Role: core.RoleUser, Text: id, TS: 1}, false)
		}
	}
	ws := []*write{
		{apply: msg("m_a"), ev: idle(core.DefaultChatID), done: make(chan error, 1)},
		{apply: msg("m_a"), ev: idle(core.DefaultChatID), done: make(chan error, 1)}, // the same id
		{apply: msg("m_b"), ev: idle(core.DefaultChatID), done: make(chan error, 1)},
	}
	for _, w := range ws {
		l.writes <- w
	}
	defer run(l)()
	for i, w := range ws {
		select {
		case err := <-w.done:
			if (err != nil) != (i == 1) {
				t.Fatalf("write %d: %v", i, err)
			}
		case <-time.After(wait):
			t.Fatalf("write %d never committed", i)
		}
	}
	h, _, err := st.History(context.Background(), lane, "", 10)
	if err != nil || len(h) != 2 || h[0].ID != "m_a" || h[1].ID != "m_b" {
		t.Fatalf("history %+v, %v: want m_a, m_b", h, err)
	}
	if ws[0].ev.Cursor == 0 || ws[2].ev.Cursor != ws[0].ev.Cursor+1 {
		t.Errorf("cursors %d, %d: the failed write must leave no gap", ws[0].ev.Cursor, ws[2].ev.Cursor)
	}
	if head, err := st.OutboxHead(context.Background()); err != nil || head != ws[2].ev.Cursor {
		t.Errorf("outbox head %d, %v; want %d", head, err, ws[2].ev.Cursor)
	}
}

// wrote is a Store that says when a transaction has committed.
type wrote struct {
	*store.Store
	done chan error
}

func (w wrote) Write(ctx context.Context, fn func(store.Tx) error) error {
	err := w.Store.Write(ctx, fn)
	w.done <- err
	return err
}

// While the publisher is held on batch N (a slow fan-out), the next batch
// commits: its rows are in SQLite. It is not published before N, and its
// Commit does not return before it is published.
func TestCommitsWhilePublishing(t *testing.T) {
	st := openStore(t)
	pub := newWatch(st)
	ws := wrote{st, make(chan error, 16)}
	l := New(ws, pub, quiet, Config{})
	defer run(l)()
	var once sync.Once
	release := func() { once.Do(func() { close(pub.release) }) }
	defer release() // before Run is stopped, should the test fail early
	ctx := context.Background()

	first := make(chan error, 1)
	go func() { first <- l.Commit(ctx, putChannel("chan_n"), idle("hold")) }()
	var held *core.Event
	select {
	case held = <-pub.entered:
	case <-time.After(wait):
		t.Fatal("batch N never reached the publisher")
	}
	if err := <-ws.done; err != nil {
		t.Fatal(err)
	}

	second := make(chan error, 1)
	next := idle("chan_m")
	go func() { second <- l.Commit(ctx, putChannel("chan_m"), next) }()
	select {
	case err := <-ws.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("batch N+1 did not commit while N was being published")
	}
	if _, err := st.Channel(ctx, "chan_m"); err != nil {
		t.Fatalf("N+1's row is not in the store while N publishes: %v", err)
	}
	if got := pub.published(); len(got) != 0 {
		t.Fatalf("published %v while N was held", got)
	}
	select {
	case err := <-second:
		t.Fatalf("N+1's Commit returned (%v) before it was published", err)
	case err := <-first:
		t.Fatalf("N's Commit returned (%v) before it was published", err)
	default:
	}

	release()
	allReturned(t, first, second)
	if got, want := pub.published(), []int64{held.Cursor, next.Cursor}; !slices.Equal(got, want) || next.Cursor != held.Cursor+1 {
		t.Fatalf("published %v, want %v", got, want)
	}
}

// Many writers, many batches, some writes failing: the publisher sees the
// cursors in increasing order with no gap, and each Commit returns only
// once its event has been published.
func TestPublishOrderAcrossBatches(t *testing.T) {
	st := openStore(t)
	pub := newWatch(st)
	l := New(st, pub, quiet, Config{})
	defer run(l)()
	ctx := context.Background()
	const writers, each = 8, 150
	boom := errors.New("boom")
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				var fn func(store.Tx) error
				if i%17 == 0 {
					fn = func(store.Tx) error { return boom }
				}
				ev := idle(fmt.Sprintf("chan_%d", w))
				err := l.Commit(ctx, fn, ev)
				switch {
				case fn != nil && !errors.Is(err, boom):
					errs <- fmt.Errorf("a failing write answered %v", err)
					return
				case fn == nil && err != nil:
					errs <- err
					return
				case fn == nil && !slices.Contains(pub.published(), ev.Cursor):
					errs <- fmt.Errorf("Commit of cursor %d returned before its publication", ev.Cursor)
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(3 * wait):
			t.Fatal("the writers did not finish")
		}
	}
	got := pub.published()
	if want := writers * (each - (each+16)/17); len(got) != want {
		t.Fatalf("%d events published, want %d", len(got), want)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("cursor %d published after %d", got[i], got[i-1])
		}
	}
}

// A reply's message.stop ends its stream in the write's apply: by the time
// the event is published, the apply has run and its transaction is
// durable, so a device that reads the message on hearing of it finds it
// finished, and one that joins from then on is shown no running stream.
func TestApplyCommitsBeforePublish(t *testing.T) {
	st := openStore(t)
	pub := newWatch(st)
	l := New(st, pub, quiet, Config{})
	defer run(l)()
	ctx := context.Background()
	lk := core.Lane{ChatID: core.DefaultChatID}
	m := core.Message{ID: "m_reply", Lane: lk, Role: core.RoleAssistant, TS: 1}
	if err := l.Commit(ctx, func(tx store.Tx) error { return tx.InsertMessage(m, true) },
		&core.Event{Type: core.EvMessageStart, Lane: lk, StreamID: m.ID}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stream := m.ID // what a joining device's snapshot would show
	checked := make(chan error, 1)
	pub.check = func(ev *core.Event) {
		if ev.Type != core.EvMessageStop {
			return
		}
		mu.Lock()
		s := stream
		mu.Unlock()
		streaming, err := st.Streaming(ctx)
		switch {
		case err != nil:
			checked <- err
		case s != "":
			checked <- errors.New("message.stop published before its apply ended the stream")
		case len(streaming) != 0:
			checked <- errors.New("message.stop published before its transaction was durable")
		default:
			checked <- nil
		}
	}
	m.Text = "done"
	if err := l.Commit(ctx, func(tx store.Tx) error {
		mu.Lock()
		stream = ""
		mu.Unlock()
		return tx.FinishMessage(m)
	}, &core.Event{Type: core.EvMessageStop, Lane: lk, Message: &m}); err != nil {
		t.Fatal(err)
	}
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
}

// Shutdown: Run returns only once the publisher has published everything
// committed, so the store may close right after it, and it leaves no
// goroutine behind. Writes it did not commit are refused, never lost
// silently: each Commit returns.
func TestShutdownDrainsThePublisher(t *testing.T) {
	defer goleak.VerifyNone(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	pub := newWatch(st)
	ws := wrote{st, make(chan error, 64)}
	l := New(ws, pub, quiet, Config{})
	done := make(chan struct{})
	ran := make(chan struct{})
	go func() { defer close(ran); l.Run(done) }()
	var late sync.Mutex
	var afterRun []int64 // published once Run had returned
	pub.check = func(ev *core.Event) {
		select {
		case <-ran:
			late.Lock()
			afterRun = append(afterRun, ev.Cursor)
			late.Unlock()
		default:
		}
	}
	ctx := context.Background()

	type result struct {
		ev  *core.Event
		err error
	}
	results := make(chan result, 64)
	go func() {
		ev := idle("hold")
		results <- result{ev, l.Commit(ctx, nil, ev)}
	}()
	<-pub.entered // the publisher holds batch 1
	<-ws.done
	for i := range 40 {
		go func() {
			ev := idle(fmt.Sprintf("chan_%d", i))
			results <- result{ev, l.Commit(ctx, nil, ev)}
		}()
	}
	// Some of them are committed, waiting for the publisher, when the
	// shutdown comes.
	select {
	case <-ws.done:
	case <-time.After(wait):
		t.Fatal("nothing committed behind the held batch")
	}
	close(done)
	// A Run that did not wait for its publisher would return now: give it
	// the chance (a correct one cannot return before the release below).
	select {
	case <-ran:
		t.Fatal("Run returned while its publisher held committed batches")
	case <-time.After(200 * time.Millisecond):
	}
	close(pub.release)
	<-ran
	atStop := pub.published()
	st.Close()
	late.Lock()
	if len(afterRun) > 0 {
		t.Errorf("cursors %v were published after Run returned", afterRun)
	}
	late.Unlock()
	committed := 0
	for range 41 {
		select {
		case r := <-results:
			switch {
			case r.err == nil && !slices.Contains(atStop, r.ev.Cursor):
				t.Errorf("cursor %d was committed but not published when Run returned", r.ev.Cursor)
			case r.err == nil:
				committed++
			case !errors.Is(r.err, ErrStopped):
				t.Errorf("a write at shutdown answered %v", r.err)
			}
		case <-time.After(wait):
			t.Fatal("a Commit never returned after shutdown")
		}
	}
	if committed < 2 {
		t.Fatalf("only %d writes committed: the shutdown caught none in flight", committed)
	}
	if err := l.Commit(ctx, nil, idle("late")); !errors.Is(err, ErrStopped) {
		t.Fatalf("a write after shutdown answered %v", err)
	}
}

// A write without an event, committed while an earlier batch's event is
// still being published, returns only after that event is published: the
// committer tells such writers itself only when the publisher has nothing
// left of earlier batches.
func TestWriteWithoutEventWaitsForEarlierPublishes(t *testing.T) {
	st := openStore(t)
	pub := newWatch(st)
	ws := wrote{st, make(chan error, 16)}
	l := New(ws, pub, quiet, Config{})
	defer run(l)()
	var once sync.Once
	release := func() { once.Do(func() { close(pub.release) }) }
	defer release()
	ctx := context.Background()

	// With the publisher idle, an event-less write returns at once.
	if err := l.Commit(ctx, putChannel("chan_a"), nil); err != nil {
		t.Fatal(err)
	}
	<-ws.done

	first := make(chan error, 1)
	go func() { first <- l.Commit(ctx, putChannel("chan_n"), idle("hold")) }()
	select {
	case <-pub.entered:
	case <-time.After(wait):
		t.Fatal("the first batch never reached the publisher")
	}
	<-ws.done
	second := make(chan error, 1)
	go func() { second <- l.Commit(ctx, putChannel("chan_m"), nil) }()
	<-ws.done
	// It is committed; it must now wait behind the held event.
	for deadline := time.Now().Add(wait); l.publishing.Load() < 2; {
		select {
		case err := <-second:
			t.Fatalf("the event-less write returned (%v) while an earlier event was unpublished", err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the event-less write was never handed to the publisher")
		}
	}
	release()
	allReturned(t, first, second)
}

// allReturned waits for each Commit's outcome on cs, failing on an error
// or on one that never returns.
func allReturned(t *testing.T, cs ...chan error) {
	t.Helper()
	for _, c := range cs {
		select {
		case err := <-c:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(wait):
			t.Fatal("a Commit never returned")
		}
	}
}
