// Package gateway is the core of irisgate: the commands devices send, the
// agent turns they start, and the one path every change takes — committed
// to the store, then published to the hub.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/store"
)

// Config holds the core's settings; server and CLI fill it.
type Config struct {
	Agent agent.Agent
	// ShowReasoning includes the agent's reasoning in replies.
	ShowReasoning bool
	// OutboxKeep and OutboxMaxAge bound the outbox: frames beyond both are
	// pruned, and a sync from before them is reported truncated.
	OutboxKeep   int64
	OutboxMaxAge time.Duration
	// PruneEvery is how often retention runs (1 min unless set); it also
	// runs whenever the outbox has grown by a tenth of OutboxKeep since.
	PruneEvery time.Duration
	// ProgressEvery is how often a streaming reply's text is saved, bounding
	// what a crash can lose of it.
	ProgressEvery time.Duration
	Metrics       *Metrics
	// AskTimeout bounds how long approvals and questions wait.
	AskTimeout time.Duration
	// Workdir is where tools run (relative paths, the terminal's cwd).
	Workdir string
	// FastModel is the model /fast switches to (empty: same model, minimal
	// reasoning).
	FastModel string
	// Pusher wakes devices that are away (nil: no push).
	Pusher *push.Pusher
	// Media is the content store for uploads and files the agent sends
	// (nil: the gateway takes no media).
	Media *media.Store
	// Bounds bound the turns across lanes, the channel directory, a
	// token's connections and the device rows (turnlimits.go).
	Bounds Bounds
	// ReplayCache bounds the memory (counted as stored bytes) that keeps
	// the newest outbox frames ready for sync: 32 MiB unless set; negative
	// turns the cache off.
	ReplayCache int
	// ModelHTTPClient is the model backend's HTTP client (what
	// agent.ModelConfig.HTTPClient holds): auto-thread titles go to the
	// model's endpoint through it too, with its CA, proxy and timeouts.
	// nil: the OpenAI client's default, as for the model backend.
	ModelHTTPClient *http.Client
	// AutoTitleHermes lets a Hermes lane's auto-threads be named by the
	// first model provider configured beside Hermes. Off by default: the
	// thread's first question and reply would go to that provider (maybe a
	// cloud one) without the person having chosen it.
	AutoTitleHermes bool
}

// Gateway is the core service. Dialects call its methods; it never writes
// to a socket itself.
type Gateway struct {
	cfg Config
	st  Store
	hub *hub.Hub
	log *slog.Logger

	writes chan *write
	toPush chan *core.Event
	// pruneNow wakes the pruner when the outbox has grown past its bound
	// (prunedAt: the head it last pruned at).
	pruneNow chan struct{}
	prunedAt atomic.Int64
	replay   *replayCache // nil: off
	// recovered is closed once Run has settled what the last run left
	// open; connections are served only after it, or a turn started at
	// once would be taken for one a crash left behind.
	recovered  chan struct{}
	recoverErr error
	stopped    chan struct{}   // closed when the committer has ended
	ctx        context.Context // ends at shutdown; turns run under it
	cancel     context.CancelFunc

	mu       sync.Mutex
	lanes    map[core.Lane]*lane
	pickers  map[string]*picker
	sessions map[core.Lane]*session
	titles   titles     // auto-thread titles being asked for (autotitle.go)
	counts   turnCounts // turns held per token and in all (turnlimits.go)
	// skippedRows are the outbox rows a sync skipped and logged.
	skippedRows map[int64]bool
	running     chan struct{} // a place per turn running (turnlimits.go)
	turns       sync.WaitGroup
	down        bool

	presence presence // who connects and leaves (devices.go)
}

// New makes a gateway. Call Run to start it.
func New(st Store, h *hub.Hub, log *slog.Logger, cfg Config) *Gateway {
	if cfg.Agent == nil {
		cfg.Agent = &agent.Echo{}
	}
	if cfg.OutboxKeep == 0 {
		cfg.OutboxKeep = 200_000
	}
	if cfg.OutboxMaxAge == 0 {
		cfg.OutboxMaxAge = 30 * 24 * time.Hour
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = time.Second
	}
	if cfg.PruneEvery == 0 {
		cfg.PruneEvery = time.Minute
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.AskTimeout == 0 {
		cfg.AskTimeout = DefaultAskTimeout
	}
	if cfg.Workdir == "" {
		cfg.Workdir, _ = os.Getwd()
	}
	cfg.Bounds.defaults()
	if cfg.ReplayCache == 0 {
		cfg.ReplayCache = 32 << 20
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Gateway{
		cfg: cfg, st: st, hub: h, log: log,
		replay:    newReplayCache(1<<18, cfg.ReplayCache),
		writes:    make(chan *write, 1024),
		pruneNow:  make(chan struct{}, 1),
		toPush:    make(chan *core.Event, 4096),
		recovered: make(chan struct{}),
		stopped:   make(chan struct{}),
		ctx:       ctx, cancel: cancel,
		lanes:    make(map[core.Lane]*lane),
		running:  make(chan struct{}, cfg.Bounds.Running),
		pickers:  make(map[string]*picker),
		sessions: make(map[core.Lane]*session),
	}
}

// Recovered is closed when start-up recovery is done; RecoverErr then
// says whether it failed.
func (g *Gateway) Recovered() <-chan struct{} { return g.recovered }

// RecoverErr is start-up recovery's error (valid once Recovered is closed).
func (g *Gateway) RecoverErr() error { return g.recoverErr }

// Hub returns the gateway's hub.
func (g *Gateway) Hub() *hub.Hub { return g.hub }

// Store returns the gateway's store.
func (g *Gateway) Store() Store { return g.st }

// Agent returns the agent backend in use.
func (g *Gateway) Agent() agent.Agent { return g.cfg.Agent }

// Run commits writes until ctx ends. It first finishes replies a crash left
// streaming, so no device waits forever for their end.
func (g *Gateway) Run(ctx context.Context) error {
	done := make(chan struct{})
	committed := make(chan error, 1)
	go func() { committed <- g.commitLoop(done) }()
	// Wait for the batch in flight too: the store closes after Run.
	defer func() { close(done); <-g.stopped }()
	err := g.recover(ctx)
	g.recoverErr = err
	close(g.recovered)
	if err != nil {
		return err
	}
	pctx, stopPrune := context.WithCancel(ctx)
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		if g.cfg.Pusher.Enabled() {
			go g.pushLoop(pctx)
		}
		g.pruneLoop(pctx)
	}()
	defer func() { stopPrune(); <-pruned }()
	select {
	case <-ctx.Done():
	case err := <-committed:
		return err
	}
	return nil
}

// Shutdown ends running turns (their text so far is kept as stopped
// replies) and tells devices the gateway is restarting. Run must still be
// running so the turns' last writes commit.
func (g *Gateway) Shutdown(ctx context.Context) {
	g.mu.Lock()
	g.down = true
	g.mu.Unlock()
	g.cancel()
	waited := make(chan struct{})
	go func() { g.turns.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		g.log.Warn("shutdown: turns did not end in time")
	}
	g.hub.Publish(&core.Event{Type: core.EvStatus, State: "restarting"})
}

// write is one unit of the group commit: store changes and the event they
// produce, applied in one savepoint and published once committed.
type write struct {
	apply func(store.Tx) error
	ev    *core.Event
	size  int        // of ev's outbox body, once stored
	done  chan error // nil: nobody waits
}

// commit applies fn and, when ev is durable, appends ev to the outbox, in
// one transaction shared with whatever else is committing; once it is
// durable ev is published. It returns when that has happened.
func (g *Gateway) commit(ctx context.Context, fn func(store.Tx) error, ev *core.Event) error {
	w := &write{apply: fn, ev: ev, done: make(chan error, 1)}
	select {
	case g.writes <- w:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.stopped:
		return errStopped
	}
	// Once queued the write will happen; wait for it even if ctx ends so
	// the caller never mistakes a committed change for a failed one.
	select {
	case err := <-w.done:
		return err
	case <-g.stopped:
		select {
		case err := <-w.done:
			return err
		default:
			return errStopped
		}
	}
}

var errStopped = errors.New("gateway: stopped")

// errWriteFailed sends a batch to the slow path, one savepoint a write.
var errWriteFailed = errors.New("gateway: a write of the batch failed")

// commitLater queues a write without waiting for it.
func (g *Gateway) commitLater(fn func(store.Tx) error) {
	select {
	case g.writes <- &write{apply: fn}:
	default: // the committer is behind; progress saves are best effort
	}
}

const maxBatch = 512

func (g *Gateway) commitLoop(done <-chan struct{}) error {
	defer close(g.stopped)
	batch := make([]*write, 0, maxBatch)
	errs := make([]error, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case w := <-g.writes:
			batch = append(batch, w)
		case <-done:
			return nil
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case w := <-g.writes:
				batch = append(batch, w)
			default:
				break fill
			}
		}
		errs = errs[:0]
		// Optimistically the batch goes in as one transaction. Only when a
		// write fails is it run again with a savepoint per write, so the
		// failure undoes its own changes alone: savepoints cost two
		// statements a write, a quarter of the commit path. Writes only
		// change the store and set values, so running one twice is safe.
		err := g.st.Write(context.Background(), func(tx store.Tx) error {
			for _, w := range batch {
				if err := g.applyWrite(tx, w); err != nil {
					return errWriteFailed
				}
			}
			return nil
		})
		if err == nil {
			for range batch {
				errs = append(errs, nil)
			}
		}
		if errors.Is(err, errWriteFailed) {
			err = g.st.Write(context.Background(), func(tx store.Tx) error {
				for _, w := range batch {
					errs = append(errs, tx.Savepoint(func(tx store.Tx) error { return g.applyWrite(tx, w) }))
				}
				return nil
			})
		}
		if err != nil {
			g.log.Error("outbox commit failed", "err", err, "writes", len(batch))
		}
		for i, w := range batch {
			werr := err
			if werr == nil {
				werr = errs[i]
			}
			if werr == nil && w.ev != nil {
				g.remember(w)
				g.hub.Publish(w.ev)
				g.notePush(w.ev)
				if w.ev.Cursor > 0 {
					g.cfg.Metrics.OutboxHead.Set(float64(w.ev.Cursor))
					if w.ev.Cursor-g.prunedAt.Load() > pruneSlack(g.cfg.OutboxKeep) {
						select {
						case g.pruneNow <- struct{}{}:
						default:
						}
					}
				}
			}
			if w.done != nil {
				w.done <- werr
			}
		}
	}
}

func (g *Gateway) applyWrite(tx store.Tx, w *write) error {
	if w.apply != nil {
		if err := w.apply(tx); err != nil {
			return err
		}
	}
	ev := w.ev
	if ev == nil || !ev.Type.Durable() {
		return nil
	}
	if ev.TS == 0 {
		ev.TS = time.Now().UnixMilli()
	}
	var err error
	ev.Cursor, w.size, err = tx.AppendEvent(ev)
	return err
}

// remember keeps a committed durable event for sync replays.
func (g *Gateway) remember(w *write) {
	if w.ev.Type == core.EvMessageDeleted || w.ev.Type == core.EvChannelDeleted {
		// Deleted content must not linger in memory; Sync never serves it
		// anyway, as it replays only cursors the outbox still has.
		g.replay.reset()
	}
	if w.ev.Cursor > 0 {
		g.replay.add(w.ev, w.size)
	}
}

// publish sends an ephemeral event to the devices now.
func (g *Gateway) publish(ev *core.Event) {
	if ev.TS == 0 {
		ev.TS = time.Now().UnixMilli()
	}
	g.hub.Publish(ev)
}

// pruneSlack is how many frames are committed after a pass before the
// pruner is woken early: the outbox holds at most OutboxKeep plus that.
func pruneSlack(keep int64) int64 { return max(keep/10, 100) }

// pruneLoop enforces retention while the gateway runs: at start, every
// PruneEvery (for the age bound) and whenever the outbox outgrew its
// count bound. Each pass works in bounded transactions, letting commits
// in between them.
func (g *Gateway) pruneLoop(ctx context.Context) {
	t := time.NewTicker(g.cfg.PruneEvery)
	defer t.Stop()
	for {
		head, _ := g.st.OutboxHead(ctx)
		var total int64
		for ctx.Err() == nil {
			n, more, err := g.st.PruneOutboxSome(ctx, g.cfg.OutboxKeep, time.Now().Add(-g.cfg.OutboxMaxAge).UnixMilli(), store.PruneChunk)
			total += n
			if err != nil {
				if ctx.Err() == nil {
					g.log.Warn("outbox prune", "err", err)
				}
				break
			}
			if !more {
				break
			}
		}
		g.prunedAt.Store(head)
		if total > 0 {
			g.log.Info("outbox pruned", "frames", total)
		}
		if floor, err := g.st.OutboxFloor(ctx); err == nil && floor > 0 {
			g.hub.DropBelow(floor + 1) // the pruned frames (floor and below) need no proofs any more
		}
		g.pruneDevices(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.pruneNow:
		}
	}
}

// recover settles what a crash or a shutdown left open: replies left
// streaming become stopped replies (their saved text kept), lanes left busy
// get their agent.idle, and turns still owed are queued again, in order.
// Steering the running turn had not taken is owed like a sent message and
// runs as a turn of its own; steering it took stopped being owed when the
// turn recorded it.
func (g *Gateway) recover(ctx context.Context) error {
	ms, err := g.st.Streaming(ctx)
	if err != nil {
		return err
	}
	idle := map[core.Lane]bool{}
	for _, m := range ms {
		m.Stopped = true
		ev := &core.Event{Type: core.EvMessageStop, Lane: m.Lane, Message: &m}
		if err := g.commit(ctx, func(tx store.Tx) error { return tx.FinishMessage(m) }, ev); err != nil {
			return err
		}
		idle[m.Lane] = true
		g.log.Info("finished a reply interrupted by a crash", "message", m.ID, "lane", m.Lane.String())
	}
	owed, err := g.st.Turns(ctx)
	if err != nil {
		return err
	}
	var queued []pendingTurn
	for _, q := range owed {
		if q.Running {
			// It ran when the gateway stopped: what it said is kept above;
			// running it again could repeat its tools' side effects.
			idle[q.Lane] = true
			if err := g.commit(ctx, func(tx store.Tx) error { return tx.EndTurn(q.MessageID) }, nil); err != nil {
				return err
			}
			continue
		}
		m, err := g.st.Message(ctx, q.MessageID)
		if err != nil {
			g.commit(ctx, func(tx store.Tx) error { return tx.EndTurn(q.MessageID) }, nil)
			continue
		}
		// Held to no bound: they were within the bounds when sent.
		g.mu.Lock()
		slot, _ := g.takeSlotLocked("", true)
		g.mu.Unlock()
		queued = append(queued, pendingTurn{msg: m, slot: slot})
	}
	for lk := range idle {
		if err := g.commit(ctx, nil, &core.Event{Type: core.EvAgentIdle, Lane: lk}); err != nil {
			return err
		}
	}
	for _, pt := range queued {
		if err := g.enqueue(pt); err != nil {
			return err
		}
	}
	if len(queued) > 0 {
		g.log.Info("answering messages left unanswered at the last stop", "turns", len(queued))
	}
	return nil
}

// errShuttingDown refuses new turns during shutdown.
var errShuttingDown = core.Errorf(core.CodeUnsupported, "the gateway is shutting down")

func notFound(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return core.Errorf(core.CodeNotFound, "%s", what)
	}
	return err
}
