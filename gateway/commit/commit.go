// Package commit is the one path every durable change takes: a group
// commit to the store, then publication to the devices. Writes from any
// goroutine are batched into one transaction; once it is durable, one
// publisher goroutine publishes the batch's events in order, so a slow
// fan-out delays the next batch's publication but never its commit.
package commit

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Store is where writes are committed.
type Store interface {
	Write(ctx context.Context, fn func(store.Tx) error) error
}

// Publisher hands an event to the devices (package hub's Hub). It must
// not block on any device.
type Publisher interface {
	Publish(ev *core.Event)
}

// AllPublisher is a Publisher that takes a transaction's events at once
// (package hub's Hub): each device gets them in one hand-off.
type AllPublisher interface {
	Publisher
	PublishAll(evs []*core.Event)
}

// Config tunes a Log.
type Config struct {
	// ReplayCache bounds the memory (counted as stored bytes) that keeps
	// the newest outbox events ready for sync: 32 MiB unless set; negative
	// turns the cache off.
	ReplayCache int
	// AfterPublish, when set, runs on the publisher goroutine after each
	// committed event is published (push wake-ups, the outbox metric). It
	// must not block.
	AfterPublish func(*core.Event)
	// AfterCommit, when set, runs on the committer goroutine for each
	// event of a transaction once it is durable and before any of them is
	// published: state derived from committed events (the gateway's
	// channel directory) is right before a device can hear of the change
	// and act on it. It must be quick and not block.
	AfterCommit func(*core.Event)
	// Batch, when set, is told the number of writes of each transaction
	// (the metric that shows whether the group commit groups).
	Batch func(writes int)
	// Linger is how long a transaction of lingering writes only (Linger,
	// CommitLater) waits for company before it commits alone: 5 ms unless
	// set; negative commits them at once.
	Linger time.Duration
}

// defaultLinger is Config.Linger's default. Hellos one after another,
// 0.5 ms apart, share a transaction about ten at a time; alone, each
// device row was a commit of ~80 µs that the next handshake waited
// behind for the CPU (handshake p50 0.56 -> 0.48 ms without it, irisgate
// bench --scenarios ratios --ratio-modes handshake).
const defaultLinger = 5 * time.Millisecond

// ErrStopped is what a write gets once the Log has stopped.
var ErrStopped = errors.New("gateway: stopped")

// errWriteFailed sends a batch to the slow path, one savepoint a write.
var errWriteFailed = errors.New("gateway: a write of the batch failed")

// maxBatch bounds the writes of one transaction.
const maxBatch = 512

// pending bounds the committed batches waiting for the publisher: when it
// falls that far behind, the committer waits, so a slow fan-out pushes
// back instead of piling events up in memory.
const pending = 2

// Log is the group commit and its publisher.
type Log struct {
	st    Store
	pub   Publisher
	log   *slog.Logger
	after func(*core.Event)
	// committed and batched are Config's AfterCommit and Batch.
	committed func(*core.Event)
	batched   func(int)

	linger time.Duration
	// lingered, when set (tests), is told the writes a lingering batch
	// holds each time it starts to wait or takes one more.
	lingered func(int)
	writes   chan *write
	batches  chan batch
	// publishing counts the batches handed to the publisher and not yet
	// done with (Run adds, publishLoop subtracts).
	publishing atomic.Int64
	// committing is set while Run commits a batch (Busy).
	committing atomic.Bool
	replay     *replayCache // nil: off
	// head is the newest cursor committed (Head), known once a durable
	// event commits or NoteHead is told the store's.
	head      atomic.Int64
	headKnown atomic.Bool
	// stopped is closed when Run has returned: the committer has ended
	// and the publisher has published all it committed.
	stopped chan struct{}
}

// write is one unit of the group commit: store changes and the event they
// produce, applied in one savepoint and published once committed.
type write struct {
	apply func(store.Tx) error
	ev    *core.Event
	size  int        // of ev's outbox body, once stored
	done  chan error // nil: nobody waits
	// lingers: the write may wait up to Log.linger for company.
	lingers bool
}

// batch is one committed transaction's writes with each one's outcome.
type batch struct {
	ws   []*write
	errs []error
}

// New makes a Log over st publishing to pub. Call Run to start it.
func New(st Store, pub Publisher, log *slog.Logger, cfg Config) *Log {
	if cfg.ReplayCache == 0 {
		cfg.ReplayCache = 32 << 20
	}
	if cfg.Linger == 0 {
		cfg.Linger = defaultLinger
	}
	return &Log{
		st: st, pub: pub, log: log, after: cfg.AfterPublish, committed: cfg.AfterCommit, batched: cfg.Batch,
		linger:  cfg.Linger,
		writes:  make(chan *write, 1024),
		batches: make(chan batch, pending),
		replay:  newReplayCache(1<<18, cfg.ReplayCache),
		stopped: make(chan struct{}),
	}
}

// Commit applies fn and, when ev is durable, appends ev to the outbox, in
// one transaction shared with whatever else is committing; once that is
// durable ev is published. It returns when that has happened, so an
// event the caller publishes next reaches every device after ev.
func (l *Log) Commit(ctx context.Context, fn func(store.Tx) error, ev *core.Event) error {
	p, err := l.Enqueue(ctx, fn, ev)
	if err != nil {
		return err
	}
	return p.Wait()
}

// Pending is a write Enqueue queued: it will be committed, and Wait says
// how that went.
type Pending struct {
	l *Log
	w *write
}

// Enqueue queues the write Commit makes and returns without waiting for
// it, so one goroutine can have several writes in one transaction: writes
// it enqueues one after another are committed, and their events
// published, in that order. The error is ctx's or ErrStopped when the
// write was not queued (it will not happen).
func (l *Log) Enqueue(ctx context.Context, fn func(store.Tx) error, ev *core.Event) (*Pending, error) {
	w := &write{apply: fn, ev: ev, done: make(chan error, 1)}
	select {
	case l.writes <- w:
		return &Pending{l: l, w: w}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.stopped:
		return nil, ErrStopped
	}
}

// Linger queues fn, a write with no event nobody waits for, to commit
// with the next transaction, or alone once it has waited Config.Linger
// for one. It keeps its place: writes queued after it commit after it,
// and any write that is waited for (Commit, even of nothing) commits it
// first. For writes a crash may lose (a hello's device row), that are
// not worth a transaction of their own. The error is ctx's or ErrStopped
// when fn was not queued.
func (l *Log) Linger(ctx context.Context, fn func(store.Tx) error) error {
	select {
	case l.writes <- &write{apply: fn, lingers: true}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.stopped:
		return ErrStopped
	}
}

// Wait returns once the write is committed and its event published, with
// the write's outcome. Once queued the write will happen, so there is no
// context: the caller never mistakes a committed change for a failed one.
func (p *Pending) Wait() error {
	select {
	case err := <-p.w.done:
		return err
	case <-p.l.stopped:
		select {
		case err := <-p.w.done:
			return err
		default:
			return ErrStopped
		}
	}
}

// CommitLater queues a write without waiting for it; it lingers as
// Linger's do. When the committer is behind the write is dropped: it is
// for best-effort saves (a streaming reply's progress).
func (l *Log) CommitLater(fn func(store.Tx) error) {
	select {
	case l.writes <- &write{apply: fn, lingers: true}:
	default:
	}
}

// Publish sends an ephemeral event to the devices now, stamped with the
// time if it has none.
func (l *Log) Publish(ev *core.Event) {
	if ev.TS == 0 {
		ev.TS = time.Now().UnixMilli()
	}
	l.pub.Publish(ev)
}

// Replay returns the committed event at cursor when it is still cached
// (nil otherwise: read it from the outbox). It is shared and must not be
// changed.
func (l *Log) Replay(cursor int64) *core.Event { return l.replay.get(cursor) }

// Run commits writes until done is closed, then waits for the publisher
// to publish what was committed: once Run returns, no write is in flight
// and the store may close. Writes still queued then get ErrStopped.
func (l *Log) Run(done <-chan struct{}) error {
	published := make(chan struct{})
	go func() {
		defer close(published)
		l.publishLoop()
	}()
	defer func() {
		close(l.batches)
		<-published
		close(l.stopped)
	}()
	var wait *time.Timer // gather's, made once
	for {
		var b batch
		select {
		case w := <-l.writes:
			b.ws = append(make([]*write, 0, min(len(l.writes)+1, maxBatch)), w)
		case <-done:
			return nil
		}
	fill:
		for len(b.ws) < maxBatch {
			select {
			case w := <-l.writes:
				b.ws = append(b.ws, w)
			default:
				break fill
			}
		}
		if l.linger > 0 && len(b.ws) < maxBatch && lingering(b.ws) {
			if wait == nil {
				wait = time.NewTimer(l.linger)
			} else {
				wait.Reset(l.linger)
			}
			if l.lingered != nil {
				l.lingered(len(b.ws))
			}
			b.ws = l.gather(b.ws, wait, done)
			wait.Stop()
		}
		l.committing.Store(true)
		b.errs = l.commitBatch(b.ws)
		l.committing.Store(false)
		l.noteCommitted(b)
		if l.batched != nil {
			l.batched(len(b.ws))
		}
		if l.committed != nil {
			for i, w := range b.ws {
				if b.errs[i] == nil && w.ev != nil && w.ev.Type.Durable() {
					l.committed(w.ev)
				}
			}
		}
		if l.publishing.Load() == 0 && !hasEvents(b.ws) {
			// Nothing to publish and nothing published before it still
			// waits: its writers are told here, as the publisher would
			// tell them, without waiting for it to be scheduled. A
			// hello's device row was three goroutine hand-offs away from
			// its hello.ack; now two.
			for i, w := range b.ws {
				if w.done != nil {
					w.done <- b.errs[i]
				}
			}
			continue
		}
		l.publishing.Add(1)
		l.batches <- b
	}
}

// gather adds to ws, lingering writes only, what comes before wait fires
// or done closes: up to and including the first write that does not
// linger, and what is queued behind it.
func (l *Log) gather(ws []*write, wait *time.Timer, done <-chan struct{}) []*write {
	for len(ws) < maxBatch {
		select {
		case w := <-l.writes:
			ws = append(ws, w)
			if w.lingers {
				if l.lingered != nil {
					l.lingered(len(ws))
				}
				continue
			}
			for len(ws) < maxBatch {
				select {
				case w := <-l.writes:
					ws = append(ws, w)
				default:
					return ws
				}
			}
			return ws
		case <-wait.C:
			return ws
		case <-done:
			return ws
		}
	}
	return ws
}

func lingering(ws []*write) bool {
	for _, w := range ws {
		if !w.lingers {
			return false
		}
	}
	return true
}

// Busy reports whether writes are queued or being committed now: a write
// queued then shares a transaction with them (a storm's hellos), where
// one alone would wait a commit of its own.
func (l *Log) Busy() bool { return len(l.writes) > 0 || l.committing.Load() }

func hasEvents(ws []*write) bool {
	for _, w := range ws {
		if w.ev != nil {
			return true
		}
	}
	return false
}

// Head returns the newest outbox cursor committed, and whether it is
// known: once a durable event has committed through the log, or NoteHead
// was told the store's head. It is the store's head (OutboxHead) as long
// as the log is the outbox's one writer, which it is while a gateway owns
// its store (SQLite's data-directory lock, PostgreSQL's serving lock);
// replicas sharing one database (issue 18) must read the store's. It
// rises when the transaction is durable and before its events are
// published, so a frame above it has not reached anyone yet: a device
// registered in the hub before reading it gets that frame live.
func (l *Log) Head() (int64, bool) {
	if !l.headKnown.Load() {
		return 0, false
	}
	return l.head.Load(), true
}

// NoteHead tells the log the store's head, read before any durable event
// committed through it: the head is known from then on. A head read
// before a commit the log saw since does not lower it.
func (l *Log) NoteHead(head int64) {
	l.raiseHead(head)
	l.headKnown.Store(true)
}

func (l *Log) raiseHead(c int64) {
	for {
		old := l.head.Load()
		if c <= old || l.head.CompareAndSwap(old, c) {
			return
		}
	}
}

// noteCommitted raises the head to a committed batch's newest cursor.
func (l *Log) noteCommitted(b batch) {
	var newest int64
	for i, w := range b.ws {
		if b.errs[i] == nil && w.ev != nil && w.ev.Cursor > newest {
			newest = w.ev.Cursor
		}
	}
	if newest > 0 {
		l.NoteHead(newest)
	}
}

// commitBatch commits ws and returns each write's outcome.
func (l *Log) commitBatch(ws []*write) []error {
	errs := make([]error, 0, len(ws))
	// Optimistically the batch goes in as one transaction. Only when a
	// write fails is it run again with a savepoint per write, so the
	// failure undoes its own changes alone: savepoints cost two
	// statements a write, a quarter of the commit path. Writes only
	// change the store and set values, so running one twice is safe.
	err := l.st.Write(context.Background(), func(tx store.Tx) error {
		for _, w := range ws {
			if err := applyWrite(tx, w); err != nil {
				return errWriteFailed
			}
		}
		if tx.Flush() != nil {
			return errWriteFailed // which one is not known: savepoints tell
		}
		return nil
	})
	if err == nil {
		for range ws {
			errs = append(errs, nil)
		}
		return errs
	}
	if errors.Is(err, errWriteFailed) {
		err = l.st.Write(context.Background(), func(tx store.Tx) error {
			errs = errs[:0] // the transaction may be retried
			for _, w := range ws {
				errs = append(errs, tx.Savepoint(func(tx store.Tx) error { return applyWrite(tx, w) }))
			}
			return nil
		})
	}
	if err != nil {
		l.log.Error("outbox commit failed", "err", err, "writes", len(ws))
		errs = errs[:0]
		for range ws {
			errs = append(errs, err)
		}
	}
	return errs
}

func applyWrite(tx store.Tx, w *write) error {
	if w.apply != nil {
		if err := w.apply(tx); err != nil {
			return err
		}
	}
	ev := w.ev
	if ev == nil || !ev.Type.Durable() {
		return nil
	}
	if ev.TS == 0 {
		ev.TS = time.Now().UnixMilli()
	}
	var err error
	ev.Cursor, w.size, err = tx.AppendEvent(ev)
	return err
}

// publishLoop publishes the committed batches in commit order, so cursors
// go out in increasing order, and answers a batch's writes once its
// events are out. An AllPublisher gets a batch's events in one call.
func (l *Log) publishLoop() {
	all, _ := l.pub.(AllPublisher)
	var evs []*core.Event
	for b := range l.batches {
		evs = evs[:0]
		for i, w := range b.ws {
			if b.errs[i] == nil && w.ev != nil {
				l.remember(w)
				if all == nil {
					l.pub.Publish(w.ev)
				} else {
					evs = append(evs, w.ev)
				}
			}
		}
		if len(evs) > 0 {
			all.PublishAll(evs)
			clear(evs) // published: nothing here keeps them
		}
		for i, w := range b.ws {
			err := b.errs[i]
			if err == nil && w.ev != nil && l.after != nil {
				l.after(w.ev)
			}
			if w.done != nil {
				w.done <- err
			}
		}
		l.publishing.Add(-1)
	}
}

// remember keeps a committed durable event for sync replays.
func (l *Log) remember(w *write) {
	if w.ev.Type == core.EvMessageDeleted || w.ev.Type == core.EvChannelDeleted {
		// Deleted content must not linger in memory; Sync never serves it
		// anyway, as it replays only cursors the outbox still has.
		l.replay.reset()
	}
	if w.ev.Cursor > 0 {
		l.replay.add(w.ev, w.size)
	}
}
