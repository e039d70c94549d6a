// Package fleet keeps gateway replicas in step through NATS (issue 18):
// each replica tells the others the cursor of every durable frame it
// commits and relays the transient frames of its turns; each delivers the
// durable frames to its own devices in cursor order, read from the store,
// and keeps track of which devices are connected to the others, so that a
// device connected anywhere is not woken by a push.
//
// Correctness stays in the store: a cursor message lost on the way is
// healed by the next one (everything below a committed cursor is visible)
// or by a peer's heartbeat, and a device that missed frames gets them from
// its sync. NATS only makes the replicas prompt.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// Defaults of Config.
const (
	DefaultSubject       = "irisgate"
	DefaultHold          = 250 * time.Millisecond
	DefaultPresenceEvery = 5 * time.Second
)

// Config sets up a replica's link to the fleet.
type Config struct {
	// URL is the NATS server (or servers, comma separated): nats://host:4222,
	// with credentials in it where the server wants them.
	URL string
	// Subject prefixes the subjects the fleet uses (DefaultSubject): one
	// per fleet sharing a NATS server.
	Subject string
	// Key signs the fleet's messages (seal.go), at least KeySize bytes,
	// the same on every replica: the database's (postgres.Store.FleetKey).
	// Required: a message signed with another key is refused.
	Key []byte
	// Name is the connection's name in NATS's monitoring.
	Name string
	// Hold is how long a remote frame past a gap waits for the gap's own
	// message before the gap is read from the store (DefaultHold).
	Hold time.Duration
	// PresenceEvery is how often a replica sends the list of its devices;
	// a replica silent for three times that is taken for gone.
	PresenceEvery time.Duration
	// Remote, when set, is called with each durable frame another replica
	// committed, once the hub has it (caches of what those frames change),
	// and with each picker.closed another replica relays, before the hub
	// has it.
	Remote func(*core.Event)
	// Command, when set, is called with each command another replica
	// forwarded (ForwardPick, ForwardStop), on NATS's goroutine.
	Command func(Command)
	Metrics prometheus.Registerer
	Log     *slog.Logger
}

// Fleet is one replica's link: the hub's relay and presence.
type Fleet struct {
	cfg Config
	hub *hub.Hub
	// nc is set by New, and by NATS's callbacks, which may run first.
	nc     atomic.Pointer[nats.Conn]
	subs   []*nats.Subscription
	origin string
	frames string // subject of cursors and transient frames
	pres   string // subject of presence
	seal   *sealer
	seq    *sequencer
	peers  *peers
	met    *metrics
	log    *slog.Logger

	kick    chan struct{}
	changes chan string
	// out queues what is published, in order, for sender: the commit
	// publisher never waits on NATS (a stuck connection blocks its
	// writes until its pings time out). Bounded; past it, dropped.
	out       chan outMsg
	stop      chan struct{} // closed by Close: the sender drains and ends
	senderEnd chan struct{}
	closeOnce sync.Once
	summary   atomic.Bool  // send a summary soon (a query, lost changes)
	warned    atomic.Int64 // when refusals were last logged (Unix ns)
	gen       uint64       // of the summaries sent, owned by run
	lastSent  time.Time    // of the last summary, owned by run
}

// New connects to NATS and links h to the fleet: from now on the hub's
// Publish goes through the fleet, and its Reachable counts the devices of
// every replica. NATS down is not an error: the replica serves its own
// devices and keeps trying (docs/replicas.md), so the NATS server can be
// restarted without the gateways. Run does the work; Close ends it.
func New(st Store, h *hub.Hub, cfg Config) (*Fleet, error) {
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.Hold <= 0 {
		cfg.Hold = DefaultHold
	}
	if cfg.PresenceEvery <= 0 {
		cfg.PresenceEvery = DefaultPresenceEvery
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("irisgate %s pid %d", host, os.Getpid())
	}
	if !validSubject(cfg.Subject) {
		return nil, fmt.Errorf("fleet: subject %q: letters, digits, - and _ only", cfg.Subject)
	}
	if len(cfg.Key) < KeySize {
		return nil, fmt.Errorf("fleet: a key of at least %d bytes is required to sign the fleet's messages, got %d (the database's fleet key)", KeySize, len(cfg.Key))
	}
	frames, pres := cfg.Subject+".frames", cfg.Subject+".presence"
	f := &Fleet{
		cfg: cfg, hub: h, origin: newOrigin(),
		frames: frames, pres: pres, seal: newSealer(cfg.Key, frames, pres),
		peers:   newPeers(3*cfg.PresenceEvery, time.Now),
		log:     cfg.Log.With("fleet", cfg.Subject),
		kick:    make(chan struct{}, 1),
		changes: make(chan string, 4096),
	}
	f.out, f.stop, f.senderEnd = make(chan outMsg, 8192), make(chan struct{}), make(chan struct{})
	f.met = newMetrics(cfg.Metrics, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	head, err := st.OutboxHead(ctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("fleet: the outbox's head: %w", err)
	}
	f.seq = &sequencer{st: st, deliver: h.Deliver, remote: cfg.Remote, met: f.met, hold: cfg.Hold, now: time.Now,
		delivered: head, lastLocal: head}
	nc, err := nats.Connect(cfg.URL,
		nats.Name(cfg.Name),
		nats.NoEcho(),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		// Bounded: what is published while NATS is away waits here, and
		// past it is dropped (sync heals it).
		nats.ReconnectBufSize(8<<20),
		// A NATS server that vanished without closing the connection is
		// noticed within seconds, not minutes.
		nats.PingInterval(5*time.Second),
		nats.MaxPingsOutstanding(2),
		nats.ConnectHandler(func(nc *nats.Conn) { f.connected(nc, "connected") }),
		nats.ReconnectHandler(func(nc *nats.Conn) { f.connected(nc, "reconnected") }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // closed by us
			}
			f.log.Warn("NATS connection lost: this replica's devices get other replicas' frames when it is back, or by sync", "err", err)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// A slow consumer lost messages: read up to the head.
			f.met.dropped.WithLabelValues("slow_consumer").Inc()
			f.resync()
			f.log.Warn("NATS", "err", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("fleet: NATS %s: %w", redact(cfg.URL), err)
	}
	f.nc.Store(nc)
	go f.sender()
	for _, subj := range []string{f.frames, f.pres} {
		sub, err := nc.Subscribe(subj, f.receive)
		if err == nil {
			// Bounded: a replica that falls behind drops messages (and
			// reads the store) rather than growing.
			err = sub.SetPendingLimits(65536, 64<<20)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("fleet: subscribing to %s: %w", subj, err)
		}
		f.subs = append(f.subs, sub)
	}
	if !nc.IsConnected() {
		f.log.Warn("NATS is not reachable yet: serving this replica's own devices, and connecting in the background", "nats", redact(cfg.URL))
	}
	h.SetRelay(f)
	h.SetPresence(f)
	return f, nil
}

// Origin is this replica's id in the fleet's messages (random per start).
func (f *Fleet) Origin() string { return f.origin }

// Connected reports whether NATS is connected now.
func (f *Fleet) Connected() bool { return f.nc.Load().IsConnected() }

func (f *Fleet) connected(nc *nats.Conn, what string) {
	f.nc.Store(nc)
	f.log.Info("NATS "+what, "server", nc.ConnectedUrlRedacted())
	// Whatever was published meanwhile is lost to this replica: read up to
	// the head, and ask the peers who is connected to them.
	f.resync()
	f.send(&message{Kind: kindQuery})
	f.summary.Store(true)
	f.poke()
}

func (f *Fleet) resync() {
	f.seq.mu.Lock()
	f.seq.resync = true
	f.seq.mu.Unlock()
	f.poke()
}

func (f *Fleet) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Publish is the hub's relay: a committed frame (in cursor order, from the
// commit publisher) or a transient one, from this replica.
func (f *Fleet) Publish(ev *core.Event) {
	durable := ev.Cursor != 0
	if !durable && !relayed[ev.Type] {
		f.hub.Deliver(ev) // status: this replica's own
		return
	}
	s := f.seq
	s.mu.Lock()
	defer s.mu.Unlock() // held while publishing: NATS gets the order the hub got
	after, _ := s.localLocked(ev)
	if durable {
		f.sendCursor(ev.Cursor)
		return
	}
	b, err := encodeTransient(f.origin, after, ev)
	if err != nil {
		f.met.dropped.WithLabelValues("too_large").Inc()
		return
	}
	f.publish(f.frames, kindTransient, b)
}

func (f *Fleet) sendCursor(c int64) { f.publish(f.frames, kindCursor, f.cursorMessage(c)) }

// cursorMessage is the commonest message, made without reflection, with
// room for its signature.
func (f *Fleet) cursorMessage(c int64) []byte {
	b := make([]byte, 0, 48+len(f.origin)+trailer)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, WireVersion, 10)
	b = append(b, `,"o":"`...)
	b = append(b, f.origin...)
	b = append(b, `","k":"c","c":`...)
	b = strconv.AppendInt(b, c, 10)
	return append(b, '}')
}

func (f *Fleet) send(m *message) {
	m.V, m.Origin = WireVersion, f.origin
	b, err := encode(m)
	if err != nil {
		f.log.Error("fleet message not sent", "kind", m.Kind, "err", err)
		return
	}
	subj := f.pres
	if m.Kind == kindCursor || m.Kind == kindTransient {
		subj = f.frames
	}
	f.publish(subj, m.Kind, b)
}

type outMsg struct {
	subj, kind string
	b          []byte
}

// publish queues a message for the sender, in order; it never blocks.
func (f *Fleet) publish(subj, kind string, b []byte) {
	select {
	case f.out <- outMsg{subj, kind, b}:
	default:
		f.met.dropped.WithLabelValues("send_queue_full").Inc()
	}
}

// sender hands the queued messages to NATS until Close, then what is
// left.
func (f *Fleet) sender() {
	defer close(f.senderEnd)
	for {
		select {
		case m := <-f.out:
			f.send1(m)
		case <-f.stop:
			for {
				select {
				case m := <-f.out:
					f.send1(m)
				default:
					return
				}
			}
		}
	}
}

func (f *Fleet) send1(m outMsg) {
	nc := f.nc.Load()
	if nc == nil {
		return // New failed before connecting: nothing to send on
	}
	// Signed here, as it leaves: off the commit path, and dated when sent.
	if err := nc.Publish(m.subj, f.seal.seal(m.subj, m.b, time.Now())); err != nil {
		// Disconnected past the reconnect buffer, or closed: the peers
		// heal from the store at the next cursor or heartbeat.
		f.met.publishErrors.Inc()
		return
	}
	f.met.sent.WithLabelValues(m.kind).Inc()
}

// receive takes a peer's message (on NATS's goroutine for the subject).
func (f *Fleet) receive(msg *nats.Msg) {
	body, err := f.seal.open(msg.Subject, msg.Data, time.Now())
	if err != nil {
		f.refused(err)
		return
	}
	m, err := decode(body)
	if err != nil {
		f.refused(err)
		return
	}
	if m.Origin == f.origin {
		return
	}
	f.met.received.WithLabelValues(m.Kind).Inc()
	switch m.Kind {
	case kindCursor:
		f.seq.note(m.Cursor)
	case kindTransient:
		ev, err := m.event()
		if err != nil {
			f.refused(err)
			return
		}
		if ev.Type == core.EvPickerClosed && f.cfg.Remote != nil {
			f.cfg.Remote(ev) // the pickers open elsewhere (gateway.PickerPending)
		}
		f.seq.transient(m.Cursor, ev, len(msg.Data))
	case kindPresence:
		f.peers.apply(m.Origin, m)
		if m.Cursor > 0 {
			f.seq.note(m.Cursor) // a heartbeat: heals a lost last cursor
		}
	case kindQuery:
		f.summary.Store(true)
	case kindBye:
		f.peers.bye(m.Origin)
	case kindCommand:
		f.command(m.Cmd)
		return
	}
	f.poke()
}

// refused counts a message refused, by reason. Unsigned and stale ones
// are also logged, at most once a minute: a stranger on the subject, a
// replica with another key (another database) or another version, or
// replicas' clocks apart.
func (f *Fleet) refused(err error) {
	reason := "malformed"
	switch err {
	case errTooLarge:
		reason = "too_large"
	case errVersion:
		reason = "version"
	case errBadTag:
		reason = "bad_tag"
	case errStale:
		reason = "stale"
	}
	f.met.invalid.WithLabelValues(reason).Inc()
	if now := time.Now().UnixNano(); reason != "malformed" && reason != "too_large" {
		if last := f.warned.Load(); now-last >= int64(time.Minute) && f.warned.CompareAndSwap(last, now) {
			f.log.Warn("fleet messages refused (irisgate_fleet_invalid_total counts them)", "reason", reason, "err", err)
			return
		}
	}
	f.log.Debug("fleet message refused", "reason", reason, "err", err)
}

// Elsewhere reports whether another replica has deviceID connected (the
// hub's presence).
func (f *Fleet) Elsewhere(deviceID string) bool { return f.peers.has(deviceID) }

// Changed is the hub's word that deviceID connected or left here; it
// never blocks (a change that does not fit goes with the next summary).
func (f *Fleet) Changed(deviceID string) {
	select {
	case f.changes <- deviceID:
	default:
		f.summary.Store(true)
	}
}

// Run works until ctx ends: reads the frames the peers announce, sends
// presence. Then it tells the peers this replica's devices are gone; NATS
// stays open for what the gateway still commits as it stops, until Close.
func (f *Fleet) Run(ctx context.Context) {
	f.send(&message{Kind: kindQuery})
	f.summary.Store(true)
	tick := time.NewTicker(f.cfg.PresenceEvery)
	defer tick.Stop()
	step := time.NewTimer(0)
	defer step.Stop()
	for {
		select {
		case <-ctx.Done():
			f.send(&message{Kind: kindBye})
			return
		case <-f.kick:
		case <-step.C:
		case id := <-f.changes:
			f.announce(id)
		case <-tick.C:
			f.summary.Store(true)
			// One small read a tick heals what no message will: the last
			// frames of a replica killed before it announced them.
			f.seq.mu.Lock()
			f.seq.resync = true
			f.seq.mu.Unlock()
			f.met.remote.Set(float64(f.peers.expire()))
		}
		if f.summary.Load() && time.Since(f.lastSent) >= time.Second {
			f.summary.Store(false)
			f.sendSummary()
		}
		wait := f.seq.step(ctx)
		if wait == 0 {
			wait = f.cfg.PresenceEvery
		}
		step.Reset(wait)
	}
}

// announce sends the connects and disconnects waiting, as the hub has them
// now (changes of one device may have come out of order).
func (f *Fleet) announce(first string) {
	m := &message{Kind: kindPresence}
	seen := map[string]bool{}
	add := func(id string) {
		if seen[id] || !validDevice(id) {
			return
		}
		seen[id] = true
		if f.hub.Online(id) {
			m.On = append(m.On, id)
		} else {
			m.Off = append(m.Off, id)
		}
	}
	add(first)
	for len(seen) < MaxIDs {
		select {
		case id := <-f.changes:
			add(id)
			continue
		default:
		}
		break
	}
	f.send(m)
}

// sendSummary sends every device connected here, in parts, with this
// replica's last cursor (a heartbeat).
func (f *Fleet) sendSummary() {
	f.lastSent = time.Now()
	var ids []string
	seen := map[string]bool{}
	f.hub.Each(func(c *hub.Conn) {
		if !seen[c.DeviceID] && validDevice(c.DeviceID) {
			seen[c.DeviceID] = true
			ids = append(ids, c.DeviceID)
		}
	})
	parts := max(1, (len(ids)+MaxIDs-1)/MaxIDs)
	if parts > maxParts {
		parts, ids = maxParts, ids[:maxParts*MaxIDs]
	}
	f.seq.mu.Lock()
	last := f.seq.lastLocal
	f.seq.mu.Unlock()
	f.gen++
	for p := 0; p < parts; p++ {
		part := ids[min(p*MaxIDs, len(ids)):min((p+1)*MaxIDs, len(ids))]
		f.send(&message{Kind: kindPresence, Cursor: last, Gen: f.gen, Part: p, Parts: parts, All: part})
	}
}

// Close flushes what is published and closes NATS: after Run has
// returned and the gateway has stopped committing.
func (f *Fleet) Close() {
	f.closeOnce.Do(func() {
		nc := f.nc.Load()
		close(f.stop)
		select {
		case <-f.senderEnd:
			if err := nc.FlushTimeout(time.Second); err != nil && nc.IsConnected() {
				f.log.Debug("NATS flush at close", "err", err)
			}
		case <-time.After(2 * time.Second):
			// Stuck on a connection that takes nothing: Close ends it.
		}
		nc.Close()
		<-f.senderEnd
	})
}

func newOrigin() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validSubject(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
