package turn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// turn is a running turn. Its stream fields are read by Snapshot for
// devices that join mid-turn.
type turn struct {
	cancel context.CancelFunc
	steer  chan agent.Steer

	mu       sync.Mutex
	ran      bool // the agent returned: steering no longer reaches it
	ended    bool // its agent.idle is going out: later stops are answered apart
	stopping bool // a person stopped it: the steering sent for it ends too
	stopReqs []core.ReplyAddr
	// steered is the steering handed to the agent, oldest first. Each is
	// also an owed turn in the store (QueueTurn) until the turn consumes
	// it, so a restart answers what the agent never took.
	steered  []Pending
	streamID string
	text     string
}

// steeredBy reports whether id is steering handed to this turn, which the
// agent records once it takes it (agent.Turn.Steer).
func (t *turn) steeredBy(id string) bool {
	if id == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.steered {
		if p.Msg.ID == id {
			return true
		}
	}
	return false
}

// closeSteering ends the turn's steering once the agent has returned (or
// will never run). It returns the steering the agent did not take, oldest
// first, and the ids of what it took.
func (t *turn) closeSteering() (untaken []Pending, taken []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ran = true
	// The channel holds the newest steers, those the agent did not take.
	n := len(t.steer)
	for range n {
		<-t.steer
	}
	cut := len(t.steered) - n
	for _, p := range t.steered[:cut] {
		taken = append(taken, p.Msg.ID)
	}
	return t.steered[cut:], taken
}

func (t *turn) snapshot() (id, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streamID, t.text
}

// Stop ends lk's running turn; the answer to from is the turn's
// agent.idle. With nothing running the answer is an agent.idle at once.
// On a replica, a turn running on another replica is stopped through the
// store (lease.go): that replica stops it at its next look at its leases
// (Poke makes that at once), and its agent.idle reaches every device;
// the answer to from is then the agent.idle sent at once here.
func (r *Runner) Stop(from hub.Caller, lk core.Lane) {
	t := r.running(lk)
	rep := from.Reply()
	if t == nil && r.fl != nil && !r.holds(lk) {
		r.stopElsewhere(lk)
	}
	ended := true
	if t != nil {
		t.mu.Lock()
		ended = t.ended
		if rep != nil && !ended {
			t.stopReqs = append(t.stopReqs, *rep)
		}
		if !ended {
			t.stopping = true
		}
		t.mu.Unlock()
	}
	if ended {
		// Nothing runs, or the turn's agent.idle has gone out without
		// this request's id: answer it now.
		if rep != nil {
			r.replyIdle(*rep, lk)
		}
		return
	}
	t.cancel()
}

func (r *Runner) replyIdle(rep core.ReplyAddr, lk core.Lane) {
	if c := r.host.Conn(rep.ConnID); c != nil {
		c.SendEvent(&core.Event{Type: core.EvAgentIdle, Lane: lk, TS: time.Now().UnixMilli()}, rep.ReqID)
	}
}

// Steer hands text to lk's running turn, which takes it before its next
// model call; ok is false when no turn runs (the caller then sends the
// text as a message). The text is kept in history as the person's message
// and echoed like one. When the turn ends without taking it, it runs next
// as a turn of its own. Until the turn takes it, it is owed like a sent
// message (a turn row in the store): a restart before then answers it as
// a turn of its own, and one after does not answer it again.
func (r *Runner) Steer(ctx context.Context, from hub.Caller, lk core.Lane, text string) (ok bool, err error) {
	t := r.running(lk)
	if t == nil {
		return false, nil
	}
	// Echoed first, so devices see the words before the agent acts on them.
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleUser, Text: text, TS: time.Now().UnixMilli()}
	// Steering the turn does not take runs as a turn of its own: it holds
	// a place in the queue until the turn takes it.
	slot, err := r.Reserve(lk, from.Token())
	if err != nil {
		return true, err
	}
	// The row is committed before the turn can see the steer, so the
	// turn's consuming it (which deletes the row) always comes after.
	if err := r.c.Commit(ctx, func(tx store.Tx) error {
		if err := tx.InsertMessage(m, false); err != nil {
			return err
		}
		return tx.QueueTurn(lk, m.ID)
	}, &core.Event{Type: core.EvMessage, Lane: lk, Message: &m, ReplyTo: from.Reply()}); err != nil {
		r.Release(lk, slot)
		return true, err
	}
	// Taken or not, the steer holds its slot until it has run.
	p := Pending{Msg: m, Origin: from.Conn, Slot: slot}
	t.mu.Lock()
	taken := false
	// A turn being stopped would drop the steer with its own steering:
	// sent after the stop, it runs next instead.
	if !t.ran && !t.stopping {
		select {
		case t.steer <- agent.Steer{Text: text, MessageID: m.ID}:
			t.steered = append(t.steered, p)
			taken = true
		default: // the agent has not taken the earlier ones yet
		}
	}
	t.mu.Unlock()
	if taken {
		r.Release(lk, nil)
		return true, nil
	}
	// Echoed and owed: at shutdown the next start answers it, as a sent
	// message's.
	if err := r.EnqueueReserved(p); err != nil && !errors.Is(err, ErrShuttingDown) {
		return true, err
	}
	return true, nil
}

// settleSteering closes t's steering once its agent has returned. What
// the agent took is settled with the turn (its rows go with the turn's
// own; those it recorded are gone already). What it did not take runs
// next; a person's stop ends it too, and a shutdown leaves it owed in the
// store, for the next start to answer. It returns the turns to run next
// and the rows to forget with the turn's.
func (r *Runner) settleSteering(t *turn, stopped bool) (next []Pending, forget []string) {
	untaken, forget := t.closeSteering()
	t.mu.Lock()
	personStop := t.stopping
	t.mu.Unlock()
	switch {
	case !stopped:
		next = untaken
	case personStop || r.ctx.Err() == nil: // a person's stop, or its channel was deleted
		for _, p := range untaken {
			forget = append(forget, p.Msg.ID)
		}
	}
	return next, forget
}

// endTurn ends a turn with its lane's agent.idle, which answers the first
// agent.stop that asked for it (the others are answered apart), and
// forgets the turn's row in the same commit, with the rows of the
// steering it settled (also).
func (r *Runner) endTurn(t *turn, lk core.Lane, turnID string, also ...string) {
	t.mu.Lock()
	t.ended = true
	reqs := t.stopReqs
	t.mu.Unlock()
	idle := &core.Event{Type: core.EvAgentIdle, Lane: lk}
	if len(reqs) > 0 {
		idle.ReplyTo = &reqs[0]
	}
	if err := r.c.Commit(context.Background(), func(tx store.Tx) error {
		for _, id := range append([]string{turnID}, also...) {
			if err := tx.EndTurn(id); err != nil {
				return err
			}
		}
		return nil
	}, idle); err != nil {
		r.log.Error("turn: agent.idle", "lane", lk.String(), "err", err)
	}
	for _, rep := range reqs[min(1, len(reqs)):] {
		r.replyIdle(rep, lk)
	}
}
