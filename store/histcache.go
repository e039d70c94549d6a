package store

import (
	"slices"
	"sync"

	"github.com/irisgate/irisgate/core"
)

// histCache holds the newest page of the lanes whose history was read
// lately, so a device opening a lane (history with no before) is answered
// without a query: the query, its row decoding and the driver's per-call
// goroutines were most of a history request's time.
//
// It is kept right by invalidation, never by patching a page:
//   - every write transaction notes what it may have changed in messages
//     (lanes, a chat's lanes, message ids, or everything) and, when it
//     ends, committed or not, drops the pages concerned and bumps gen;
//   - a page read from SQLite is kept only if gen did not move while it
//     was read, so a page from a snapshot older than a commit cannot
//     outlive that commit's invalidation.
//
// A commit is visible through the cache from its invalidation on, which
// comes before Write returns, so before any event of the commit is
// published. This holds because messages is written only through this
// Store's transactions: the data directory's lock keeps other gateways
// out, and commands opened beside a running one (WithoutMigration) write
// tokens and cron jobs, no messages.
type histCache struct {
	mu    sync.Mutex
	gen   uint64
	pages map[core.Lane]*histPage
	ids   map[string]core.Lane // id of each cached message → its page's lane
	bytes int
}

// histPage is the newest messages of a lane, oldest first.
type histPage struct {
	msgs []core.Message
	more bool // the lane has messages older than msgs[0]
	size int
}

// Bounds of the cache. A page is at most MaxHistory-sized requests of
// the gateway (200); one bigger than maxPageBytes is not kept.
const (
	histMaxPages     = 256
	histMaxBytes     = 4 << 20
	histMaxPageBytes = 256 << 10
	histMaxLimit     = 200
)

func newHistCache() *histCache {
	return &histCache{pages: map[core.Lane]*histPage{}, ids: map[string]core.Lane{}}
}

// get answers the newest limit messages of lane from its page, if the
// page holds enough: copies the caller may keep.
func (c *histCache) get(lane core.Lane, limit int) (ms []core.Message, more, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pages[lane]
	if p == nil {
		return nil, false, false
	}
	n := len(p.msgs)
	switch {
	case limit < n:
		return cloneMessages(p.msgs[n-limit:]), true, true
	case limit == n || !p.more:
		return cloneMessages(p.msgs), p.more, true
	}
	return nil, false, false // the page is shorter than asked and older ones exist
}

// begin is called before reading a page from SQLite; put keeps the page
// only if no transaction that may change messages ended since.
func (c *histCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put keeps a copy of lane's newest messages (oldest first), read when
// begin returned gen.
func (c *histCache) put(gen uint64, lane core.Lane, ms []core.Message, more bool) {
	size := 0
	for i := range ms {
		size += cachedSize(&ms[i])
	}
	if size > histMaxPageBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	c.dropLocked(lane)
	for len(c.pages) > 0 && (len(c.pages) >= histMaxPages || c.bytes+size > histMaxBytes) {
		for l := range c.pages { // any page: map order is as good as any
			c.dropLocked(l)
			break
		}
	}
	p := &histPage{msgs: cloneMessages(ms), more: more, size: size}
	c.pages[lane] = p
	c.bytes += size
	for i := range p.msgs {
		c.ids[p.msgs[i].ID] = lane
	}
}

func (c *histCache) dropLocked(lane core.Lane) {
	p := c.pages[lane]
	if p == nil {
		return
	}
	for i := range p.msgs {
		delete(c.ids, p.msgs[i].ID)
	}
	c.bytes -= p.size
	delete(c.pages, lane)
}

// histTouch is what a write transaction may have changed in messages.
type histTouch struct {
	any   bool // something was noted
	all   bool
	lanes []core.Lane
	chats []string // every lane of these chats
	ids   []string // messages changed in place, whatever their lane
}

func (t *histTouch) lane(l core.Lane) {
	t.any = true
	if !slices.Contains(t.lanes, l) {
		t.lanes = append(t.lanes, l)
	}
}

func (t *histTouch) chat(chatID string) { t.any, t.chats = true, append(t.chats, chatID) }
func (t *histTouch) id(id string)       { t.any, t.ids = true, append(t.ids, id) }
func (t *histTouch) everything()        { t.any, t.all = true, true }

// invalidate drops the pages a transaction may have changed; it is called
// when the transaction has ended, committed or rolled back.
func (c *histCache) invalidate(t *histTouch) {
	if !t.any {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if t.all {
		clear(c.pages)
		clear(c.ids)
		c.bytes = 0
		return
	}
	for _, l := range t.lanes {
		c.dropLocked(l)
	}
	for _, id := range t.ids {
		if l, ok := c.ids[id]; ok {
			c.dropLocked(l)
		}
	}
	if len(t.chats) > 0 {
		for l := range c.pages {
			if slices.Contains(t.chats, l.ChatID) {
				c.dropLocked(l)
			}
		}
	}
}

// cachedSize is about what a message holds in memory.
func cachedSize(m *core.Message) int {
	n := 160 + len(m.ID) + len(m.Lane.ChatID) + len(m.Lane.ThreadID) + len(m.Role) + len(m.Text) + len(m.Reasoning) +
		len(m.ReplyTo) + len(m.Model)
	for i := range m.Media {
		md := &m.Media[i]
		n += 160 + len(md.ID) + len(md.Kind) + len(md.Mime) + len(md.Filename) + len(md.MessageID)
	}
	if m.Runtime != nil {
		n += 96 + len(m.Runtime.Model) + len(m.Runtime.Cwd)
	}
	return n
}

// cloneMessages copies ms deeply enough that neither the cache nor its
// caller sees what the other changes.
func cloneMessages(ms []core.Message) []core.Message {
	out := slices.Clone(ms)
	for i := range out {
		m := &out[i]
		m.Media = slices.Clone(m.Media)
		if m.Runtime != nil {
			r := *m.Runtime
			r.ContextPct = clonePtr(r.ContextPct)
			r.Latency = clonePtr(r.Latency)
			r.Cost = clonePtr(r.Cost)
			m.Runtime = &r
		}
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
