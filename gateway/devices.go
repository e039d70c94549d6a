package gateway

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// Device is who says hello.
type Device struct {
	ID        string
	Name      string
	FCMToken  string
	NtfyTopic string
	// Token names the token the device came with (its id, never the
	// secret): limits a client could reset with a new device id are
	// counted per token.
	Token string
}

// Welcome is what a device learns when it connects.
type Welcome struct {
	Channels         []core.Channel
	SyncCursor       int64
	LastPushedCursor int64
	// PushRefused, when set, says why a push address the hello carried
	// was not kept (an ntfy topic ntfy would refuse): the connection is
	// made all the same, and the dialect tells the device.
	PushRefused *core.Error
}

// Connect registers an authenticated device's connection and queues its
// greeting (see greet). A connection the device already had is closed
// with hub.ErrReplaced. The caller queues its hello reply with SendFirst,
// which puts it before the greeting.
func (g *Gateway) Connect(ctx context.Context, d Device, codec hub.Codec) (*hub.Conn, Welcome, error) {
	var w Welcome
	var refused []string
	if err := checkPushAddresses(d.FCMToken, ""); err != nil {
		d.FCMToken, refused = "", append(refused, err.Message)
	}
	if err := checkPushAddresses("", d.NtfyTopic); err != nil {
		d.NtfyTopic, refused = "", append(refused, err.Message)
	}
	if len(refused) > 0 {
		w.PushRefused = core.Errorf(core.CodeUnsupported, "%s", strings.Join(refused, "; "))
	}
	if err := g.st.SeeDevice(ctx, store.Device{ID: d.ID, Name: d.Name, FCMToken: d.FCMToken, NtfyTopic: d.NtfyTopic}); err != nil {
		return nil, Welcome{}, err
	}
	c, old, err := g.hub.Add(ctx, d.ID, codec, g.greet)
	if err != nil {
		return nil, Welcome{}, err
	}
	c.Token = d.Token // before the connection serves a frame
	g.presence.changed()
	if old != nil {
		old.Close(hub.ErrReplaced)
	}
	g.cfg.Metrics.Connections.Set(float64(g.hub.Count()))
	// The head is read after registration: every frame above it reaches
	// this connection live, every frame at or below it can be synced.
	if w.SyncCursor, err = g.st.OutboxHead(ctx); err == nil {
		if w.Channels, err = g.st.Channels(ctx); err == nil {
			w.LastPushedCursor, err = g.st.LastPushed(ctx, d.ID)
		}
	}
	if err != nil {
		g.Disconnect(c)
		return nil, Welcome{}, err
	}
	return c, w, nil
}

// Disconnect unregisters a connection.
func (g *Gateway) Disconnect(c *hub.Conn) {
	g.dropUploads(c) // partial files go with the connection
	g.hub.Remove(c)
	g.cfg.Metrics.Connections.Set(float64(g.hub.Count()))
	g.presence.changed()
}

// Presence returns a channel closed at the next connect or disconnect of
// any device: a waiter takes it, checks hub.Online, and waits on it.
func (g *Gateway) Presence() <-chan struct{} { return g.presence.next() }

// presence signals connects and disconnects to those waiting for one.
type presence struct {
	mu sync.Mutex
	ch chan struct{}
}

func (p *presence) next() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
	return p.ch
}

func (p *presence) changed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}

// greet queues what a device gets right after its hello reply: the
// gateway's status, the streams running now and each lane's todo list.
// The hub runs it while it registers the connection, so the snapshot and
// the live events that follow it line up: a stream's updates never reach
// the device before its start.
func (g *Gateway) greet(c *hub.Conn) {
	now := time.Now().UnixMilli()
	c.SendEvent(&core.Event{Type: core.EvStatus, State: "online", TS: now}, 0)
	for _, ev := range g.turns.Snapshot(now) {
		c.SendEvent(ev, 0)
	}
}

// Sync replays to c, in cursor order, each outbox frame after cursor that
// the device is not proven to have and that was not queued on c already,
// through send. It returns the head it
// replayed up to and whether frames after cursor were already pruned.
func (g *Gateway) Sync(ctx context.Context, c *hub.Conn, cursor int64, send func(*core.Event) error) (head int64, truncated bool, err error) {
	if head, err = g.st.OutboxHead(ctx); err != nil {
		return 0, false, err
	}
	floor, err := g.st.OutboxFloor(ctx)
	if err != nil {
		return 0, false, err
	}
	if cursor < 0 {
		cursor = 0
	}
	truncated = cursor < floor
	const page = 1000
	for after := cursor; after < head; {
		cursors, err := g.st.OutboxCursors(ctx, after, head, page)
		if err != nil {
			return head, truncated, err
		}
		if len(cursors) == 0 {
			break
		}
		evs, err := g.replayEvents(ctx, c, cursors)
		if err != nil {
			return head, truncated, err
		}
		for _, ev := range evs {
			if ev.NotTo == c.DeviceID {
				continue
			}
			if err := send(ev); err != nil {
				return head, truncated, err
			}
		}
		after = cursors[len(cursors)-1]
	}
	return head, truncated, nil
}

// replayEvents returns the events at cursors that c does not have (Has):
// from the replay cache, or decoded from the outbox. A returned event may
// be shared (cached): it has its cursor and must not be changed.
func (g *Gateway) replayEvents(ctx context.Context, c *hub.Conn, cursors []int64) ([]*core.Event, error) {
	evs := make([]*core.Event, 0, len(cursors))
	var missing []int64
	for _, cur := range cursors {
		if c.Has(cur) {
			continue
		}
		ev := g.commits.Replay(cur)
		if ev == nil {
			missing = append(missing, cur)
		}
		evs = append(evs, ev) // nil: filled in below
	}
	if len(missing) == 0 {
		return evs, nil
	}
	stored := make(map[int64]*core.Event, len(missing))
	// A frame that does not decode fails the sync (the device is told
	// internal, the log names the cursor): skipping it would leave a hole
	// the device could never learn of.
	err := g.st.ScanEvents(ctx, missing[0]-1, missing[len(missing)-1], func(ev *core.Event) error {
		if _, want := slices.BinarySearch(missing, ev.Cursor); want {
			stored[ev.Cursor] = ev
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := evs[:0]
	mi := 0
	for _, ev := range evs {
		if ev == nil {
			ev = stored[missing[mi]] // nil when deleted meanwhile
			mi++
		}
		if ev != nil {
			out = append(out, ev)
		}
	}
	return out, nil
}
