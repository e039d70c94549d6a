package turn_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/commit"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// The runner's tests run it as the gateway does: over a real SQLite store,
// with a real commit log publishing to a real hub, and devices registered
// in that hub. A device's codec keeps the events it is given, in order.
// The agent is agent.Echo or a script (agent.Agent is our own interface).

const wait = 10 * time.Second

var lk = core.Lane{ChatID: core.DefaultChatID}

type rig struct {
	t      *testing.T
	path   string // the SQLite file
	st     *store.Store
	hub    *hub.Hub
	log    *commit.Log
	r      *turn.Runner
	gate   *gate
	host   *host
	ctx    context.Context
	cancel context.CancelFunc
}

// gate is the Publisher between the commit log and the hub: it can hold
// the publication of events of one type (a slow fan-out at that moment).
type gate struct {
	hub *hub.Hub

	mu      sync.Mutex
	hold    core.EventType
	entered chan *core.Event
	release chan struct{}
}

func (g *gate) Publish(ev *core.Event) {
	g.mu.Lock()
	held := g.hold != "" && ev.Type == g.hold
	entered, release := g.entered, g.release
	if held {
		g.hold = ""
	}
	g.mu.Unlock()
	if held {
		entered <- ev
		<-release
	}
	g.hub.Publish(ev)
}

// holdNext makes the next event of type typ wait before the hub; the
// returned channel gets it as it waits, and release lets it go on.
func (g *gate) holdNext(typ core.EventType) (entered chan *core.Event, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.entered, g.release = typ, make(chan *core.Event, 1), make(chan struct{})
	var once sync.Once
	rel := g.release
	return g.entered, func() { once.Do(func() { close(rel) }) }
}

// host is the gateway's part, as little of it as the runner needs.
type host struct {
	rig *rig

	mu      sync.Mutex
	replied []core.Message
	posted  []string
	// speak, when set, speaks a piece (set before the first turn).
	speak func(ctx context.Context, messageID string, n int, text string, budget int64) (core.Media, error)
}

func (h *host) OfferFile(context.Context, core.Lane, string, string) (core.Media, error) {
	return core.Media{}, core.Errorf(core.CodeUnsupported, "this gateway takes no media")
}

// SpeakPiece is speak's (speech_test.go); without it the gateway cannot
// speak.
func (h *host) SpeakPiece(ctx context.Context, lk core.Lane, messageID string, n int, text string, budget int64) (core.Media, error) {
	if h.speak == nil {
		return core.Media{}, turn.ErrNoSpeech
	}
	return h.speak(ctx, messageID, n, text, budget)
}

func (h *host) WithPaths(ms []core.Media) []core.Media { return ms }

func (h *host) Replied(_ core.Lane, _, reply core.Message) {
	h.mu.Lock()
	h.replied = append(h.replied, reply)
	h.mu.Unlock()
}

// PostCron posts the answer as the gateway does: a cron message.
func (h *host) PostCron(ctx context.Context, lk core.Lane, j store.CronJob, text string) error {
	h.mu.Lock()
	h.posted = append(h.posted, text)
	h.mu.Unlock()
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleCron, Text: text, Model: "cron: " + j.Name, TS: time.Now().UnixMilli()}
	return h.rig.log.Commit(ctx, func(tx store.Tx) error { return tx.InsertMessage(m, false) },
		&core.Event{Type: core.EvMessage, Lane: lk, Message: &m})
}

func (h *host) Conn(id uint64) *hub.Conn { return h.rig.hub.ByID(id) }

func newRig(t *testing.T, a agent.Agent, opts ...func(*turn.Config)) *rig {
	t.Helper()
	return newRigOn(t, a, nil, opts...)
}

// newRigOn is newRig with the commit log writing through wrap(store),
// which can fail writes as a database that went away would.
func newRigOn(t *testing.T, a agent.Agent, wrap func(commit.Store) commit.Store, opts ...func(*turn.Config)) *rig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gw.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := hub.New(st, quiet, hub.DefaultLimits)
	g := &gate{hub: h}
	var cs commit.Store = st
	if wrap != nil {
		cs = wrap(st)
	}
	log := commit.New(cs, g, quiet, commit.Config{})
	done := make(chan struct{})
	ran := make(chan struct{})
	go func() { defer close(ran); log.Run(done) }()
	rg := &rig{t: t, st: st, hub: h, log: log, gate: g, path: path}
	rg.host = &host{rig: rg}
	cfg := turn.Config{Agent: a, Workdir: t.TempDir(), AskTimeout: wait}
	for _, o := range opts {
		o(&cfg)
	}
	rg.r = turn.New(log, st, rg.host, quiet, cfg)
	rg.ctx, rg.cancel = context.WithTimeout(context.Background(), 3*wait)
	t.Cleanup(func() {
		rg.cancel()
		sd, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		rg.r.Shutdown(sd)
		close(done)
		<-ran
		st.Close()
	})
	return rg
}

// send stores a person's message and queues its turn, as Gateway.Send
// does.
func (rg *rig) send(text string, from *device) core.Message {
	rg.t.Helper()
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleUser, Text: text, TS: time.Now().UnixMilli()}
	slot, err := rg.r.Reserve(lk, "")
	if err != nil {
		rg.t.Fatal(err)
	}
	if err := rg.log.Commit(rg.ctx, func(tx store.Tx) error {
		if err := tx.InsertMessage(m, false); err != nil {
			return err
		}
		return tx.QueueTurn(lk, m.ID)
	}, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m}); err != nil {
		rg.t.Fatal(err)
	}
	p := turn.Pending{Msg: m, Slot: slot}
	if from != nil {
		p.Origin = from.conn
	}
	if err := rg.r.EnqueueReserved(p); err != nil {
		rg.t.Fatal(err)
	}
	return m
}

// owed is the turn rows left in the store.
func (rg *rig) owed() []store.QueuedTurn {
	rg.t.Helper()
	q, err := rg.st.Turns(context.Background())
	if err != nil {
		rg.t.Fatal(err)
	}
	return q
}

// device is a connection registered in the hub whose codec keeps every
// event it is handed (check, when set, runs on each as it is handed).
type device struct {
	t     *testing.T
	conn  *hub.Conn
	evs   chan got
	check func(*core.Event)
}

// got is an event a device was handed, with the id of its request the
// event answers (0: none).
type got struct {
	*core.Event
	req int64
}

func (d *device) Frames(ev *core.Event, reqID int64) []hub.Out {
	if d.check != nil {
		d.check(ev)
	}
	d.evs <- got{ev, reqID}
	return nil
}

// join registers a device; like the gateway's greet, it is shown the
// runner's snapshot while the hub registers it.
func (rg *rig) join(id string) *device {
	rg.t.Helper()
	d := &device{t: rg.t, evs: make(chan got, 4096)}
	c, _, err := rg.hub.Add(context.Background(), id, d, func(c *hub.Conn) {
		for _, ev := range rg.r.Snapshot(time.Now().UnixMilli()) {
			c.SendEvent(ev, 0)
		}
	})
	if err != nil {
		rg.t.Fatal(err)
	}
	d.conn = c
	rg.t.Cleanup(func() { rg.hub.Remove(c) })
	return d
}

// next returns the device's next event that ok accepts (nil: any),
// skipping the others.
func (d *device) next(ok func(*core.Event) bool) got {
	d.t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case g := <-d.evs:
			if ok == nil || ok(g.Event) {
				return g
			}
		case <-deadline:
			d.t.Fatal("the event never came")
			return got{}
		}
	}
}

func is(typ core.EventType) func(*core.Event) bool {
	return func(ev *core.Event) bool { return ev.Type == typ }
}

// script is an agent whose turns run fn.
type script struct {
	fn func(ctx context.Context, t agent.Turn, emit func(agent.Event)) error

	mu     sync.Mutex
	inputs []string
}

func (s *script) Name() string { return "script" }

func (s *script) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	s.mu.Lock()
	s.inputs = append(s.inputs, t.Input)
	s.mu.Unlock()
	return s.fn(ctx, t, emit)
}

func (s *script) ran() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inputs...)
}

// blockOn runs turns that wait, each, for a value on proceed (or their
// stop), then answer their input.
func blockOn(proceed <-chan struct{}) *script {
	return &script{fn: func(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
		select {
		case <-proceed:
		case <-ctx.Done():
			return ctx.Err()
		}
		emit(agent.Event{Kind: agent.Text, Text: "re: " + t.Input})
		return nil
	}}
}

// give lets a blocked turn of blockOn proceed; no turn waiting fails.
func give(t *testing.T, proceed chan<- struct{}) {
	t.Helper()
	select {
	case proceed <- struct{}{}:
	case <-time.After(wait):
		t.Fatal("no turn was waiting to proceed")
	}
}
