package store

import (
	"sync"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// settingsCache holds the lanes' settings read lately: every turn reads
// its lane's (the model, the approvals), and the query was 4 % of the
// durable benchmark's CPU (issue 17) for rows that change only when a
// person types /model or the like.
//
// It is kept right as histCache is, by invalidation: a transaction that
// writes a lane's settings or deletes a chat drops their entries when it
// ends, committed or not, and bumps gen; a row read from SQLite is kept
// only if gen did not move while it was read. lane_settings is written
// only through this Store's transactions (the data directory's lock keeps
// other gateways out; commands opened beside a running gateway write no
// settings), so nothing else can make an entry stale.
type settingsCache struct {
	mu    sync.Mutex
	gen   uint64
	lanes map[core.Lane]record.LaneSettings
}

// settingsMax bounds the entries: past it the cache starts over, which
// costs a query a lane.
const settingsMax = 4096

func (c *settingsCache) get(lane core.Lane) (record.LaneSettings, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ls, ok := c.lanes[lane]
	return cloneSettings(ls), ok
}

func (c *settingsCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put keeps lane's settings, read when begin returned gen.
func (c *settingsCache) put(gen uint64, lane core.Lane, ls record.LaneSettings) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.lanes == nil || len(c.lanes) >= settingsMax {
		c.lanes = map[core.Lane]record.LaneSettings{}
	}
	c.lanes[lane] = cloneSettings(ls)
}

// invalidate drops what a transaction may have changed; it is called
// when the transaction has ended.
func (c *settingsCache) invalidate(t *settingsTouch) {
	if len(t.lanes) == 0 && len(t.chats) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, l := range t.lanes {
		delete(c.lanes, l)
	}
	if len(t.chats) > 0 {
		for l := range c.lanes {
			for _, chat := range t.chats {
				if l.ChatID == chat {
					delete(c.lanes, l)
				}
			}
		}
	}
}

// settingsTouch is what a write transaction may have changed in
// lane_settings.
type settingsTouch struct {
	lanes []core.Lane
	chats []string // every lane of these chats
}

// cloneSettings copies what ls points to, so neither the cache nor its
// caller sees what the other changes.
func cloneSettings(ls record.LaneSettings) record.LaneSettings {
	if ls.ShowReasoning != nil {
		b := *ls.ShowReasoning
		ls.ShowReasoning = &b
	}
	return ls
}
