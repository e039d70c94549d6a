package store

import (
	"slices"
	"sync"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// convCache holds the conversations of the lanes whose turns ran lately:
// every turn reads its lane's, and the query was 5 % of the durable
// benchmark's CPU (issue 17) for rows that only grow at the end of a turn.
//
// It is kept right as settingsCache is: a transaction that deletes from a
// lane's conversation (/new, /undo, deleting messages or the chat) drops
// the lane when it ends, committed or not, and bumps gen; a conversation
// read from SQLite is kept only if gen did not move while it was read.
// What a committed transaction appended is added to a lane held, so a
// conversation that grows a turn at a time is read from SQLite once. The
// conversation table is written only through this Store's transactions
// (the data directory's lock keeps other gateways out; commands opened
// beside a running gateway write none), so nothing else makes it stale.
type convCache struct {
	mu    sync.Mutex
	gen   uint64
	lanes map[core.Lane]*convLane
	bytes int // of the stored bodies held, in all
}

type convLane struct {
	gen     uint64 // c.gen when it was read from SQLite
	entries []record.ConversationEntry
	bytes   []int // each entry's stored size, for the bound
	total   int
}

// convMaxBytes bounds what the cache holds (by the entries' stored size):
// past it the cache starts over. A lane bigger than convMaxLane is not
// held at all (a long agent session with large tool outputs is read from
// SQLite each turn, as before).
const (
	convMaxBytes = 32 << 20
	convMaxLane  = 4 << 20
)

// get returns a copy of lane's entries, ok false when it is not held.
func (c *convCache) get(lane core.Lane) ([]record.ConversationEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.lanes[lane]
	if !ok {
		return nil, false
	}
	out := make([]record.ConversationEntry, len(l.entries))
	for i, e := range l.entries {
		out[i] = cloneEntry(e)
	}
	return out, true
}

func (c *convCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put keeps lane's entries (sizes are their stored bodies'), read when
// begin returned gen.
func (c *convCache) put(gen uint64, lane core.Lane, entries []record.ConversationEntry, sizes []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	l := &convLane{gen: gen}
	for i, e := range entries {
		l.add(cloneEntry(e), sizes[i])
	}
	if l.total > convMaxLane {
		return
	}
	c.drop(lane)
	c.hold(lane, l)
}

func (c *convCache) hold(lane core.Lane, l *convLane) {
	if c.lanes == nil || c.bytes+l.total > convMaxBytes {
		c.lanes, c.bytes = map[core.Lane]*convLane{}, 0
	}
	c.lanes[lane] = l
	c.bytes += l.total
}

func (c *convCache) drop(lane core.Lane) {
	if l, ok := c.lanes[lane]; ok {
		c.bytes -= l.total
		delete(c.lanes, lane)
	}
}

// add appends an entry, keeping the newest maxConversation as the read
// does.
func (l *convLane) add(e record.ConversationEntry, size int) {
	l.entries = append(l.entries, e)
	l.bytes = append(l.bytes, size)
	l.total += size
	if over := len(l.entries) - maxConversation; over > 0 {
		for _, b := range l.bytes[:over] {
			l.total -= b
		}
		l.entries = slices.Delete(l.entries, 0, over)
		l.bytes = slices.Delete(l.bytes, 0, over)
	}
}

// committing is called just before a transaction that touched the
// conversation commits, and returns its mark for end: a lane read from
// SQLite after it may hold the transaction's entries already.
func (c *convCache) committing(t *convTouch) uint64 {
	if t.empty() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	return c.gen
}

// end applies what a transaction did, once it has ended; mark is what
// committing returned (0 when it did not commit).
func (c *convCache) end(t *convTouch, committed bool, mark uint64) {
	if t.empty() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, l := range t.lanes {
		c.drop(l)
	}
	for _, chat := range t.chats {
		for l := range c.lanes {
			if l.ChatID == chat {
				c.drop(l)
			}
		}
	}
	for _, a := range t.appended {
		l, ok := c.lanes[a.lane]
		if !ok {
			continue
		}
		if !committed || l.gen >= mark || slices.Contains(t.lanes, a.lane) || slices.Contains(t.chats, a.lane.ChatID) {
			c.drop(a.lane)
			continue
		}
		c.bytes -= l.total
		l.add(a.entry, a.size)
		if l.total > convMaxLane {
			delete(c.lanes, a.lane)
			continue
		}
		c.hold(a.lane, l)
	}
}

// convTouch is what a write transaction did to the conversation table:
// the entries it appended, in order, and the lanes and chats it deleted
// from.
type convTouch struct {
	appended []convAppend
	lanes    []core.Lane
	chats    []string
}

func (t *convTouch) empty() bool {
	return len(t.appended) == 0 && len(t.lanes) == 0 && len(t.chats) == 0
}

type convAppend struct {
	lane  core.Lane
	entry record.ConversationEntry
	size  int
}

// undo forgets the entries appended since mark (a savepoint that failed),
// and drops their lanes: what the cache holds of them is not known to be
// what SQLite kept.
func (t *convTouch) undo(mark int) {
	for _, a := range t.appended[mark:] {
		t.lanes = append(t.lanes, a.lane)
	}
	t.appended = t.appended[:mark]
}

// cloneEntry copies what an entry points to, so neither the cache nor a
// caller sees what the other changes.
func cloneEntry(e record.ConversationEntry) record.ConversationEntry {
	e.ToolCalls = slices.Clone(e.ToolCalls)
	e.Attachments = slices.Clone(e.Attachments)
	return e
}
