// Package hub indexes the live connections and fans events out to them.
// Each connection has a bounded queue drained by its own writer; the hub
// never blocks on a slow device.
package hub

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/core"
)

// Codec turns events into the frames of one dialect.
type Codec interface {
	// Frames returns the frames this connection gets for ev (none when the
	// event is not for it). reqID is the request id when ev answers a
	// request of this connection, else 0. The slice may be shared by
	// every connection of the dialect: the hub copies, never modifies, it.
	Frames(ev *core.Event, reqID int64) []Out
}

// Limits of a connection's queue.
type Limits struct {
	MaxItems int
	MaxBytes int
}

// DefaultLimits hold a long stream for a device on a slow link while
// bounding memory at a few MiB per device.
var DefaultLimits = Limits{MaxItems: 4096, MaxBytes: 8 << 20}

// Conn is one live connection of a device.
type Conn struct {
	ID       uint64
	DeviceID string
	// Token identifies the token the connection authenticated with, for
	// limits that a device id (chosen by the client) must not reset.
	Token string
	codec Codec
	q     *queue
	dev   *device
	// proofs: the device proves what it receives (Iris), so the cursors
	// it needs no frame for are counted as covered (TrackProofs).
	proofs atomic.Bool

	// Proof of delivery. A frame read from the device proves nothing
	// about the frames written to it (TCP orders each direction on its
	// own: the device may have sent it before ours arrived). What proves
	// is the answer to a WebSocket Ping written after them: a peer
	// answers a ping only once it has read everything before it.
	mu      sync.Mutex
	written []int64 // cursors written and not yet covered by a ping
	covered []int64 // cursors written before the ping in flight
}

// Take waits for queued frames, for a writer that stays alone with the
// connection (tests); a connection given Drive is drained with Next.
func (c *Conn) Take(ctx context.Context, buf []Out) ([]Out, error) { return c.q.take(ctx, buf) }

// Drive has start run (in a new goroutine) whenever frames wait and no
// writer is running, and when the connection closes. The writer it starts
// calls Next until Next gives neither frames nor an error.
func (c *Conn) Drive(start func()) { c.q.drive(start) }

// DriveHere is Drive for a caller that runs the writer due now itself:
// true means frames wait (or the connection closed) and the caller must
// call start, as if Drive had started it. The hello reply then leaves
// from the goroutine that made it, without waiting for another to be
// scheduled.
func (c *Conn) DriveHere(start func()) bool { return c.q.driveHere(start) }

// Hold is called by the read loop before it handles a frame, Release
// after: the replies queued meanwhile with SendHere are left for the
// loop to write (Release true: run the writer, as DriveHere's caller
// does), which spares a round trip a goroutine start and the wake of
// another thread. Frames queued with Send start a writer as ever.
func (c *Conn) Hold() { c.q.hold() }

// Writing reports whether a writer runs and the connection is open: the
// writer calls Next again, and writes what that gives, before its turn
// ends. (Once the connection is closed, Next gives the writer the close,
// after which it writes nothing more.)
func (c *Conn) Writing() bool { return c.q.writing() }

// Release ends Hold; true means frames wait and the caller must run the
// writer itself.
func (c *Conn) Release() bool { return c.q.release() }

// Next returns the queued frames without waiting. No frames and a nil
// error end the writer's turn; an error means the connection is closed
// and everything queued before the close has been returned.
func (c *Conn) Next(buf []Out) ([]Out, error) { return c.q.next(buf) }

// Wrote records that a batch left for the socket (every byte handed to
// the kernel). It reports whether written frames wait for a proof.
func (c *Conn) Wrote(batch []Out) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range batch {
		if o.Cursor != 0 {
			c.written = append(c.written, o.Cursor)
		}
	}
	return len(c.written) > 0
}

// Cover is called just before a ping is written: the frames written so
// far are the ones its answer proves. It returns how many there are.
func (c *Conn) Cover() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.covered = append(c.covered, c.written...)
	c.written = c.written[:0]
	return len(c.covered)
}

// Proved records the answer to the ping in flight: the frames it covered
// have reached the device.
func (c *Conn) Proved() {
	c.mu.Lock()
	cov := c.covered
	c.covered = nil
	c.mu.Unlock()
	if len(cov) > 0 {
		c.dev.prove(cov)
	}
}

// Pending reports whether written frames wait for a ping to cover them.
func (c *Conn) Pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.written) > 0
}

// Unproved forgets the ping in flight, unanswered: its frames stay
// unproven and sync replays them.
func (c *Conn) Unproved() {
	c.mu.Lock()
	c.covered = nil
	c.mu.Unlock()
}

// Send queues a frame for this connection alone; false means the queue
// overflowed and the connection is being closed.
func (c *Conn) Send(o Out) bool { return c.q.push(o) }

// SendHere is Send for a reply of the read loop to the frame it handles:
// while the loop holds the connection (Hold), no writer is started for
// it, the loop writes it at Release. From any other goroutine, or outside
// Hold, it is Send: at worst a reply waits for the end of the frame the
// loop is handling.
func (c *Conn) SendHere(o Out) bool { return c.q.pushHere(o) }

// SendWait queues a frame, waiting for room (for replays and pulls). A
// replayed frame (one per cursor) that reached the connection live since
// the replay looked is not queued again: a sync decides what to replay a
// page at a time, and frames keep arriving meanwhile (with replicas, the
// others' frames read from the store arrive late).
func (c *Conn) SendWait(ctx context.Context, o Out) error {
	if o.Cursor != 0 && c.q.sentHas(o.Cursor) {
		return nil
	}
	return c.q.pushWait(ctx, o)
}

// Close stops the connection's queue; its writer ends after the frames
// already queued.
func (c *Conn) Close(err error) { c.q.close(err) }

// Err is why the connection's queue closed, nil while it is open.
func (c *Conn) Err() error { return c.q.err() }

// Has reports whether the frame at cursor needs no replay on this
// connection: the device is proven to have it, or it was queued on this
// very connection, ahead of anything a replay would queue now. (If the
// connection fails before the device reads it, it is unproven and the
// next connection's sync replays it.)
func (c *Conn) Has(cursor int64) bool { return c.q.sentHas(cursor) || c.dev.has(cursor) }

// TrackProofs marks a connection whose device proves its frames (and
// syncs): from now on an outbox frame it gets nothing of (another
// device's own read receipt, an event its dialect does not carry) counts
// as proven and sent, so its sets stay one range instead of growing a
// hole per such frame.
func (c *Conn) TrackProofs() { c.proofs.Store(true) }

// skip counts cursor, which c gets nothing of, as covered.
func (c *Conn) skip(cursor int64) {
	if cursor == 0 || !c.proofs.Load() {
		return
	}
	c.q.skip(cursor)
	c.dev.prove([]int64{cursor})
}

// Proven reports whether the device is proven to have the frame at cursor.
func (c *Conn) Proven(cursor int64) bool { return c.dev.has(cursor) }

// device is what connections of one device share: its proven set.
type device struct {
	mu     sync.Mutex
	proven Intervals
	dirty  bool
	conns  int
	// floor is the lowest cursor retention keeps (DropBelow): a frame
	// below it that was written before the prune and proven after it
	// is not added back.
	floor  int64
	saving sync.Mutex    // one save at a time, so an older set never lands last
	notify chan struct{} // made by a waiter (WaitProven), closed by the next proof
}

func (d *device) prove(cursors []int64) {
	d.mu.Lock()
	for _, c := range cursors {
		if c >= d.floor {
			d.proven.Add(c, c)
		}
	}
	d.dirty = true
	if d.notify != nil {
		close(d.notify)
		d.notify = nil
	}
	d.mu.Unlock()
}

func (d *device) has(cursor int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.proven.Has(cursor)
}

// ProofStore keeps what each device is proven to have between its
// connections (package store implements it).
type ProofStore interface {
	// LoadProofs returns a device's proven cursors; none for a device
	// never seen.
	LoadProofs(ctx context.Context, deviceID string) ([]core.CursorRange, error)
	// SaveProofs replaces a device's proven cursors.
	SaveProofs(ctx context.Context, deviceID string, proven []core.CursorRange) error
}

// Hub is the set of live connections.
type Hub struct {
	ps     ProofStore
	log    *slog.Logger
	limits Limits
	nextID atomic.Uint64

	// relay and presence, when set (SetRelay, SetPresence), link the hub
	// to other replicas of the gateway (package fleet).
	relay    Relay
	presence Presence

	mu      sync.RWMutex
	conns   map[uint64]*Conn
	byDev   map[string]*Conn
	devices map[string]*device
	floor   int64 // the outbox's floor (DropBelow), under mu
	// saves counts the proof sets saved (saveDevice): a set read before
	// a save may be older than the store's (AddLoaded).
	saves atomic.Uint64
}

// New makes a hub that keeps the devices' proofs in ps.
func New(ps ProofStore, log *slog.Logger, limits Limits) *Hub {
	return &Hub{
		ps: ps, log: log, limits: limits,
		conns:   make(map[uint64]*Conn),
		byDev:   make(map[string]*Conn),
		devices: make(map[string]*device),
	}
}

// Relay takes what Publish is given, to hand it to Deliver in the order
// the devices must see it, with the frames other replicas commit (package
// fleet). It must not block on any device.
type Relay interface {
	Publish(ev *core.Event)
}

// Presence knows the devices connected to other replicas.
type Presence interface {
	// Elsewhere reports whether deviceID is connected to another replica.
	Elsewhere(deviceID string) bool
	// Changed is told that deviceID connected here or left; it must not
	// block nor call the hub (it runs under the hub's lock).
	Changed(deviceID string)
}

// SetRelay puts r between Publish and the devices. Call it before the hub
// is used.
func (h *Hub) SetRelay(r Relay) { h.relay = r }

// SetPresence makes Reachable count the devices of other replicas and
// tells p of this hub's. Call it before the hub is used.
func (h *Hub) SetPresence(p Presence) { h.presence = p }

// Add registers a connection of deviceID. A connection the device already
// had is returned so the caller can close it: the newer one wins. greet,
// when set, queues the connection's first frames; it runs before any
// event can reach the connection, so nothing published meanwhile (a
// stream's update, say) comes before them.
func (h *Hub) Add(ctx context.Context, deviceID string, codec Codec, greet func(*Conn)) (*Conn, *Conn, error) {
	return h.AddLoaded(ctx, deviceID, codec, greet, Loaded{})
}

// Loaded is a device's proven cursors as its hello read them from the
// store, in the statement that recorded the hello, so that Add need not
// read them again (a query per hello was 9 % of a handshake's CPU).
type Loaded struct {
	Proven []core.CursorRange
	// Saves is Saves() before they were read; Ok says they were read.
	Saves uint64
	Ok    bool
}

// Saves counts the proof sets saved so far; a Loaded read after it is at
// least as new as the store's set was then.
func (h *Hub) Saves() uint64 { return h.saves.Load() }

// AddLoaded is Add with the device's proven cursors already read (l.Ok).
// They are used only if no set was saved since Saves was l.Saves: a
// connection of the device that ended meanwhile may have saved a newer
// one, and then the store is read as Add does. (A device still connected,
// or whose last set is still being saved, is shared, never loaded.)
func (h *Hub) AddLoaded(ctx context.Context, deviceID string, codec Codec, greet func(*Conn), l Loaded) (*Conn, *Conn, error) {
	h.mu.Lock()
	d := h.devices[deviceID]
	h.mu.Unlock()
	if d == nil {
		proven := l.Proven
		if !l.Ok || h.saves.Load() != l.Saves {
			var err error
			if proven, err = h.ps.LoadProofs(ctx, deviceID); err != nil {
				return nil, nil, err
			}
		}
		d = &device{proven: FromRanges(proven)}
		h.mu.RLock()
		d.floor = h.floor
		d.proven.DropBelow(h.floor)
		h.mu.RUnlock()
	}
	c := &Conn{ID: h.nextID.Add(1), DeviceID: deviceID, codec: codec, q: newQueue(h.limits.MaxItems, h.limits.MaxBytes)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.devices[deviceID]; cur != nil {
		d = cur // loaded meanwhile by a racing hello of the same device
	} else {
		h.devices[deviceID] = d
	}
	c.dev = d
	d.conns++
	old := h.byDev[deviceID]
	if old == nil && h.presence != nil {
		h.presence.Changed(deviceID)
	}
	h.conns[c.ID] = c
	h.byDev[deviceID] = c
	if greet != nil {
		greet(c)
	}
	return c, old, nil
}

// Remove unregisters a connection and saves its device's proofs.
func (h *Hub) Remove(c *Conn) {
	h.mu.Lock()
	delete(h.conns, c.ID)
	if h.byDev[c.DeviceID] == c {
		delete(h.byDev, c.DeviceID)
		if h.presence != nil {
			h.presence.Changed(c.DeviceID)
		}
	}
	c.dev.conns--
	h.mu.Unlock()
	h.saveDevice(c.DeviceID, c.dev)
	// The device is forgotten only once its proofs are saved: a reconnect
	// meanwhile shares them instead of loading an older set.
	h.mu.Lock()
	if c.dev.conns == 0 && h.devices[c.DeviceID] == c.dev {
		delete(h.devices, c.DeviceID)
	}
	h.mu.Unlock()
}

// Online reports whether a device has a live connection.
func (h *Hub) Online(deviceID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.byDev[deviceID] != nil
}

// Reachable reports whether a device is connected here or, with replicas
// (SetPresence), to another one: a push would wake it for nothing.
func (h *Hub) Reachable(deviceID string) bool {
	return h.Online(deviceID) || h.presence != nil && h.presence.Elsewhere(deviceID)
}

// Count is the number of live connections.
func (h *Hub) Count() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.conns)
}

// DropBelow forgets, in every live device's proof set and connection's
// sent set, the cursors below floor: retention pruned those frames, and a
// sync from before the floor reloads history instead. Sets loaded later
// are cut as they load.
func (h *Hub) DropBelow(floor int64) {
	h.mu.Lock()
	if floor <= h.floor {
		h.mu.Unlock()
		return
	}
	h.floor = floor
	devs := make([]*device, 0, len(h.devices))
	for _, d := range h.devices {
		devs = append(devs, d)
	}
	conns := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, d := range devs {
		d.mu.Lock()
		d.floor = max(d.floor, floor)
		if d.proven.Len() > 0 && d.proven.r[0].lo < floor {
			d.proven.DropBelow(floor)
			d.dirty = true
		}
		d.mu.Unlock()
	}
	for _, c := range conns {
		c.q.dropBelow(floor)
	}
}

// Each calls fn for every live connection.
func (h *Hub) Each(fn func(*Conn)) {
	h.mu.RLock()
	cs := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		cs = append(cs, c)
	}
	h.mu.RUnlock()
	for _, c := range cs {
		fn(c)
	}
}

// Run saves dirty proof sets every interval until ctx ends, then once more.
func (h *Hub) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.saveAll()
			return
		case <-t.C:
			h.saveAll()
		}
	}
}

func (h *Hub) saveAll() {
	h.mu.RLock()
	devs := make(map[string]*device, len(h.devices))
	for id, d := range h.devices {
		devs[id] = d
	}
	h.mu.RUnlock()
	for id, d := range devs {
		h.saveDevice(id, d)
	}
}

func (h *Hub) saveDevice(id string, d *device) {
	d.saving.Lock()
	defer d.saving.Unlock()
	d.mu.Lock()
	if !d.dirty {
		d.mu.Unlock()
		return
	}
	v := d.proven.Ranges()
	d.dirty = false
	d.mu.Unlock()
	if err := h.ps.SaveProofs(context.Background(), id, v); err != nil {
		h.log.Warn("saving proven cursors", "device", id, "err", err)
	}
	// Counted once it is in the store (or failed): before the device
	// leaves h.devices, so AddLoaded sees either the device or the count.
	h.saves.Add(1)
}

// SendEvent queues an event for this connection alone, as an answer to
// request reqID (0: none).
func (c *Conn) SendEvent(ev *core.Event, reqID int64) bool {
	for _, o := range c.codec.Frames(ev, reqID) {
		o.Cursor = ev.Cursor
		if !c.q.push(o) {
			return false
		}
	}
	return true
}

// SendFirst puts a frame before everything queued; the hello reply uses it
// because events may be queued between registration and the reply.
func (c *Conn) SendFirst(o Out) bool { return c.q.pushFront(o) }

// ByID returns a live connection, nil when it is gone.
func (h *Hub) ByID(id uint64) *Conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.conns[id]
}

// WaitProven waits until the device, connected now, is proven to have the
// frame at cursor (tests and benchmarks wait on it instead of sleeping).
func (h *Hub) WaitProven(ctx context.Context, deviceID string, cursor int64) error {
	for {
		h.mu.RLock()
		d := h.devices[deviceID]
		h.mu.RUnlock()
		if d == nil {
			return ErrClosed
		}
		d.mu.Lock()
		if d.proven.Has(cursor) {
			d.mu.Unlock()
			return nil
		}
		if d.notify == nil {
			d.notify = make(chan struct{})
		}
		ch := d.notify
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
