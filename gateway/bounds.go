package gateway

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/irisgate/irisgate/store"
)

// Bounds bound what clients can make the core hold; zero fields take the
// defaults. The first three bound the turns across lanes: they are the
// turn runner's (turn.Bounds, which says why and keeps their defaults).
type Bounds struct {
	PerToken int // turns queued and running of one token
	InAll    int // of all tokens
	Running  int // turns running at once
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
	if l.Channels == 0 {
		l.Channels = DefaultChannels
	}
	if l.AutoThreadsPerMinute == 0 {
		l.AutoThreadsPerMinute = DefaultAutoThreadsPerMinute
	}
	if l.ConnsPerToken == 0 {
		l.ConnsPerToken = DefaultConnsPerToken
	}
	if l.Devices == 0 {
		l.Devices = DefaultDevices
	}
	if l.DeviceAge == 0 {
		l.DeviceAge = DefaultDeviceAge
	}
}

// limits are what the gateway's own bounds hold (the turns' are package
// turn's: turn.Runner counts them).
type limits struct {
	mu sync.Mutex
	// threads is each token's auto-thread budget (a token bucket).
	threads map[string]*threadBudget
	// conns counts the live connections by token.
	conns map[string]int
}

type threadBudget struct {
	left float64
	at   time.Time
}

// autoThread takes one of token's auto-threads of the minute.
func (g *Gateway) autoThread(token string, now time.Time) error {
	c := &g.limits
	c.mu.Lock()
	defer c.mu.Unlock()
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
		return ErrAutoThreads.New(g.cfg.Bounds.AutoThreadsPerMinute)
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

// roomForChannel refuses a new channel or thread when the directory is
// full; it runs inside the transaction that adds it.
func (g *Gateway) roomForChannel(tx store.Tx) error {
	n, err := tx.ChannelCount()
	if err != nil {
		return err
	}
	if n >= g.cfg.Bounds.Channels {
		g.cfg.Metrics.Limited.WithLabelValues("channels").Inc()
		return ErrDirectoryFull.New(g.cfg.Bounds.Channels)
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
	c := &g.limits
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[string]int{}
	}
	n := c.conns[d.Token]
	if online {
		n--
	}
	if n >= g.cfg.Bounds.ConnsPerToken {
		g.cfg.Metrics.Limited.WithLabelValues("token_conns").Inc()
		return ErrTokenConns.New(g.cfg.Bounds.ConnsPerToken)
	}
	c.conns[d.Token]++
	return nil
}

func (g *Gateway) uncountConn(token string) {
	if token == "" {
		return
	}
	c := &g.limits
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns[token]--; c.conns[token] <= 0 {
		delete(c.conns, token)
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
			ids = slices.DeleteFunc(ids, g.hub.Reachable)
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
