package gateway

import (
	"context"
	"sync"

	"github.com/irisgate/irisgate/core"
)

// directory is the channel directory held in memory for the lookup every
// request of a lane makes (resolveLane): reading it from the store on each
// message.send was 6.1 % of a burst's CPU (issue 17), and a flood of sends
// to unknown chats cost a query each.
//
// It is loaded whole on first use and then kept right by the committed
// channel events, applied on the committer goroutine as soon as their
// transaction is durable and before any of them is published (commit's
// AfterCommit): a device that hears of a change and sends at once is
// judged by the directory it heard of. Every change of a channel is such
// an event, since every write goes through the group commit with its
// event: channel.created (a device's channel or thread, an auto-thread, a
// Hermes Mobile lane), channel.renamed (an edit, the default moving and
// the former default's announcement, an auto-title, automation on or off)
// and channel.deleted (with its threads, which the event does not list).
//
// Nothing else writes channels while a gateway serves: admin commands and
// cron read the directory only, and a second gateway cannot share the
// state (SQLite's data-directory lock, PostgreSQL's serving lock) unless
// both are replicas: then each applies the channel events the others
// commit too, as the fleet reads them from the store (Gateway.Remote).
type directory struct {
	mu sync.Mutex
	// byID is every channel and thread by chat id, icons left out (lanes
	// need none, and the directory's icons may hold MaxDirectoryIcons);
	// nil until loaded, and again when an event left it unsure.
	byID map[string]core.Channel
	def  string // the default channel's chat id
	// gen counts applied events: a load that began before one may hold
	// what the event changed, and is not kept.
	gen uint64
}

// view runs fn on the directory: the one held, or one read from st now
// (and held from then on, unless a change came while it was read).
func (d *directory) view(ctx context.Context, st DirectoryStore, fn func(byID map[string]core.Channel, def string)) error {
	d.mu.Lock()
	if d.byID != nil {
		defer d.mu.Unlock()
		fn(d.byID, d.def)
		return nil
	}
	gen := d.gen
	d.mu.Unlock()
	chs, err := st.Channels(ctx)
	if err != nil {
		return err
	}
	byID := make(map[string]core.Channel, len(chs))
	def := ""
	for _, c := range chs {
		c.Icon = ""
		byID[c.ChatID] = c
		if c.IsDefault {
			def = c.ChatID // the last, as resolveLane always took
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen == gen && d.byID == nil {
		d.byID, d.def = byID, def
	}
	fn(byID, def)
	return nil
}

// apply brings the directory up to date with a committed event.
func (d *directory) apply(ev *core.Event) {
	switch ev.Type {
	case core.EvChannelCreated, core.EvChannelRenamed, core.EvChannelDeleted:
	default:
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.byID == nil {
		return
	}
	switch {
	case ev.Type == core.EvChannelDeleted:
		delete(d.byID, ev.ChatID)
		for id, c := range d.byID {
			if c.ParentChatID == ev.ChatID {
				delete(d.byID, id)
			}
		}
		if d.def == ev.ChatID {
			d.byID = nil // the default is never deleted: unsure, read it again
		}
	case ev.Channel == nil:
		d.byID = nil
	default:
		c := *ev.Channel
		c.Icon = ""
		if c.IsDefault && d.def != c.ChatID {
			// The store moved the flag (Tx.SetDefault); the former
			// default's own event comes after this one.
			if old, ok := d.byID[d.def]; ok {
				old.IsDefault = false
				d.byID[d.def] = old
			}
			d.def = c.ChatID
		} else if !c.IsDefault && d.def == c.ChatID {
			d.byID = nil // the default lost its flag to none we know of
			return
		}
		d.byID[c.ChatID] = c
	}
}
