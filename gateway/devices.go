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
	Channels         []core.Channel // shared: not to be changed
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
		w.PushRefused = ErrPushRefused.New(strings.Join(refused, "; "))
	}
	if err := g.countConn(d); err != nil {
		return nil, Welcome{}, err
	}
	counted := true
	loaded := hub.Loaded{Saves: g.hub.Saves()}
	defer func() {
		if counted {
			g.uncountConn(d.Token)
		}
	}()
	if err := g.seeDevice(ctx, d, &w, &loaded); err != nil {
		return nil, Welcome{}, err
	}
	c, old, err := g.hub.AddLoaded(ctx, d.ID, codec, g.greet, loaded)
	if err != nil {
		return nil, Welcome{}, err
	}
	c.Token = d.Token // before the connection serves a frame
	g.presence.changed()
	counted = false // Disconnect uncounts it now
	if old != nil {
		old.Close(hub.ErrReplaced)
	}
	g.cfg.Metrics.Connections.Set(float64(g.hub.Count()))
	// The head is read after registration: every frame above it reaches
	// this connection live, every frame at or below it can be synced.
	if w.SyncCursor, err = g.outboxHead(ctx); err == nil {
		w.Channels, err = g.dir.channels(ctx, g.st)
	}
	if err != nil {
		g.Disconnect(c)
		return nil, Welcome{}, err
	}
	return c, w, nil
}

// seeDevice records the hello's device row and reads what the welcome
// and the hub need of it (into w and l).
//
// The row is written in the group commit, where the hellos of a storm
// share transactions (a write transaction per hello was 10 % of its CPU,
// the LastPushed read 8.5 %) and read the row back in the statement that
// writes it. A hello that carries a push address waits for it: the
// registration is durable once hello.ack is sent. A hello that finds the
// log idle (commit.Log.Busy) would wait a commit of its own: it reads the
// row instead and queues the write without waiting for it (with the
// token list kept in memory, a handshake's p50 went 0.87 -> 0.70 ms
// here, irisgate bench --scenarios ratios --ratio-modes handshake), to
// linger for the next transaction (commit.Log.Linger: hellos one after
// another share one). That write changes nothing but the device's name,
// token and last-seen time, every later write of the device is committed
// after it (one log, in order) or is an upsert too, a push registration
// waits for it (RegisterPush), and a crash that loses it loses only what
// the device's next hello writes again.
func (g *Gateway) seeDevice(ctx context.Context, d Device, w *Welcome, l *hub.Loaded) error {
	seen := store.Device{ID: d.ID, Name: d.Name, FCMToken: d.FCMToken, NtfyTopic: d.NtfyTopic, TokenID: d.Token}
	hs, reads := g.st.(helloStateReader)
	if !reads || d.FCMToken != "" || d.NtfyTopic != "" || g.commits.Busy() {
		// A store that can also reads the device's proven cursors in that
		// statement, sparing the hub a query of its own (hub.AddLoaded).
		return g.commits.Commit(ctx, func(tx store.Tx) (err error) {
			if pt, ok := tx.(proofsSeer); ok {
				w.LastPushedCursor, l.Proven, err = pt.SeeDeviceProofs(seen)
				l.Ok = err == nil
				return err
			}
			w.LastPushedCursor, err = tx.SeeDevice(seen)
			return err
		}, nil)
	}
	var err error
	if w.LastPushedCursor, l.Proven, err = hs.HelloState(ctx, d.ID); err != nil {
		return err
	}
	l.Ok = true
	return g.commits.Linger(ctx, func(tx store.Tx) error {
		_, err := tx.SeeDevice(seen)
		if err != nil {
			g.log.Warn("recording a device's hello", "device", d.ID, "err", err)
		}
		return err
	})
}

// helloStateReader is a store that reads a known device's last pushed
// and proven cursors in one statement (SQLite's).
type helloStateReader interface {
	HelloState(ctx context.Context, deviceID string) (lastPushed int64, proven []core.CursorRange, err error)
}

// proofsSeer is a store.Tx whose SeeDevice can also return the device's
// proven cursors (SQLite's: its upsert returns the row).
type proofsSeer interface {
	SeeDeviceProofs(d store.Device) (lastPushed int64, proven []core.CursorRange, err error)
}

// outboxHead is the newest cursor committed: the commit log's, once it
// knows it (commit.Log.Head), or the store's, which it is told. Reading
// sqlite_sequence at every hello and sync was 3.4 % of a storm's CPU.
//
// A replica reads the store's: the other replicas' commits are not in its
// log, and a head behind them would end a device's sync short of frames
// it may never be sent live (they were delivered here before it came).
func (g *Gateway) outboxHead(ctx context.Context) (int64, error) {
	if g.cfg.SharedStore {
		return g.st.OutboxHead(ctx)
	}
	if h, ok := g.commits.Head(); ok {
		return h, nil
	}
	h, err := g.st.OutboxHead(ctx)
	if err == nil {
		g.commits.NoteHead(h)
	}
	return h, err
}

// Disconnect unregisters a connection.
func (g *Gateway) Disconnect(c *hub.Conn) {
	g.dropUploads(c) // partial files go with the connection
	g.uncountConn(c.Token)
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

// online is the status every device gets after its hello reply: one
// event for all, so each dialect encodes it once (Event.Shared), not on
// every handshake's path to its reply (a reflection of the payload, 10 us).
var online = &core.Event{Type: core.EvStatus, State: "online"}

// greet queues what a device gets right after its hello reply: the
// gateway's status, the streams running now and each lane's todo list.
// The hub runs it while it registers the connection, so the snapshot and
// the live events that follow it line up: a stream's updates never reach
// the device before its start.
func (g *Gateway) greet(c *hub.Conn) {
	now := time.Now().UnixMilli()
	c.SendEvent(online, 0)
	for _, ev := range g.turns.Snapshot(now) {
		c.SendEvent(ev, 0)
	}
}

// Sync replays to c, in cursor order, each outbox frame after cursor that
// the device is not proven to have and that was not queued on c already,
// through send. It returns the head it replayed up to and whether frames
// after cursor are missing: pruned already, or stored in a row that does
// not decode (a bad disk, a hand edit), which is skipped, logged, and
// does not stop the frames after it: the device, told truncated, reloads
// with history.
func (g *Gateway) Sync(ctx context.Context, c *hub.Conn, cursor int64, send func(*core.Event) error) (head int64, truncated bool, err error) {
	if head, err = g.outboxHead(ctx); err != nil {
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
		evs, skipped, err := g.replayEvents(ctx, c, cursors)
		if err != nil {
			return head, truncated, err
		}
		truncated = truncated || skipped
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
func (g *Gateway) replayEvents(ctx context.Context, c *hub.Conn, cursors []int64) (_ []*core.Event, skipped bool, _ error) {
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
		return evs, false, nil
	}
	stored := make(map[int64]*core.Event, len(missing))
	// A frame that does not decode is skipped, and the sync says frames
	// are missing (truncated): failing it would fail every later sync too,
	// until retention pruned the row.
	err := g.st.ScanEventsSkipping(ctx, missing[0]-1, missing[len(missing)-1], func(ev *core.Event) error {
		if _, want := slices.BinarySearch(missing, ev.Cursor); want {
			stored[ev.Cursor] = ev
		}
		return nil
	}, func(cursor int64, err *store.CorruptError) {
		if _, want := slices.BinarySearch(missing, cursor); want {
			skipped = true
			g.unreadable(cursor, err)
		}
	})
	if err != nil {
		return nil, false, err
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
	return out, skipped, nil
}

// unreadable logs an outbox row a sync skipped, once per row while the
// gateway runs (every sync from before it skips it again).
func (g *Gateway) unreadable(cursor int64, err error) {
	seen := g.skipped.seen(cursor)
	g.cfg.Metrics.Unreadable.Inc()
	if !seen {
		g.log.Error("sync skipped an outbox frame that does not decode: devices syncing past it are told truncated and reload with history",
			"cursor", cursor, "err", err)
	}
}

// skippedRows are the outbox rows a sync skipped and logged: each is
// logged once (up to 1024 of them; past that, none more).
type skippedRows struct {
	mu   sync.Mutex
	rows map[int64]bool
}

// seen reports whether cursor was logged already, and notes it.
func (s *skippedRows) seen(cursor int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[int64]bool{}
	}
	seen := s.rows[cursor] || len(s.rows) >= 1024
	if !seen {
		s.rows[cursor] = true
	}
	return seen
}
