package gateway

import (
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// A lane's queue is bounded (MaxQueuedTurns), and lanes are cheap to make
// (every auto-thread message is a new one), so the turns are bounded
// across lanes too: per token (what one device, or one stolen token, can
// make the gateway hold) and in all. Each person's turn holds a slot from
// the moment it is reserved until it has run (or is dropped); turns
// reloaded at start-up hold one too. A turn needs one of TurnLimits.Running
// places to run: the others wait in their lanes, queued. Cron runs are
// not counted against the slots (they collapse to one waiting run per
// job) but take a running place like any turn.

// TurnLimits are those bounds; zero fields take the defaults.
type TurnLimits struct {
	PerToken int // turns queued and running of one token (64)
	InAll    int // of all tokens (512)
	Running  int // turns running at once (16)
	// Channels bounds the channel directory, channels and threads (5000):
	// it goes out whole in every hello.ack.
	Channels int
	// AutoThreadsPerMinute bounds the auto-threads one token opens (30).
	AutoThreadsPerMinute int
}

func (l *TurnLimits) defaults() {
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
}

func (l TurnLimits) tokenTurns() error {
	return core.Errorf(core.CodeRateLimited, "%d messages of this device's token already wait for the agent or run: wait for their answers", l.PerToken)
}

func (l TurnLimits) allTurns() error {
	return core.Errorf(core.CodeRateLimited, "%d messages already wait for the agent: wait for their answers", l.InAll)
}

func (l TurnLimits) directoryFull() error {
	return core.Errorf(core.CodeRateLimited, "the channel directory is full (%d channels and threads): delete some first", l.Channels)
}

func (l TurnLimits) autoThreads() error {
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
		lim := g.cfg.TurnLimits
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
	per := float64(g.cfg.TurnLimits.AutoThreadsPerMinute)
	b := c.threads[token]
	if b == nil {
		b = &threadBudget{left: per, at: now}
		c.threads[token] = b
	}
	b.left = min(per, b.left+now.Sub(b.at).Minutes()*per)
	b.at = now
	if b.left < 1 {
		g.cfg.Metrics.Limited.WithLabelValues("auto_threads").Inc()
		return g.cfg.TurnLimits.autoThreads()
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

// runPlace waits for one of the TurnLimits.Running places to run a turn;
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
func (g *Gateway) roomForChannel(tx *store.Tx) error {
	n, err := tx.ChannelCount()
	if err != nil {
		return err
	}
	if n >= g.cfg.TurnLimits.Channels {
		g.cfg.Metrics.Limited.WithLabelValues("channels").Inc()
		return g.cfg.TurnLimits.directoryFull()
	}
	return nil
}

// tokenOf is the token a caller said hello with ("": none).
func tokenOf(from Caller) string {
	if from.Conn == nil {
		return ""
	}
	return from.Conn.Token
}
