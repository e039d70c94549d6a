package turn

import (
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// read.receipt goes to the device that sent a message when the agent takes
// the message up (spec/DECISIONS.md). On replicas the turn may run on the
// replica holding the lane's lease while the sender is connected here: the
// holder tells the fleet it began the turn (Forwarder.ForwardStarted), and
// the replica the message was sent through, which remembers its sender
// until then, sends the receipt.

// Bounds of what is remembered: a receipt for a turn that waits longer
// than receiptWait, or beyond maxAwaited at once, is not sent (the reply
// still comes).
const (
	maxAwaited  = 4096
	receiptWait = 15 * time.Minute
	// earlyWait is how long a start heard before its message was queued
	// here is kept (early): its sender's replica queues it within this.
	earlyWait = time.Minute
)

type awaited struct {
	lane   core.Lane
	origin *hub.Conn
	since  time.Time
}

// awaitReceiptLocked remembers p's sender, on a replica, until the turn
// begins here or elsewhere. r.mu is held.
func (r *Runner) awaitReceiptLocked(p Pending) {
	if r.fl == nil || p.Origin == nil || p.cron != nil {
		return
	}
	f := r.fl
	if at, ok := f.early[p.Msg.ID]; ok && at.lane == p.Msg.Lane {
		// The holder began the turn before this replica got here.
		delete(f.early, p.Msg.ID)
		p.Origin.SendEvent(receiptOf(p.Msg.Lane, p.Msg.ID), 0)
		return
	}
	putBounded(f.awaited, p.Msg.ID, awaited{lane: p.Msg.Lane, origin: p.Origin, since: time.Now()}, receiptWait)
}

// putBounded adds a to m unless m is full of entries younger than keep
// (the older ones are dropped first).
func putBounded(m map[string]awaited, id string, a awaited, keep time.Duration) {
	if len(m) >= maxAwaited {
		for k, e := range m {
			if a.since.Sub(e.since) > keep {
				delete(m, k)
			}
		}
		if len(m) >= maxAwaited {
			return
		}
	}
	m[id] = a
}

// begun settles the receipt of a turn that begins here. One whose
// sender is known (Origin) got its receipt from runTurn; one made from
// the store's queue was sent through this replica earlier (its sender is
// remembered: the receipt goes now) or through another, which is told.
func (r *Runner) begun(p Pending) {
	if r.fl == nil || p.cron != nil {
		return
	}
	r.mu.Lock()
	a, ok := r.fl.awaited[p.Msg.ID]
	delete(r.fl.awaited, p.Msg.ID)
	r.mu.Unlock()
	switch {
	case p.Origin != nil:
	case ok && a.lane == p.Msg.Lane:
		a.origin.SendEvent(receiptOf(p.Msg.Lane, p.Msg.ID), 0)
	case r.fl.Forward != nil:
		r.fl.Forward.ForwardStarted(p.Msg.Lane, p.Msg.ID)
	}
}

func receiptOf(lk core.Lane, messageID string) *core.Event {
	return &core.Event{Type: core.EvReadReceipt, Lane: lk, MessageIDs: []string{messageID}, TS: time.Now().UnixMilli()}
}

// StartedElsewhere is another replica's word that it began the turn of
// messageID in lk: the device that sent it through this replica gets its
// read.receipt. A word about a message this replica did not take in, or
// of another lane, does nothing.
func (r *Runner) StartedElsewhere(lk core.Lane, messageID string) {
	if r.fl == nil {
		return
	}
	r.mu.Lock()
	a, ok := r.fl.awaited[messageID]
	if ok && a.lane == lk {
		delete(r.fl.awaited, messageID)
	} else if !ok {
		r.noteEarlyLocked(lk, messageID)
	}
	r.mu.Unlock()
	if ok && a.lane == lk {
		a.origin.SendEvent(receiptOf(lk, messageID), 0)
	}
}

// noteEarlyLocked keeps another replica's word that a turn began, for a
// message this replica may still be queueing: its holder can take it up
// before the sending replica has got from its commit to its queue (under
// load). Bounded like awaited; kept earlyWait. r.mu is held.
func (r *Runner) noteEarlyLocked(lk core.Lane, messageID string) {
	putBounded(r.fl.early, messageID, awaited{lane: lk, since: time.Now()}, earlyWait)
}
