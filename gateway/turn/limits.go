package turn

import "github.com/irisgate/irisgate/core"

// A lane's queue is bounded (MaxQueued), and lanes are cheap to make
// (every auto-thread message is a new one), so the turns are bounded
// across lanes too: per token (what one device, or one stolen token, can
// make the gateway hold) and in all. Each person's turn holds a Slot from
// the moment it is reserved until it has run (or is dropped); turns
// reloaded at start-up hold one too. A turn needs one of Bounds.Running
// places to run: the others wait in their lanes, queued. Cron runs are
// not counted against the slots (they collapse to one waiting run per
// job) but take a running place like any turn.

// Bounds are those bounds; zero fields take the defaults.
type Bounds struct {
	PerToken int // turns queued and running of one token
	InAll    int // of all tokens
	Running  int // turns running at once
}

// The defaults of Bounds.
const (
	DefaultPerToken = 64
	DefaultInAll    = 512
	DefaultRunning  = 16
)

// The bounds' refusals.
var (
	ErrTokenTurns = core.NewKind("turns_of_token_full", core.CodeRateLimited, "%d messages of this device's token already wait for the agent or run: wait for their answers")
	ErrAllTurns   = core.NewKind("turns_full", core.CodeRateLimited, "%d messages already wait for the agent: wait for their answers")
)

func (b *Bounds) defaults() {
	if b.PerToken == 0 {
		b.PerToken = DefaultPerToken
	}
	if b.InAll == 0 {
		b.InAll = DefaultInAll
	}
	if b.Running == 0 {
		b.Running = DefaultRunning
	}
}

// Slot is one turn's place in the bounds across lanes. Freeing it twice
// frees it once.
type Slot struct {
	token string
	freed bool
}

// slots are the slots held, per token and in all; guarded by Runner.mu.
type slots struct {
	all     int
	byToken map[string]int
}

// takeSlotLocked holds a slot for a turn of token ("": none, a turn no
// device asked for), or says which bound is full; force holds it past
// the bounds. r.mu is held.
func (r *Runner) takeSlotLocked(token string, force bool) (*Slot, error) {
	c := &r.slots
	if c.byToken == nil {
		c.byToken = map[string]int{}
	}
	if !force {
		b := r.cfg.Bounds
		if token != "" && c.byToken[token] >= b.PerToken {
			r.cfg.Metrics.Limited.WithLabelValues("token_turns").Inc()
			return nil, ErrTokenTurns.New(b.PerToken)
		}
		if c.all >= b.InAll {
			r.cfg.Metrics.Limited.WithLabelValues("all_turns").Inc()
			return nil, ErrAllTurns.New(b.InAll)
		}
	}
	c.all++
	if token != "" {
		c.byToken[token]++
	}
	return &Slot{token: token}, nil
}

// TakeSlot holds a slot for a turn of token about to be stored and
// queued with Enqueue (Reserve holds one with the lane's place), or says
// which bound is full. The caller frees it (FreeSlot) when the turn is
// not queued after all.
func (r *Runner) TakeSlot(token string) (*Slot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.takeSlotLocked(token, false)
}

// HoldSlot holds a slot past the bounds: for a turn reloaded at start-up,
// which was within them when it was sent.
func (r *Runner) HoldSlot() *Slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, _ := r.takeSlotLocked("", true)
	return s
}

// FreeSlot gives a slot back (nil: none was held).
func (r *Runner) FreeSlot(s *Slot) {
	if s == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freeSlotLocked(s)
}

func (r *Runner) freeSlotLocked(s *Slot) {
	if s == nil || s.freed {
		return
	}
	s.freed = true
	r.slots.all--
	if s.token != "" {
		if r.slots.byToken[s.token]--; r.slots.byToken[s.token] <= 0 {
			delete(r.slots.byToken, s.token)
		}
	}
}

// runPlace waits for one of the Bounds.Running places to run a turn;
// false when the runner is shutting down.
func (r *Runner) runPlace() bool {
	select {
	case r.places <- struct{}{}:
		return true
	case <-r.ctx.Done():
		return false
	}
}

func (r *Runner) leavePlace() { <-r.places }
