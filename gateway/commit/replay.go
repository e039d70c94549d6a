package commit

import (
	"sync"

	"github.com/irisgate/irisgate/core"
)

// replayCache keeps the newest durable events in their core form, by
// cursor, so a sync of what a device missed lately needs no decoding of
// stored bodies (decoding was two thirds of a replay's cost). The outbox
// stays the authority: Sync asks it which cursors still exist and takes
// only their bodies from here, so retention and deletes need no bookkeeping
// beyond dropping the cache when content is deleted.
type replayCache struct {
	mu       sync.Mutex
	slots    []replaySlot // by cursor modulo len; grows up to maxSlots
	maxSlots int
	lo, hi   int64 // cached cursors are lo..hi, none when hi < lo
	bytes    int
	maxBytes int
}

type replaySlot struct {
	ev   *core.Event
	size int
}

func newReplayCache(maxSlots, maxBytes int) *replayCache {
	if maxSlots <= 0 || maxBytes <= 0 {
		return nil
	}
	return &replayCache{slots: make([]replaySlot, min(1024, maxSlots)), maxSlots: maxSlots, lo: 1, maxBytes: maxBytes}
}

// add caches ev (committed, with its cursor); size is its stored size,
// what the byte budget counts. Cursors arrive in increasing order; a gap
// starts the cache afresh.
func (r *replayCache) add(ev *core.Event, size int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := ev.Cursor
	if r.hi >= r.lo && c != r.hi+1 {
		r.resetLocked()
	}
	if r.hi < r.lo {
		r.lo, r.hi = c, c-1
	}
	if r.hi-r.lo+1 >= int64(len(r.slots)) && len(r.slots) < r.maxSlots {
		r.growLocked()
	}
	n := int64(len(r.slots))
	for r.hi >= r.lo && (r.hi-r.lo+1 >= n || r.bytes+size > r.maxBytes) {
		r.evictLocked()
	}
	r.slots[c%n] = replaySlot{ev, size}
	r.bytes += size
	r.hi = c
}

// growLocked doubles the slots, so a quiet gateway holds few.
func (r *replayCache) growLocked() {
	next := make([]replaySlot, min(2*len(r.slots), r.maxSlots))
	for c := r.lo; c <= r.hi; c++ {
		next[c%int64(len(next))] = r.slots[c%int64(len(r.slots))]
	}
	r.slots = next
}

func (r *replayCache) evictLocked() {
	s := &r.slots[r.lo%int64(len(r.slots))]
	r.bytes -= s.size
	*s = replaySlot{}
	r.lo++
}

func (r *replayCache) resetLocked() {
	clear(r.slots)
	r.lo, r.hi, r.bytes = 1, 0, 0
}

// get returns the cached event at cursor, nil when it is not cached.
func (r *replayCache) get(cursor int64) *core.Event {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cursor < r.lo || cursor > r.hi {
		return nil
	}
	return r.slots[cursor%int64(len(r.slots))].ev
}

// reset forgets everything: deleted content must not linger in memory.
func (r *replayCache) reset() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.resetLocked()
	r.mu.Unlock()
}
