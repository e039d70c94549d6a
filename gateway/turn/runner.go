// Package turn runs the agent's turns: each lane's queue of turns, the
// running turn with its steering and stop, the pickers through which a
// turn asks its person, the lane sessions (approvals "for this session",
// /yolo) and cron turns. What a turn reports becomes events through a
// recorder, which commits what a device must not miss before it publishes
// it (package commit). The Runner's state is its own, under its own locks;
// the gateway around it reaches it through its methods only.
package turn

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/commit"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// Committer is the commit path (commit.Log).
type Committer interface {
	// Commit applies fn and commits ev with it; it returns once ev is
	// published.
	Commit(ctx context.Context, fn func(store.Tx) error, ev *core.Event) error
	// Enqueue queues fn and ev as Commit does and returns without waiting
	// (the Pending's Wait says how it went).
	Enqueue(ctx context.Context, fn func(store.Tx) error, ev *core.Event) (*commit.Pending, error)
	// CommitLater queues a write without waiting (best effort).
	CommitLater(fn func(store.Tx) error)
	// Publish sends an ephemeral event now.
	Publish(ev *core.Event)
}

// Store is what the runner reads of the store.
type Store interface {
	LaneSettings(ctx context.Context, lk core.Lane) (record.LaneSettings, error)
	Conversation(ctx context.Context, lk core.Lane) ([]record.ConversationEntry, error)
	Approved(ctx context.Context, grant string) (bool, error)
	Approve(ctx context.Context, grant string) error
	DeviceName(ctx context.Context, id string) (string, error)
	Message(ctx context.Context, id string) (core.Message, error)
}

// Host is what the runner asks of the gateway around it.
type Host interface {
	// OfferFile stores a file the agent sends, ties it to the reply
	// messageID and offers it to the devices.
	OfferFile(ctx context.Context, lk core.Lane, messageID, path string) (core.Media, error)
	// SpeakPiece speaks piece n of a reply as an audio file tied to it
	// and offered, refused over budget bytes (speech.go).
	SpeakPiece(ctx context.Context, lk core.Lane, messageID string, n int, text string, budget int64) (core.Media, error)
	// WithPaths gives the agent where each file of a message is on disk.
	WithPaths(ms []core.Media) []core.Media
	// Replied is told of each reply saved whole, answering user (the
	// gateway names auto-threads from it); it must return at once.
	Replied(lk core.Lane, user, reply core.Message)
	// PostCron posts a cron job's output into its lane.
	PostCron(ctx context.Context, lk core.Lane, j store.CronJob, text string) error
	// Conn returns a live connection by id, nil when it is gone.
	Conn(id uint64) *hub.Conn
}

// Metrics are the runner's Prometheus series (package gateway's).
type Metrics struct {
	Turns       *prometheus.CounterVec // by outcome
	TurnLatency prometheus.Histogram
	Limited     *prometheus.CounterVec // by bound
	// LeasesHeld and Takeovers are a replica's lane leases (lease.go).
	LeasesHeld prometheus.Gauge
	Takeovers  prometheus.Counter
}

// Config holds the runner's settings.
type Config struct {
	Agent agent.Agent
	// Workdir is where tools run.
	Workdir string
	// ShowReasoning includes the agent's reasoning in replies, unless a
	// lane chose otherwise.
	ShowReasoning bool
	// FastModel is the model /fast switches to ("": same model).
	FastModel string
	// ProgressEvery is how often a streaming reply's text is saved.
	ProgressEvery time.Duration
	// AskTimeout bounds how long approvals and questions wait.
	AskTimeout time.Duration
	// Cron is the scheduled jobs, for the agent's cronjob tool.
	Cron agent.Cron
	// Bounds bound the turns across lanes (limits.go).
	Bounds  Bounds
	Metrics Metrics
	// Leasing makes the runner one replica of several on one database
	// (lease.go); nil for a lone gateway, which runs every lane it is
	// sent to.
	Leasing *Leasing
}

// DefaultAskTimeout is how long an approval or question waits for an
// answer; silence on an approval is a deny.
const DefaultAskTimeout = 300 * time.Second

// DefaultProgressEvery is how often a streaming reply's text is saved.
const DefaultProgressEvery = time.Second

// MaxQueued bounds the messages of people waiting in one lane for their
// turn (the running one aside). A message beyond it is refused before it
// is stored, so what a restart reloads is bounded too. Cron runs are not
// counted: they collapse to one waiting run per job.
const MaxQueued = 32

// ErrShuttingDown refuses new turns during shutdown.
var ErrShuttingDown = core.NewKind("shutting_down", core.CodeUnsupported, "the gateway is shutting down")

// ErrQueueFull refuses a message when its lane's queue is full (of
// MaxQueued).
var ErrQueueFull = core.NewKind("lane_queue_full", core.CodeRateLimited,
	"%d messages already wait in this chat for the agent: wait for them, or send /stop all to stop the turn and drop them")

// Pending is a turn waiting in its lane.
type Pending struct {
	Msg core.Message
	// Origin gets the read receipt; nil for turns no device asked for.
	Origin *hub.Conn
	// cron, when set, makes it a cron turn (runCron): Msg is then no
	// stored message but the turn's row id (store.CronTurnID) and prompt.
	cron *cronRun
	// Slot is the turn's place in the bounds across lanes (nil: a cron
	// turn's); freed once it has run or is dropped.
	Slot *Slot
	// untaken marks steering the last turn did not take: it runs next,
	// ahead of the queue (a replica's syncLane keeps it there).
	untaken bool
}

// Runner runs the lanes' turns.
type Runner struct {
	cfg  Config
	c    Committer
	st   Store
	host Host
	log  *slog.Logger
	ctx  context.Context // ends at shutdown; turns run under it
	stop context.CancelFunc

	mu    sync.Mutex // guards lanes, slots and down
	lanes map[core.Lane]*lane
	slots slots // turns held per token and in all (limits.go)
	down  bool
	// places holds a place per turn running (limits.go).
	places chan struct{}
	// work counts the lanes' goroutines and the background work started
	// with Go: Shutdown waits for them.
	work sync.WaitGroup

	pickers  pickers
	sessions sessions
	// fl is the replica's lane leases (lease.go); nil on a lone gateway.
	fl *fleet
}

// lane is the runtime state of one conversation: the turns waiting to run,
// the running one, and the todo list.
type lane struct {
	key     core.Lane
	pending []Pending
	running *turn
	active  bool // a goroutine is running the lane's turns
	todos   []core.Todo
	// reserved counts places held in pending for turns being stored
	// (Reserve): the bound holds across concurrent senders.
	reserved int

	// A replica's lease of the lane (lease.go): held, asked to look at
	// the queue again (Poke), the stops counted so far, when it was last
	// taken and when it runs out here.
	leased         bool
	poked          bool
	stops          int64
	takenAt, until time.Time
}

// New makes a runner. Turns start as they are queued.
func New(c Committer, st Store, h Host, log *slog.Logger, cfg Config) *Runner {
	if cfg.Agent == nil {
		cfg.Agent = &agent.Echo{}
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.AskTimeout == 0 {
		cfg.AskTimeout = DefaultAskTimeout
	}
	cfg.Bounds.defaults()
	m := &cfg.Metrics
	if m.Turns == nil {
		m.Turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turns"}, []string{"outcome"})
	}
	if m.TurnLatency == nil {
		m.TurnLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "turn_seconds"})
	}
	if m.Limited == nil {
		m.Limited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limited"}, []string{"bound"})
	}
	if m.LeasesHeld == nil {
		m.LeasesHeld = prometheus.NewGauge(prometheus.GaugeOpts{Name: "leases_held"})
	}
	if m.Takeovers == nil {
		m.Takeovers = prometheus.NewCounter(prometheus.CounterOpts{Name: "lane_takeovers"})
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Runner{
		cfg: cfg, c: c, st: st, host: h, log: log, ctx: ctx, stop: stop,
		lanes:    make(map[core.Lane]*lane),
		places:   make(chan struct{}, cfg.Bounds.Running),
		pickers:  pickers{m: make(map[string]*picker)},
		sessions: sessions{m: make(map[core.Lane]*session)},
		fl:       newFleet(cfg.Leasing),
	}
}

// queuedLocked counts the people's turns waiting in l; r.mu is held.
func (l *lane) queuedLocked() int {
	n := l.reserved
	for _, p := range l.pending {
		if p.cron == nil {
			n++
		}
	}
	return n
}

// idleLocked reports whether nothing keeps l in the lanes map.
func (l *lane) idleLocked() bool {
	return !l.active && len(l.pending) == 0 && l.reserved == 0 && len(l.todos) == 0 && !l.leased
}

// laneLocked returns lk's lane, made when it has none; r.mu is held.
func (r *Runner) laneLocked(lk core.Lane) *lane {
	l := r.lanes[lk]
	if l == nil {
		l = &lane{key: lk}
		r.lanes[lk] = l
	}
	return l
}

// Reserve holds a place in lk's queue, and a slot of token's turns
// (limits.go), for a turn about to be stored; the caller then either
// queues it there (EnqueueReserved, the slot in its Pending) or gives both
// back (Release).
func (r *Runner) Reserve(lk core.Lane, token string) (*Slot, error) {
	elsewhere := 0
	if r.fl != nil {
		elsewhere = r.queuedElsewhere(lk) // a replica: the queue is the store's
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, ErrShuttingDown.New()
	}
	l := r.lanes[lk]
	if (l != nil && l.queuedLocked() >= MaxQueued) || elsewhere >= MaxQueued {
		r.cfg.Metrics.Limited.WithLabelValues("lane_queue").Inc()
		return nil, ErrQueueFull.New(MaxQueued)
	}
	slot, err := r.takeSlotLocked(token, false)
	if err != nil {
		return nil, err
	}
	r.laneLocked(lk).reserved++
	return slot, nil
}

// QueueFull reports whether lk's queue has no room (Reserve decides; this
// is a cheap look before any work).
func (r *Runner) QueueFull(lk core.Lane) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lanes[lk]
	return l != nil && l.queuedLocked() >= MaxQueued
}

// Release gives back a place Reserve held, and slot (nil: the turn
// keeps it).
func (r *Runner) Release(lk core.Lane, slot *Slot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freeSlotLocked(slot)
	if l := r.lanes[lk]; l != nil {
		l.reserved--
		if l.idleLocked() {
			delete(r.lanes, lk)
		}
	}
}

// EnqueueReserved queues a turn in the place Reserve held for it.
func (r *Runner) EnqueueReserved(p Pending) error {
	r.mu.Lock()
	if l := r.lanes[p.Msg.Lane]; l != nil {
		l.reserved--
	}
	r.mu.Unlock()
	return r.Enqueue(p)
}

// Enqueue adds a turn to its lane and starts the lane if it was idle.
// Refused, the turn's slot is freed.
func (r *Runner) Enqueue(p Pending) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		r.freeSlotLocked(p.Slot)
		return ErrShuttingDown.New()
	}
	l := r.laneLocked(p.Msg.Lane)
	l.pending = append(l.pending, p)
	r.awaitReceiptLocked(p)
	if !l.active {
		l.active = true
		r.work.Add(1)
		go r.runLane(l)
	}
	return nil
}

// Down reports whether the runner is shutting down.
func (r *Runner) Down() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down
}

// DropQueued forgets the turns waiting in lk (not the running one): their
// messages stay in history, unanswered. It returns how many of them were
// people's.
func (r *Runner) DropQueued(ctx context.Context, lk core.Lane) (int, error) {
	r.mu.Lock()
	var dropped []Pending
	leased := false
	if l := r.lanes[lk]; l != nil {
		dropped, l.pending = l.pending, nil
		leased = l.leased
	}
	r.mu.Unlock()
	if r.fl != nil && !leased {
		// The lane's queue is another replica's, in the store.
		return r.dropQueuedElsewhere(ctx, lk)
	}
	if len(dropped) == 0 {
		return 0, nil
	}
	people := 0
	err := r.c.Commit(ctx, func(tx store.Tx) error {
		for _, p := range dropped {
			if err := tx.EndTurn(p.Msg.ID); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	for _, p := range dropped {
		r.FreeSlot(p.Slot)
		if p.cron != nil {
			p.cron.done(ErrCronStopped)
		} else {
			people++
		}
	}
	return people, err
}

// DropLanes stops the lanes gone says are gone (their channel was
// deleted): their waiting turns and todo lists are forgotten and their
// running turns stopped, whose final writes find no message and are
// dropped.
func (r *Runner) DropLanes(gone func(core.Lane) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, l := range r.lanes {
		if gone(key) {
			for _, p := range l.pending {
				r.freeSlotLocked(p.Slot)
			}
			l.pending = nil
			l.todos = nil
			if l.running != nil {
				l.running.cancel()
			}
		}
	}
}

func (r *Runner) runLane(l *lane) {
	defer r.work.Done()
	for {
		placed := r.runPlace() // false: shutting down
		if placed && r.fl != nil && !r.Down() {
			r.syncLane(l) // a replica runs the store's queue, holding the lease
		}
		r.mu.Lock()
		if len(l.pending) == 0 && l.leased && placed && !r.down {
			r.mu.Unlock()
			r.leavePlace()
			if r.letLane(l) {
				continue // queued through another replica meanwhile
			}
			r.mu.Lock()
			if len(l.pending) > 0 || l.poked {
				r.mu.Unlock()
				continue
			}
			placed = false // left already
		} else if len(l.pending) == 0 && l.poked && placed && !r.down {
			r.mu.Unlock()
			r.leavePlace()
			continue // poked while it looked: look again
		}
		if len(l.pending) == 0 || r.down || !placed {
			for _, p := range l.pending {
				r.freeSlotLocked(p.Slot)
			}
			l.active = false
			l.pending = nil
			leased := l.leased
			if l.idleLocked() {
				delete(r.lanes, l.key)
			}
			r.mu.Unlock()
			if placed {
				r.leavePlace()
			}
			if leased {
				r.letLane(l) // shutting down: another replica takes the queue up
			}
			return
		}
		p := l.pending[0]
		l.pending = l.pending[1:]
		ctx, cancel := context.WithCancel(r.ctx)
		t := &turn{cancel: cancel}
		if p.cron == nil {
			// A cron turn gets no steer channel: Steer then queues what a
			// person sends as a turn of its own, which the cron prompt,
			// not a conversation, would not take anyway.
			t.steer = make(chan agent.Steer, 8)
		}
		l.running = t
		r.mu.Unlock()

		var next []Pending
		if p.cron != nil {
			r.runCron(ctx, l, t, p)
		} else {
			next = r.runTurn(ctx, l, t, p)
		}
		cancel()
		r.leavePlace()
		t.mu.Lock()
		steered := t.steered
		t.mu.Unlock()

		r.mu.Lock()
		l.running = nil
		for i := range next {
			next[i].untaken = true
		}
		l.pending = slices.Concat(next, l.pending)
		// The turn has run, and so has the steering it took; what it did
		// not take runs next and keeps its slot.
		r.freeSlotLocked(p.Slot)
		for _, st := range steered {
			if !slices.ContainsFunc(next, func(n Pending) bool { return n.Slot == st.Slot }) {
				r.freeSlotLocked(st.Slot)
			}
		}
		r.mu.Unlock()
	}
}

// running returns lk's running turn, nil when none runs.
func (r *Runner) running(lk core.Lane) *turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.lanes[lk]; l != nil {
		return l.running
	}
	return nil
}

// Busy reports whether a turn runs or waits in the lane. A turn whose
// agent.idle has gone out no longer counts: a device acting on that idle
// must find the lane free.
func (r *Runner) Busy(lk core.Lane) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lanes[lk]
	if l == nil {
		return false
	}
	if len(l.pending) > 0 {
		return true
	}
	if t := l.running; t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return !t.ended
	}
	return false
}

// setTodos keeps l's todo list (a turn's agent reported it).
func (r *Runner) setTodos(l *lane, todos []core.Todo) {
	r.mu.Lock()
	l.todos = todos
	r.mu.Unlock()
}

func (r *Runner) todos(l *lane) []core.Todo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return l.todos
}

// Snapshot is what a device joining now is shown of the turns: the
// streams running and each lane's todo list, stamped now. The gateway
// queues it while the hub registers the connection, so it lines up with
// the live events that follow: a stream's updates never reach the device
// before its start.
func (r *Runner) Snapshot(now int64) []*core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var evs []*core.Event
	for key, l := range r.lanes {
		if t := l.running; t != nil {
			if id, text := t.snapshot(); id != "" {
				evs = append(evs,
					&core.Event{Type: core.EvMessageStart, Lane: key, StreamID: id, Role: core.RoleAssistant, TS: now},
					&core.Event{Type: core.EvMessageUpdate, Lane: key, StreamID: id, Text: text, TS: now})
			}
		}
		if len(l.todos) > 0 {
			evs = append(evs, &core.Event{Type: core.EvTodo, Lane: key, Todos: l.todos, TS: now})
		}
	}
	return evs
}

// Go runs fn in the background under the runner's lifetime: its context
// ends at shutdown, which waits for it. It returns false, and runs
// nothing, once the runner is shutting down.
func (r *Runner) Go(fn func(ctx context.Context)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return false
	}
	r.work.Add(1)
	go func() {
		defer r.work.Done()
		fn(r.ctx)
	}()
	return true
}

// Shutdown ends running turns (their text so far is kept as stopped
// replies) and refuses new ones, waiting until ctx ends for the turns to
// record their ends. The commit path must still run meanwhile.
func (r *Runner) Shutdown(ctx context.Context) {
	r.mu.Lock()
	r.down = true
	r.mu.Unlock()
	r.stop()
	waited := make(chan struct{})
	go func() { r.work.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		r.log.Warn("shutdown: turns did not end in time")
	}
}
