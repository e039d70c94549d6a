package gateway

import (
	"context"
	"slices"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// A lane's queue is bounded (MaxQueuedTurns), and lanes are cheap to make
// (every auto-thread message is a new one), so the turns are bounded
// across lanes too: per token (what one device, or one stolen token, can
// make the gateway hold) and in all. Each person's turn holds a slot from
// the moment it is reserved until it has run (or is dropped); turns
// reloaded at start-up hold one too. A turn needs one of Bounds.Running
// places to run: the others wait in their lanes, queued. Cron runs are
// not counted against the slots (they collapse to one waiting run per
// job) but take a running place like any turn.

// Bounds are those bounds, and the other bounds of the core on what
// clients can make it hold; zero fields take the defaults.
type Bounds struct {
	PerToken int // turns queued and running of one token (64)
	InAll    int // of all tokens (512)
	Running  int // turns running at once (16)
	// Channels bounds the channel directory, channels and threads (5000):
	// it goes out whole in every hello.ack.
	Channels int
	// AutoThreadsPerMinute bounds the auto-threads one token opens (30).
	AutoThreadsPerMinute int
	// ConnsPerToken bounds the live connections of one token (64).
	ConnsPerToken int
	// Devices bounds the device rows kept without a push registration
	// (10,000): the oldest seen go first, and any unseen for DeviceAge
	// (90 days).
	Devices   int
	DeviceAge time.Duration
}

func (l *Bounds) defaults() {
	if l.PerToken == 0 {
		l.PerToken = 64
	}
	if l.InAll == 0 {
		l.InAll = 512
	}
	if l.Running == 0 {
		l.Running = 16
	}
	if l.Channels == 0 {
		l.Channels = 5000
	}
	if l.AutoThreadsPerMinute == 0 {
		l.AutoThreadsPerMinute = 30
	}
	if l.ConnsPerToken == 0 {
		l.ConnsPerToken = 64
	}
	if l.Devices == 0 {
		l.Devices = 10_000
	}
	if l.DeviceAge == 0 {
		l.DeviceAge = 90 * 24 * time.Hour
	}
}

func (l Bounds) tokenTurns() error {
	return core.Errorf(core.CodeRateLimited, "%d messages of this device's token already wait for the agent or run: wait for their answers", l.PerToken)
}

func (l Bounds) allTurns() error {
	return core.Errorf(core.CodeRateLimited, "%d messages already wait for the agent: wait for their answers", l.InAll)
}

func (l Bounds) directoryFull() error {
	return core.Errorf(core.CodeRateLimited, "the channel directory is full (%d channels and threads): delete some first", l.Channels)
}

func (l Bounds) autoThreads() error {
	return core.Errorf(core.CodeRateLimited, "more than %d new threads a minute: send into an existing thread, or wait a moment", l.AutoThreadsPerMinute)
}

// turnSlot is one turn's place in the bounds. Freeing it twice frees it
// once.
type turnSlot struct {
	token string
	freed bool
}

// turnCounts are the slots held; guarded by Gateway.mu.
type turnCounts struct {
	all     int
	byToken map[string]int
	// threads is each token's auto-thread budget (a token bucket).
	threads map[string]*threadBudget
	// conns counts the live connections by token.
	conns map[string]int
}

type threadBudget struct {
	left float64
	at   time.Time
}

// takeSlotLocked holds a slot for a turn of token ("": none, a turn
// no device asked for), or says which bound is full. g.mu is held.
func (g *Gateway) takeSlotLocked(token string, force bool) (*turnSlot, error) {
	c := &g.counts
	if c.byToken == nil {
		c.byToken = map[string]int{}
	}
	if !force {
		lim := g.cfg.Bounds
		if token != "" && c.byToken[token] >= lim.PerToken {
			g.cfg.Metrics.Limited.WithLabelValues("token_turns").Inc()
			return nil, lim.tokenTurns()
		}
		if c.all >= lim.InAll {
			g.cfg.Metrics.Limited.WithLabelValues("all_turns").Inc()
			return nil, lim.allTurns()
		}
	}
	c.all++
	if token != "" {
		c.byToken[token]++
	}
	return &turnSlot{token: token}, nil
}

// freeSlot gives a slot back (nil: none was held).
func (g *Gateway) freeSlot(s *turnSlot) {
	if s == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.freeSlotLocked(s)
}

func (g *Gateway) freeSlotLocked(s *turnSlot) {
	if s == nil || s.freed {
		return
	}
	s.freed = true
	g.counts.all--
	if s.token != "" {
		if g.counts.byToken[s.token]--; g.counts.byToken[s.token] <= 0 {
			delete(g.counts.byToken, s.token)
		}
	}
}

// autoThread takes one of token's auto-threads of the minute.
func (g *Gateway) autoThread(token string, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &g.counts
	if c.threads == nil {
		c.threads = map[string]*threadBudget{}
	}
	per := float64(g.cfg.Bounds.AutoThreadsPerMinute)
	b := c.threads[token]
	if b == nil {
		b = &threadBudget{left: per, at: now}
		c.threads[token] = b
	}
	b.left = min(per, b.left+now.Sub(b.at).Minutes()*per)
	b.at = now
	if b.left < 1 {
		g.cfg.Metrics.Limited.WithLabelValues("auto_threads").Inc()
		return g.cfg.Bounds.autoThreads()
	}
	b.left--
	// Full budgets are forgotten: the map holds only the tokens that
	// made threads within the last minute.
	for k, o := range c.threads {
		if o.left+now.Sub(o.at).Minutes()*per >= per {
			delete(c.threads, k)
		}
	}
	return nil
}

// runPlace waits for one of the Bounds.Running places to run a turn;
// false when the gateway is stopping.
func (g *Gateway) runPlace() bool {
	select {
	case g.running <- struct{}{}:
		return true
	case <-g.ctx.Done():
		return false
	}
}

func (g *Gateway) leavePlace() { <-g.running }

// roomForChannel refuses a new channel or thread when the directory is
// full; it runs inside the transaction that adds it.
func (g *Gateway) roomForChannel(tx store.Tx) error {
	n, err := tx.ChannelCount()
	if err != nil {
		return err
	}
	if n >= g.cfg.Bounds.Channels {
		g.cfg.Metrics.Limited.WithLabelValues("channels").Inc()
		return g.cfg.Bounds.directoryFull()
	}
	return nil
}

// countConn counts a connection of d's token about to be registered, or
// refuses it when the token has as many as it may; the connection it
// replaces (the same device's) does not count.
func (g *Gateway) countConn(d Device) error {
	if d.Token == "" {
		return nil
	}
	online := g.hub.Online(d.ID)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.counts.conns == nil {
		g.counts.conns = map[string]int{}
	}
	n := g.counts.conns[d.Token]
	if online {
		n--
	}
	if n >= g.cfg.Bounds.ConnsPerToken {
		g.cfg.Metrics.Limited.WithLabelValues("token_conns").Inc()
		return core.Errorf(core.CodeRateLimited, "%d connections of this token are open, as many as it may have: close one first", g.cfg.Bounds.ConnsPerToken)
	}
	g.counts.conns[d.Token]++
	return nil
}

func (g *Gateway) uncountConn(token string) {
	if token == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.counts.conns[token]--; g.counts.conns[token] <= 0 {
		delete(g.counts.conns, token)
	}
}

// pruneDevices forgets the device rows past Bounds.Devices and DeviceAge
// that have no push registration and no live connection: a client choosing
// a new device id at every hello would grow the table without end.
func (g *Gateway) pruneDevices(ctx context.Context) {
	before := time.Now().Add(-g.cfg.Bounds.DeviceAge).UnixMilli()
	var gone int
	for ctx.Err() == nil {
		ids, err := g.st.StaleDevices(ctx, g.cfg.Bounds.Devices, before, 1000)
		if err == nil {
			ids = slices.DeleteFunc(ids, g.hub.Online)
			err = g.st.DeleteDevices(ctx, ids)
		}
		if err != nil {
			if ctx.Err() == nil {
				g.log.Warn("pruning device rows", "err", err)
			}
			return
		}
		gone += len(ids)
		if len(ids) < 1000 {
			break
		}
	}
	if gone > 0 {
		g.log.Info("forgot devices long unseen or past the bound, with no push registration", "devices", gone)
	}
}

// tokenOf is the token a caller said hello with ("": none).
func tokenOf(from Caller) string {
	if from.Conn == nil {
		return ""
	}
	return from.Conn.Token
}
