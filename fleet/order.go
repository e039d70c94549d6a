package fleet

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Store is what the fleet reads durable frames from: the database every
// replica commits to (package store/postgres; SQLite's store in tests).
type Store interface {
	// OutboxHead is the newest committed cursor: every frame up to it is
	// visible (the outbox_head row is set in the frame's own transaction).
	OutboxHead(ctx context.Context) (int64, error)
	// ScanEventsSkipping calls fn for each frame after < cursor <= upto in
	// order, and bad for a row that does not decode.
	ScanEventsSkipping(ctx context.Context, after, upto int64, fn func(*core.Event) error, bad func(int64, *store.CorruptError)) error
}

// Bounds of the sequencer's memory: whatever peers send, it holds at most
// this many cursors and transient frames.
const (
	maxNoted     = 4096
	maxHeld      = 1024
	maxHeldBytes = 4 << 20
	// readPage bounds one read of the store, so a replica far behind (back
	// from a long NATS outage) catches up in steps.
	readPage = 512
)

// sequencer hands durable frames to the hub once each, in cursor order,
// whichever replica committed them; transient frames go after the durable
// frame their origin published before them.
//
// A local frame is delivered at once (with the request it answers), after
// reading from the store whatever remote frames precede it: the local
// publisher goes in cursor order, so everything below a local cursor not
// delivered yet is another replica's, and committed. A remote frame is read
// from the store when its cursor message arrives and every cursor before it
// is delivered or noted; past a gap it is held for Hold, since the gap may
// be a local frame about to be published (delivered from the store, it
// would lose the request it answers), then read with the gap.
type sequencer struct {
	st      Store
	deliver func(*core.Event)
	remote  func(*core.Event) // nil: none
	met     *metrics
	hold    time.Duration
	now     func() time.Time

	// mu guards everything below, and is held while delivering: the hub
	// sees one order.
	mu        sync.Mutex
	delivered int64 // every durable frame up to here went to the hub
	lastLocal int64 // the last local cursor published

	noted    []int64   // committed cursors above delivered, sorted
	gapSince time.Time // when the gap at gapAt (0: not known yet) was first seen
	gapAt    int64
	held     []held // transient frames waiting for their cursor
	heldSize int
	resync   bool // NATS lost messages: read up to the store's head
	// The store's head read at a resync, and when: whose frames lie up to
	// it is unknown (this replica's own may be among them, committed and
	// not published yet), so it is read only once it is Hold old.
	head   int64
	headAt time.Time
}

type held struct {
	after int64
	ev    *core.Event
	size  int
	at    time.Time
}

// localLocked delivers a frame of this replica and returns the cursor a
// transient frame is published after (its origin's order), and whether it
// was delivered now.
func (s *sequencer) localLocked(ev *core.Event) (after int64, deliver bool) {
	if ev.Cursor == 0 {
		s.deliver(ev)
		return s.lastLocal, true
	}
	if ev.Cursor <= s.delivered {
		// Read from the store already, a remote frame's gap taking it
		// before its publisher got here (past Hold): delivered once, but
		// without the request it answers.
		s.met.lateLocal.Inc()
		s.lastLocal = ev.Cursor
		return s.lastLocal, false
	}
	if ev.Cursor > s.delivered+1 && !s.readLocked(ev.Cursor-1) {
		// The store answered this replica's commit a moment ago; if it
		// cannot be read now, the devices here miss the frames between
		// until they sync (their proofs say which).
		s.met.dropped.WithLabelValues("gap_unread").Inc()
	}
	s.deliver(ev)
	s.delivered, s.lastLocal = ev.Cursor, ev.Cursor
	s.releaseLocked()
	return s.lastLocal, true
}

// note records a committed cursor a peer announced.
func (s *sequencer) note(c int64) {
	s.mu.Lock()
	s.noteLocked(c)
	s.mu.Unlock()
}

func (s *sequencer) noteLocked(c int64) {
	if c <= s.delivered {
		return
	}
	i, found := slices.BinarySearch(s.noted, c)
	if found {
		return
	}
	if len(s.noted) >= maxNoted {
		// Keep the newest: reading up to it covers everything below.
		s.noted = s.noted[1:]
		i--
	}
	s.noted = slices.Insert(s.noted, max(i, 0), c)
	if c > s.delivered+1 && s.gapSince.IsZero() {
		s.gapSince = s.now()
	}
}

// transient queues a peer's transient frame behind its cursor.
// An origin's cursors only grow, so a frame whose cursor is delivered has
// none of its origin's frames held before it.
func (s *sequencer) transient(after int64, ev *core.Event, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if after <= s.delivered {
		s.deliver(ev)
		s.met.transientIn.Inc()
		return
	}
	s.met.holds.Inc()
	s.noteLocked(after)
	for len(s.held) > 0 && (len(s.held) >= maxHeld || s.heldSize+size > maxHeldBytes) {
		s.heldSize -= s.held[0].size
		s.held = s.held[1:]
		s.met.dropped.WithLabelValues("held_full").Inc()
	}
	s.held = append(s.held, held{after, ev, size, s.now()})
	s.heldSize += size
}

// step reads what may be read now and returns when to step again (zero:
// when something new arrives).
func (s *sequencer) step(ctx context.Context) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.resync {
		if h, err := s.readHead(ctx); err == nil {
			s.resync = false
			if h > s.delivered && h > s.head {
				s.head, s.headAt = h, now
			}
		} else {
			return time.Second
		}
	}
	s.noted = dropUpTo(s.noted, s.delivered)
	// The run of noted cursors right after delivered may be read now.
	target := s.delivered
	for _, c := range s.noted {
		if c != target+1 {
			break
		}
		target = c
	}
	var wait time.Duration
	if len(s.noted) > 0 && s.noted[len(s.noted)-1] > target {
		// The hold runs from when this gap was first seen: a gap filled
		// meanwhile (by a local frame) gives the next one a hold of its own.
		if s.gapSince.IsZero() || s.gapAt != 0 && s.gapAt != target+1 {
			s.gapSince = now
		}
		s.gapAt = target + 1
		if w := s.gapSince.Add(s.hold).Sub(now); w > 0 {
			wait = w
		} else {
			target = s.noted[len(s.noted)-1]
			s.met.gaps.Inc()
		}
	} else {
		s.gapSince = time.Time{}
	}
	if s.head > s.delivered {
		if w := s.headAt.Add(s.hold).Sub(now); w > 0 {
			wait = minWait(wait, w)
		} else {
			target = max(target, s.head)
		}
	}
	if target > s.delivered {
		if !s.readLocked(target) {
			return time.Second // the store is down: try again
		}
		s.noted = dropUpTo(s.noted, s.delivered)
		if len(s.noted) == 0 || s.noted[0] == s.delivered+1 {
			s.gapSince = time.Time{}
		}
	}
	s.releaseLocked()
	// Transient frames whose cursor never comes (a hostile or lost one)
	// are best effort: dropped after a while.
	for len(s.held) > 0 && now.Sub(s.held[0].at) > 4*s.hold+time.Second {
		s.heldSize -= s.held[0].size
		s.held = s.held[1:]
		s.met.dropped.WithLabelValues("held_expired").Inc()
	}
	if len(s.held) > 0 {
		wait = minWait(wait, s.hold)
	}
	return wait
}

func (s *sequencer) readHead(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.st.OutboxHead(ctx)
}

// readLocked delivers the frames up to target from the store, capped at
// the store's head: a cursor a peer claims beyond it is not trusted, or a
// hostile peer could make the replica skip frames to come. It reports
// false when the store could not be read.
func (s *sequencer) readLocked(target int64) bool {
	ctx := context.Background()
	h, err := s.readHead(ctx)
	if err != nil {
		s.met.storeErrors.Inc()
		return false
	}
	if target > h {
		s.met.dropped.WithLabelValues("beyond_head").Inc()
		target = h
		i, _ := slices.BinarySearch(s.noted, h+1)
		s.noted = s.noted[:i]
	}
	for s.delivered < target {
		upto := min(target, s.delivered+readPage)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n := 0
		err := s.st.ScanEventsSkipping(rctx, s.delivered, upto, func(ev *core.Event) error {
			// What the gateway holds first: a device hearing of a new
			// channel may send into it at once.
			if s.remote != nil {
				s.remote(ev)
			}
			s.deliver(ev)
			s.delivered = ev.Cursor
			s.releaseLocked()
			n++
			return nil
		}, func(int64, *store.CorruptError) {
			// Skipped: a device syncing past it is told truncated.
		})
		cancel()
		s.met.reads.Inc()
		s.met.read.Add(float64(n))
		if err != nil {
			s.met.storeErrors.Inc()
			return false
		}
		// Every cursor up to upto is committed and visible: the ones not
		// read were deleted (a message deleted, retention).
		s.delivered = upto
	}
	return true
}

// releaseLocked delivers the held transient frames whose cursor is
// delivered, in the order they came.
func (s *sequencer) releaseLocked() {
	n := 0
	for n < len(s.held) && s.held[n].after <= s.delivered {
		s.deliver(s.held[n].ev)
		s.heldSize -= s.held[n].size
		s.met.transientIn.Inc()
		n++
	}
	if n > 0 {
		s.held = slices.Delete(s.held, 0, n)
	}
}

// minWait is the sooner of two waits, zero meaning none.
func minWait(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

func dropUpTo(cs []int64, c int64) []int64 {
	i, _ := slices.BinarySearch(cs, c+1)
	return slices.Delete(cs, 0, i)
}
