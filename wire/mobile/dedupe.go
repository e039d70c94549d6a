package mobile

import (
	"container/list"
	"sync"
	"time"
)

// Idempotency: the "<chat_id>:<id>" of text, audio and whole media files
// is remembered for about DedupeTTL, in a bounded LRU of DedupeKeys keys.
const (
	DedupeTTL  = 600 * time.Second
	DedupeKeys = 4000
)

// dedupe is a bounded set of recently seen keys. A key is claimed before
// its frame is handled and released when handling failed, so a resend
// after a failure goes through while a resend of a handled frame does not.
type dedupe struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	m   map[string]*list.Element
	l   *list.List // oldest first
	now func() time.Time
}

type dedupeEntry struct {
	key string
	at  time.Time
}

func newDedupe(ttl time.Duration, max int) *dedupe {
	return &dedupe{ttl: ttl, max: max, m: map[string]*list.Element{}, l: list.New(), now: time.Now}
}

// claim reports whether key is new (and then remembers it); false means
// a duplicate within the window.
func (d *dedupe) claim(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.expire(now)
	if _, ok := d.m[key]; ok {
		return false
	}
	d.m[key] = d.l.PushBack(dedupeEntry{key, now})
	for d.l.Len() > d.max {
		e := d.l.Front()
		d.l.Remove(e)
		delete(d.m, e.Value.(dedupeEntry).key)
	}
	return true
}

// seen reports whether key was claimed within the window.
func (d *dedupe) seen(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(d.now())
	_, ok := d.m[key]
	return ok
}

// release forgets a claimed key.
func (d *dedupe) release(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.m[key]; ok {
		d.l.Remove(e)
		delete(d.m, key)
	}
}

func (d *dedupe) expire(now time.Time) {
	for e := d.l.Front(); e != nil; e = d.l.Front() {
		if now.Sub(e.Value.(dedupeEntry).at) < d.ttl {
			return
		}
		d.l.Remove(e)
		delete(d.m, e.Value.(dedupeEntry).key)
	}
}

func (d *dedupe) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.l.Len()
}
