// Package gateway is the core of irisgate: the commands devices send, the
// agent turns they start, and the one path every change takes — committed
// to the store, then published to the hub.
package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/commit"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/store"
)

// Config holds the core's settings; server and CLI fill it.
type Config struct {
	Agent agent.Agent
	// SharedStore says other gateways commit to the store too (replicas on
	// one PostgreSQL database): the outbox head is then read from the
	// store, never from this gateway's commit log, which sees only its
	// own commits.
	SharedStore bool
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
	// token's connections and the device rows (bounds.go).
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
	// STT transcribes recordings people send (nil: they reach the agent
	// as files, and each lane is told once). See voice.go.
	STT Transcriber
	// TTS speaks replies in lanes with /voice on (nil: replies stay
	// text). See speak.go.
	TTS Speaker
	// Leasing makes this gateway one replica of several on one database
	// (issue 18): a lane's turns run on the replica holding its lease
	// (gateway/turn's lease.go). nil: a lone gateway.
	Leasing *turn.Leasing
}

// Gateway is the core service. Dialects call its methods; it never writes
// to a socket itself.
type Gateway struct {
	cfg Config
	st  Store
	hub *hub.Hub
	log *slog.Logger
	// elsewhere: pickers open on other replicas (elsewhere.go).
	elsewhere *elsewhere

	commits *commit.Log
	toPush  chan *core.Event
	// pruneNow wakes the pruner when the outbox has grown past its bound
	// (prunedAt: the head it last pruned at).
	pruneNow chan struct{}
	prunedAt atomic.Int64
	// recovered is closed once Run has settled what the last run left
	// open; connections are served only after it, or a turn started at
	// once would be taken for one a crash left behind.
	recovered  chan struct{}
	recoverErr error

	turns  *turn.Runner
	titles titles // auto-thread titles being asked for (autotitle.go)
	// limits counts what the gateway's own bounds hold: auto-threads and
	// connections per token (bounds.go).
	limits limits
	// skipped are the outbox rows a sync skipped and logged (devices.go).
	skipped skippedRows
	// dir is the channel directory as sends resolve lanes (directory.go).
	dir directory

	presence presence // who connects and leaves (devices.go)
	voice    voiceNotes
}

// New makes a gateway. Call Run to start it.
func New(st Store, h *hub.Hub, log *slog.Logger, cfg Config) *Gateway {
	if cfg.Agent == nil {
		cfg.Agent = &agent.Echo{}
	}
	if cfg.OutboxKeep == 0 {
		cfg.OutboxKeep = DefaultOutboxKeep
	}
	if cfg.OutboxMaxAge == 0 {
		cfg.OutboxMaxAge = DefaultOutboxMaxAge
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.PruneEvery == 0 {
		cfg.PruneEvery = DefaultPruneEvery
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Workdir == "" {
		cfg.Workdir, _ = os.Getwd()
	}
	cfg.Bounds.defaults()
	g := &Gateway{
		cfg: cfg, st: st, hub: h, log: log, elsewhere: newElsewhere(cfg.AskTimeout),
		pruneNow:  make(chan struct{}, 1),
		toPush:    make(chan *core.Event, 4096),
		recovered: make(chan struct{}),
	}
	g.commits = commit.New(st, h, log, commit.Config{ReplayCache: cfg.ReplayCache, AfterPublish: g.published,
		AfterCommit: g.committed, Batch: func(n int) { cfg.Metrics.CommitBatch.Observe(float64(n)) }})
	g.turns = turn.New(g.commits, st, turnHost{g}, log, turn.Config{
		Agent: cfg.Agent, Workdir: cfg.Workdir, ShowReasoning: cfg.ShowReasoning, FastModel: cfg.FastModel,
		ProgressEvery: cfg.ProgressEvery, AskTimeout: cfg.AskTimeout, Cron: agentCron{g},
		Bounds: turn.Bounds{PerToken: cfg.Bounds.PerToken, InAll: cfg.Bounds.InAll, Running: cfg.Bounds.Running},
		Metrics: turn.Metrics{Turns: cfg.Metrics.Turns, TurnLatency: cfg.Metrics.TurnLatency, Limited: cfg.Metrics.Limited,
			LeasesHeld: cfg.Metrics.LeasesHeld, Takeovers: cfg.Metrics.Takeovers},
		Leasing: cfg.Leasing,
	})
	return g
}

// PokeLane says that another replica queued a turn in lk or forwarded a
// stop to it (turn.Runner.Poke): the fleet layer calls it when NATS says
// so. A lone gateway ignores it.
func (g *Gateway) PokeLane(lk core.Lane) { g.turns.Poke(lk) }

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
	ended := make(chan struct{})
	go func() { defer close(ended); committed <- g.commits.Run(done) }()
	// Wait for the batch in flight and its publication too: the store
	// closes after Run.
	defer func() { close(done); <-ended }()
	err := g.recover(ctx)
	g.recoverErr = err
	close(g.recovered)
	if err != nil {
		return err
	}
	g.turns.StartLeasing()
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
	g.turns.Shutdown(ctx)
	g.hub.Publish(&core.Event{Type: core.EvStatus, State: "restarting"})
}

// commit applies fn and commits ev with it (commit.Log.Commit): it
// returns once ev is published.
func (g *Gateway) commit(ctx context.Context, fn func(store.Tx) error, ev *core.Event) error {
	return g.commits.Commit(ctx, fn, ev)
}

// commitLater queues a write without waiting for it (best effort).
func (g *Gateway) commitLater(fn func(store.Tx) error) { g.commits.CommitLater(fn) }

// publish sends an ephemeral event to the devices now.
func (g *Gateway) publish(ev *core.Event) { g.commits.Publish(ev) }

// recover settles what a crash or a shutdown left open: replies left
// streaming become stopped replies (their saved text kept), lanes left busy
// get their agent.idle, and turns still owed are queued again, in order.
// Steering the running turn had not taken is owed like a sent message and
// runs as a turn of its own; steering it took stopped being owed when the
// turn recorded it.
func (g *Gateway) recover(ctx context.Context) error {
	if g.cfg.Leasing != nil {
		// A replica settles a lane only once it holds the lane's lease
		// (turn.Runner's syncLane): the others' lanes are running.
		return nil
	}
	ms, err := g.st.Streaming(ctx)
	if err != nil {
		return err
	}
	idle := map[core.Lane]bool{}
	replied := map[core.Lane]bool{} // lanes whose cut-off reply is kept
	for _, m := range ms {
		replied[m.Lane] = true
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
	var queued []turn.Pending
	for _, q := range owed {
		if q.Running {
			// It ran when the gateway stopped: what it said is kept above;
			// running it again could repeat its tools' side effects.
			idle[q.Lane] = true
			g.turns.SettleCutOff(ctx, q, replied[q.Lane])
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
		queued = append(queued, turn.Pending{Msg: m, Slot: g.turns.HoldSlot()})
	}
	for lk := range idle {
		if err := g.commit(ctx, nil, &core.Event{Type: core.EvAgentIdle, Lane: lk}); err != nil {
			return err
		}
	}
	for _, p := range queued {
		if err := g.turns.Enqueue(p); err != nil {
			return err
		}
	}
	if len(queued) > 0 {
		g.log.Info("answering messages left unanswered at the last stop", "turns", len(queued))
	}
	return nil
}

// committed brings what the gateway holds in memory (the channel
// directory) up to date with a committed event: its own, on the
// committer goroutine before publication (commit's AfterCommit).
func (g *Gateway) committed(ev *core.Event) { g.dir.apply(ev) }

// Remote is committed for a durable event another replica committed
// (fleet.Config.Remote), called before this replica's devices get it, so
// a device acting on a change it just heard of is judged by it here too.
//
// It is also called with another replica's picker.closed (a relayed
// frame), so that the pickers open elsewhere are known.
func (g *Gateway) Remote(ev *core.Event) {
	g.elsewhere.apply(ev)
	if ev.Type == core.EvPickerClosed {
		return
	}
	g.committed(ev)
}
