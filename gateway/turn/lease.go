package turn

import (
	"context"
	"slices"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// A gateway that is one of several replicas on one PostgreSQL database
// (issue 18) runs a lane's turns only while it holds the lane's lease: the
// store's turns table is the lane's queue, across replicas, and the
// holder runs it in order. A replica that is not the holder only queues
// (the row its commit wrote): the holder finds the turn when it looks at
// the queue before each turn and once more after letting the lease go,
// and every replica sweeps for lanes with turns and no live lease (a dead
// holder's, or one let go just as a turn was queued). docs/postgres.md,
// "Lanes across replicas", has the design; a lone gateway (Config.Leasing
// nil) does none of this and asks the store nothing more.

// LeaseStore is what the leases need of the store (postgres.Store).
type LeaseStore interface {
	TakeLane(ctx context.Context, lk core.Lane, holder string, ttl time.Duration) (store.LaneLease, error)
	LetLane(ctx context.Context, lk core.Lane, holder string) error
	LaneOwed(ctx context.Context, lk core.Lane) (bool, error)
	LaneQueued(ctx context.Context, lk core.Lane) (int, error)
	RenewLanes(ctx context.Context, holder string, ttl time.Duration) ([]store.HeldLane, error)
	OrphanLanes(ctx context.Context, holder string, grace time.Duration, limit int) ([]core.Lane, error)
	StopLane(ctx context.Context, lk core.Lane, holder string) (bool, error)
	// What a turn queued through another replica is made from.
	Message(ctx context.Context, id string) (core.Message, error)
	CronJob(ctx context.Context, id string) (store.CronJob, error)
	Streaming(ctx context.Context) ([]core.Message, error)
	Turns(ctx context.Context) ([]store.QueuedTurn, error)
	OwedCronRuns(ctx context.Context) ([]store.QueuedTurn, error)
}

// Leasing makes the runner one of several replicas'.
type Leasing struct {
	Store LeaseStore
	// Holder names this replica in the lease rows: unique to this start
	// of this gateway.
	Holder string
	// TTL is how long a lease lasts unrenewed (DefaultLeaseTTL): how long
	// a dead replica's lanes wait before another takes them over. The
	// holder renews every TTL/3.
	TTL time.Duration
	// Sweep is how often the replica looks for lanes with turns and no
	// live lease (DefaultLeaseSweep).
	Sweep time.Duration
	// Forward, when set, carries a device's picker answer or stop to the
	// replica running the lane's turn at once (the fleet, over NATS); the
	// stop goes through the lease row as well, the path when NATS is down.
	Forward Forwarder
}

// Forwarder carries commands to the other replicas (fleet.Fleet).
type Forwarder interface {
	// ForwardPick: deviceID answered pickerID (of lk, zero when unknown),
	// a picker this replica does not have.
	ForwardPick(lk core.Lane, deviceID, pickerID, value string)
	// ForwardStop: lk's turn, which another replica runs, was stopped
	// through this one (its lease row's stop count is raised already).
	ForwardStop(lk core.Lane)
	// ForwardStarted: this replica began the turn of messageID, sent
	// through another (which sends its sender the read.receipt).
	ForwardStarted(lk core.Lane, messageID string)
}

// Defaults of Leasing: a replica killed -9 has its lanes taken over
// within TTL+Sweep (17 s).
const (
	DefaultLeaseTTL   = 15 * time.Second
	DefaultLeaseSweep = 2 * time.Second
)

// orphansPerSweep bounds the lanes one sweep takes up.
const orphansPerSweep = 64

// fleet is the runner's leasing state; the lanes' own part (leased,
// until, stops) is in lane, under r.mu.
type fleet struct {
	Leasing
	renewNow chan struct{} // Poke: look at the leases now
	// awaited are the senders of turns queued here, until the turn
	// begins (receipts.go); under Runner.mu.
	awaited map[string]awaited
	// early are turns begun elsewhere before they were queued here.
	early map[string]awaited
}

func newFleet(l *Leasing) *fleet {
	if l == nil {
		return nil
	}
	f := &fleet{Leasing: *l, renewNow: make(chan struct{}, 1), awaited: map[string]awaited{}, early: map[string]awaited{}}
	if f.TTL <= 0 {
		f.TTL = DefaultLeaseTTL
	}
	if f.Sweep <= 0 {
		f.Sweep = DefaultLeaseSweep
	}
	return f
}

// leaseWait bounds one lease statement: a database that does not answer
// within it is treated as lost for that step.
func (f *fleet) leaseWait() time.Duration { return max(f.TTL/3, 100*time.Millisecond) }

// StartLeasing starts the replica's lease work: renewing its leases and
// sweeping for lanes no one holds (first at once: a start takes up what a
// dead replica left). A lone gateway's runner does nothing.
func (r *Runner) StartLeasing() {
	if r.fl == nil {
		return
	}
	r.Go(r.renewLoop)
	r.Go(r.sweepLoop)
}

// Poke says that lk may have a turn queued through another replica, or a
// stop forwarded to it: the runner takes the lane up if no live lease
// holds it, and looks at its own leases now rather than at the next
// renewal. The fleet layer calls it when NATS says so; without it the
// sweep and the renewals find the same, later. A lone gateway ignores it.
func (r *Runner) Poke(lk core.Lane) {
	if r.fl == nil {
		return
	}
	select {
	case r.fl.renewNow <- struct{}{}:
	default:
	}
	r.mu.Lock()
	if l := r.lanes[lk]; l != nil && l.active {
		l.poked = true // its goroutine looks at the queue before it ends
	}
	r.mu.Unlock()
	r.takeUp(lk)
}

// takeUp starts lk's goroutine, which takes the lane's lease and runs its
// queue, unless it runs already.
func (r *Runner) takeUp(lk core.Lane) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return
	}
	l := r.laneLocked(lk)
	if l.active {
		return
	}
	l.active = true
	r.work.Add(1)
	go r.runLane(l)
}

// syncLane takes (or extends) l's lease and makes l.pending the store's
// queue for the lane, before each of its turns. Not the holder, the lane
// keeps nothing: the holder runs what was queued here. Turns that were
// running on the replica that held the lane before are ended here, not
// run again (recover's rule at a restart). It runs on the lane's
// goroutine, between turns.
func (r *Runner) syncLane(l *lane) {
	f := r.fl
	r.mu.Lock()
	l.poked = false
	before := map[string]bool{}
	for _, p := range l.pending {
		before[p.Msg.ID] = true
	}
	r.mu.Unlock()
	sent := time.Now()
	ctx, cancel := context.WithTimeout(r.ctx, f.leaseWait())
	lease, err := f.Store.TakeLane(ctx, l.key, f.Holder, f.TTL)
	cancel()
	if err != nil && r.ctx.Err() == nil {
		// The turns stay queued in the store: the sweep takes the lane up
		// again once the database answers.
		r.log.Warn("turn: taking a lane's lease", "lane", l.key.String(), "err", err)
	}
	if err != nil || !lease.Held {
		r.mu.Lock()
		r.setLeasedLocked(l, false)
		// Queued in the store, they are the holder's now (a cron run's
		// outcome is then the holder's to log, not reported here).
		for _, p := range l.pending {
			r.freeSlotLocked(p.Slot)
		}
		l.pending = nil
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	if !l.leased {
		l.stops = lease.Stops // stops asked before this hold were for turns that ended
	}
	r.setLeasedLocked(l, true)
	l.takenAt, l.until = sent, sent.Add(f.TTL)
	r.mu.Unlock()
	if lease.TakenOver {
		r.cfg.Metrics.Takeovers.Inc()
		r.log.Info("turn: took over a lane whose replica stopped renewing its lease", "lane", l.key.String(), "queued", len(lease.Turns))
	}

	// Turns queued elsewhere (or before this start) are made from their
	// rows; those whose message is gone are forgotten.
	made := map[string]Pending{}
	var gone []string
	for _, q := range lease.Turns {
		switch {
		case q.Running:
			r.endCutOff(l.key, q)
		case before[q.MessageID]:
		default:
			p, err := r.pendingOf(q)
			if err != nil {
				r.log.Warn("turn: a queued turn cannot be run", "lane", l.key.String(), "turn", q.MessageID, "err", err)
				gone = append(gone, q.MessageID)
				continue
			}
			made[q.MessageID] = p
		}
	}
	if len(gone) > 0 {
		r.c.CommitLater(func(tx store.Tx) error {
			for _, id := range gone {
				if err := tx.EndTurn(id); err != nil {
					return err
				}
			}
			return nil
		})
	}

	var dropped []*cronRun // told after r.mu is let go: done writes the job
	defer func() {
		for _, c := range dropped {
			c.done(ErrCronStopped)
		}
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	mine := map[string]Pending{}
	for _, p := range l.pending {
		mine[p.Msg.ID] = p
	}
	var next []Pending
	used := map[string]bool{}
	// Steering the last turn did not take runs first, as on a lone
	// gateway; then the queue in the store's order.
	for _, p := range l.pending {
		if p.untaken && slices.ContainsFunc(lease.Turns, func(q store.QueuedTurn) bool { return q.MessageID == p.Msg.ID }) {
			next, used[p.Msg.ID] = append(next, p), true
		}
	}
	for _, q := range lease.Turns {
		if q.Running || used[q.MessageID] {
			continue
		}
		if p, ok := mine[q.MessageID]; ok {
			next, used[q.MessageID] = append(next, p), true
		} else if p, ok := made[q.MessageID]; ok {
			next, used[q.MessageID] = append(next, p), true
		}
	}
	for _, p := range made {
		if !used[p.Msg.ID] {
			r.freeSlotLocked(p.Slot) // queued here while it was being read
		}
	}
	for _, p := range l.pending {
		switch {
		case used[p.Msg.ID]:
		case before[p.Msg.ID]:
			// Its row is gone: dropped through another replica (/stop all).
			r.freeSlotLocked(p.Slot)
			if p.cron != nil {
				dropped = append(dropped, p.cron)
			}
		default:
			next = append(next, p) // queued while the lease was read
		}
	}
	for i := range next {
		next[i].untaken = false
	}
	l.pending = next
}

// pendingOf makes the turn of a row queued through another replica (or
// before this start): a person's message, held to no bound (it was within
// them when sent), or a cron job's prompt, whose outcome is logged.
func (r *Runner) pendingOf(q store.QueuedTurn) (Pending, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.fl.leaseWait())
	defer cancel()
	if q.CronJob != "" {
		j, err := r.fl.Store.CronJob(ctx, q.CronJob)
		if err != nil {
			return Pending{}, err
		}
		id := j.ID
		return Pending{Msg: core.Message{ID: q.MessageID, Lane: q.Lane, Text: j.Prompt}, cron: &cronRun{job: j, done: func(err error) {
			if err != nil {
				r.log.Warn("cron turn queued through another replica", "job", id, "err", err)
			}
		}}}, nil
	}
	m, err := r.fl.Store.Message(ctx, q.MessageID)
	if err != nil {
		return Pending{}, err
	}
	return Pending{Msg: m, Slot: r.HoldSlot()}, nil
}

// endCutOff ends a turn that was running on the replica that held its
// lane before (it died or lost the database): its reply so far is kept as
// a stopped reply, the lane gets its agent.idle, and the turn is not run
// again, since its tools' side effects would be done twice.
func (r *Runner) endCutOff(lk core.Lane, q store.QueuedTurn) {
	ctx := context.WithoutCancel(r.ctx)
	replied := false
	if ms, err := r.fl.Store.Streaming(ctx); err == nil {
		for _, m := range ms {
			if m.Lane != lk {
				continue
			}
			replied = true
			m.Stopped = true
			if err := r.c.Commit(ctx, func(tx store.Tx) error { return tx.FinishMessage(m) },
				&core.Event{Type: core.EvMessageStop, Lane: lk, Message: &m}); err != nil {
				r.log.Error("turn: finishing a reply cut off on another replica", "lane", lk.String(), "err", err)
			}
		}
	}
	r.SettleCutOff(ctx, q, replied)
	if err := r.c.Commit(ctx, func(tx store.Tx) error { return tx.EndTurn(q.MessageID) },
		&core.Event{Type: core.EvAgentIdle, Lane: lk}); err != nil {
		r.log.Error("turn: ending a turn cut off on another replica", "lane", lk.String(), "err", err)
	}
	r.log.Info("turn: a turn cut off on another replica was ended, not run again", "lane", lk.String(), "turn", q.MessageID)
}

// letLane gives l's lease up once its queue is empty, then looks at the
// store's queue once more: a turn queued through another replica while
// this one held the lease was left to it. It reports whether the lane
// has turns again (the caller runs them). It runs on the lane's goroutine.
func (r *Runner) letLane(l *lane) (again bool) {
	f := r.fl
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), f.leaseWait())
	defer cancel()
	if err := f.Store.LetLane(ctx, l.key, f.Holder); err != nil {
		// It expires: another replica takes the lane up after TTL.
		r.log.Warn("turn: letting a lane's lease go", "lane", l.key.String(), "err", err)
	}
	r.mu.Lock()
	r.setLeasedLocked(l, false)
	down := r.down
	r.mu.Unlock()
	if down {
		return false
	}
	owed, err := f.Store.LaneOwed(ctx, l.key)
	if err != nil {
		r.log.Warn("turn: looking at a lane's queue", "lane", l.key.String(), "err", err)
	}
	return owed
}

func (r *Runner) setLeasedLocked(l *lane, on bool) {
	if l.leased == on {
		return
	}
	l.leased = on
	if on {
		r.cfg.Metrics.LeasesHeld.Inc()
	} else {
		r.cfg.Metrics.LeasesHeld.Dec()
	}
}

// renewLoop renews the replica's leases every TTL/3 (and when poked). A
// lease lost (another replica took the lane after it expired) or not
// renewed in time (the database unreachable: a network split, a
// PostgreSQL restart) stops the lane's running turn before another
// replica can take the lane: the local deadline is counted from before
// the renewal was sent, so it passes no later than the row's expiry.
// A stop forwarded through another replica stops the running turn too.
func (r *Runner) renewLoop(ctx context.Context) {
	f := r.fl
	t := time.NewTicker(max(f.TTL/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.renewNow:
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, f.leaseWait())
		held, err := f.Store.RenewLanes(rctx, f.Holder, f.TTL)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Warn("turn: renewing lane leases", "err", err)
		}
		for _, lk := range r.renewed(held, err == nil, sent) {
			r.takeUp(lk)
		}
	}
}

// renewed applies a renewal's answer (ok false: it failed). It returns
// the lanes the store says this replica holds and it does not run (it
// lost track of them when a statement failed): the caller takes them up,
// to run their queue or let them go.
func (r *Runner) renewed(held []store.HeldLane, ok bool, sent time.Time) (untracked []core.Lane) {
	f := r.fl
	stops := map[core.Lane]int64{}
	for _, h := range held {
		stops[h.Lane] = h.Stops
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range held {
		if l := r.lanes[h.Lane]; l == nil || (!l.leased && !l.active) {
			untracked = append(untracked, h.Lane)
		}
	}
	for key, l := range r.lanes {
		if !l.leased {
			continue
		}
		n, still := stops[key]
		switch {
		case ok && still:
			l.until = sent.Add(f.TTL)
			if n > l.stops {
				l.stops = n
				if t := l.running; t != nil {
					r.log.Info("turn: stopped through another replica", "lane", key.String())
					t.mu.Lock()
					t.stopping = true
					t.mu.Unlock()
					t.cancel()
				}
			}
		case ok && l.takenAt.Before(sent), !ok && now.After(l.until):
			// Lost, or expired here before it could be renewed: another
			// replica may run the lane now, so this one must not.
			r.log.Warn("turn: lost a lane's lease; its running turn is stopped", "lane", key.String())
			r.setLeasedLocked(l, false)
			if t := l.running; t != nil {
				t.cancel()
			}
		}
	}
	return untracked
}

// sweepLoop takes up the lanes with turns queued and no live lease,
// queued at least TTL/3 ago (the replica they were queued through takes
// the lease itself at once, and its device sees the turn live).
func (r *Runner) sweepLoop(ctx context.Context) {
	f := r.fl
	t := time.NewTicker(f.Sweep)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, f.leaseWait())
		lanes, err := f.Store.OrphanLanes(sctx, f.Holder, f.TTL/3, orphansPerSweep)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Warn("turn: looking for lanes no replica holds", "err", err)
		}
		for _, lk := range lanes {
			r.takeUp(lk)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// queuedElsewhere counts the people's turns waiting in lk's queue in the
// store, for Reserve: a replica keeps none of the turns it queues for a
// lane another replica holds, so its own count would never reach the
// bound. A store that does not answer lets the send through (the
// store will not take the message either).
func (r *Runner) queuedElsewhere(lk core.Lane) int {
	ctx, cancel := context.WithTimeout(r.ctx, r.fl.leaseWait())
	defer cancel()
	n, err := r.fl.Store.LaneQueued(ctx, lk)
	if err != nil {
		r.log.Warn("turn: counting a lane's queue", "lane", lk.String(), "err", err)
		return 0
	}
	return n
}

// holds reports whether this replica holds lk's lease.
func (r *Runner) holds(lk core.Lane) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lanes[lk]
	return l != nil && l.leased
}

// stopElsewhere forwards a stop of lk to the replica whose turn runs
// there; false when none holds the lane.
func (r *Runner) stopElsewhere(lk core.Lane) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.fl.leaseWait())
	defer cancel()
	ok, err := r.fl.Store.StopLane(ctx, lk, r.fl.Holder)
	if err != nil {
		r.log.Warn("turn: forwarding a stop", "lane", lk.String(), "err", err)
	}
	if ok && r.fl.Forward != nil {
		r.fl.Forward.ForwardStop(lk)
	}
	return ok
}

// StopForwarded is another replica's word that lk was stopped through it:
// if this replica holds the lane, it renews its leases now, and the
// renewal reads the stop from the lease row and stops the running turn.
// The row stays the one authority (a peer's word stops nothing itself,
// and a stop is applied once whichever path sees it first).
func (r *Runner) StopForwarded(lk core.Lane) {
	if r.fl == nil || !r.holds(lk) {
		return
	}
	select {
	case r.fl.renewNow <- struct{}{}:
	default:
	}
}

// dropQueuedElsewhere forgets the turns of lk queued in the store and not
// running, which this replica does not hold: /stop all sent through a
// replica that does not run the lane. The holder drops them from its own
// list when it next looks at the queue. It returns how many were
// people's.
func (r *Runner) dropQueuedElsewhere(ctx context.Context, lk core.Lane) (int, error) {
	owed, err := r.fl.Store.Turns(ctx)
	if err != nil {
		return 0, err
	}
	crons, err := r.fl.Store.OwedCronRuns(ctx)
	if err != nil {
		return 0, err
	}
	owed = append(owed, crons...)
	var ids []string
	people := 0
	for _, q := range owed {
		if q.Lane == lk && !q.Running {
			ids = append(ids, q.MessageID)
			if q.CronJob == "" {
				people++
			}
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	err = r.c.Commit(ctx, func(tx store.Tx) error {
		for _, id := range ids {
			if err := tx.EndTurn(id); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	return people, err
}
