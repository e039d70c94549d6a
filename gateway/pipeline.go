package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/commit"
	"github.com/irisgate/irisgate/gateway/slash"
	"github.com/irisgate/irisgate/gateway/turn"
)

// MaxPipelined bounds the message.send of one connection accepted and not
// yet answered: past it the connection's read loop waits for the oldest,
// so a device that pipelines holds at most this many in memory.
const MaxPipelined = 64

// SendPipe is one connection's message.send in flight. A send answered
// one commit at a time caps a device at one transaction per send (issue
// 17: about 1,100 sends/s where 64 in one transaction make 17,000/s); a
// pipe lets the read loop check and queue the next send into the group
// commit while the earlier ones commit, so consecutive sends share
// transactions. What a send does before its commit (checks, the turn's
// place) runs in the read loop, in order; what it does after (the turn's
// queueing, a failed commit's error) runs on the pipe's completion
// goroutine, which waits the commits in the order they were queued and
// exists only while sends are in flight: an idle connection holds no
// goroutine.
//
// Order is kept as if the sends were handled one by one: the group commit
// commits and publishes one goroutine's writes in the order queued, so
// echoes go out in send order; turns are queued in send order; and
// whatever the dialect answers other than through the pipe (any other
// frame, a refused send's error) it answers only after Wait, once the
// sends before it are answered.
type SendPipe struct {
	g    *Gateway
	fail func(reqID int64, err error)

	mu   sync.Mutex
	room sync.Cond // signalled as sends complete
	q    []*pipedSend
	// idle is closed when the completion goroutine ends; nil while none
	// runs.
	idle chan struct{}
}

// pipedSend is a send of a pipe, queued for commit.
type pipedSend struct {
	m    core.Message
	slot *turn.Slot
	from Caller
	p    *commit.Pending
}

// NewSendPipe makes a connection's pipe. fail answers a send that fails
// after it was queued (its commit failed, its turn could not be queued):
// the dialect's error reply to the request, called on the completion
// goroutine in send order.
func (g *Gateway) NewSendPipe(fail func(reqID int64, err error)) *SendPipe {
	p := &SendPipe{g: g, fail: fail}
	p.room.L = &p.mu
	return p
}

// Pipelinable reports whether a send can go through a pipe: text for a
// lane. A slash command (it answers itself, and may change what the next
// send finds), media (checked and maybe transcribed first) and a send
// that may open an auto-thread (a commit of its own before the message's)
// take Send's serial path instead.
func Pipelinable(req SendRequest) bool {
	return len(req.MediaRefs) == 0 && !slash.Is(req.Text) && !(req.AutoThread && req.Lane.ThreadID == "")
}

// Send is Gateway.Send through the pipe. A pipelinable send is checked
// and its commit queued, and Send returns without waiting for it; any
// other waits for the sends in flight, then runs as Gateway.Send. An
// error is returned only once the sends before it are answered, so the
// caller's error reply follows their replies.
func (p *SendPipe) Send(ctx context.Context, from Caller, req SendRequest) error {
	if !Pipelinable(req) {
		p.Wait()
		return p.g.Send(ctx, from, req)
	}
	p.mu.Lock()
	if len(p.q) >= MaxPipelined {
		p.g.cfg.Metrics.PipelineFull.Inc()
		for len(p.q) >= MaxPipelined {
			p.room.Wait()
		}
	}
	p.mu.Unlock()
	s, err := p.g.queueSend(ctx, from, req)
	if err != nil {
		p.Wait()
		return err
	}
	p.g.cfg.Metrics.Pipelined.Inc()
	p.mu.Lock()
	p.q = append(p.q, s)
	if p.idle == nil {
		p.idle = make(chan struct{})
		go p.complete(p.idle)
	}
	p.mu.Unlock()
	return nil
}

// Wait returns once every send queued so far is answered. A nil pipe has
// none (a connection makes its pipe at its first send).
func (p *SendPipe) Wait() {
	if p == nil {
		return
	}
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// complete finishes the pipe's sends in order until none is left.
func (p *SendPipe) complete(idle chan struct{}) {
	defer close(idle)
	for {
		p.mu.Lock()
		if len(p.q) == 0 {
			p.q, p.idle = nil, nil // an idle connection keeps no queue
			p.mu.Unlock()
			return
		}
		s := p.q[0]
		p.mu.Unlock()
		if err := p.finish(s); err != nil {
			p.fail(s.from.ReqID, err)
		}
		p.g.cfg.Metrics.Pipelined.Dec()
		p.mu.Lock()
		p.q[0] = nil
		p.q = p.q[1:]
		p.room.Signal()
		p.mu.Unlock()
	}
}

// finish waits s's commit and queues its turn. A panic is an internal
// error of that send: the connection and its other sends go on, as the
// read loop's own recovery (server's safely) keeps them for a frame.
func (p *SendPipe) finish(s *pipedSend) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p.g.log.Error("panic finishing a send", "device", s.from.DeviceID(), "panic", fmt.Sprint(r))
			err = fmt.Errorf("panic finishing a send: %v", r)
		}
	}()
	return p.g.finishSend(s)
}

// queueSend does in the read loop what Send does before the message's
// commit, and queues the commit.
func (g *Gateway) queueSend(ctx context.Context, from Caller, req SendRequest) (*pipedSend, error) {
	if _, err := g.checkSend(ctx, &req); err != nil {
		return nil, err
	}
	if g.turns.Down() {
		return nil, turn.ErrShuttingDown.New()
	}
	s := &pipedSend{from: from, m: core.Message{ID: core.NewMessageID(), Lane: req.Lane, Role: core.RoleUser, Text: req.Text, ReplyTo: req.ReplyTo, TS: time.Now().UnixMilli()}}
	var err error
	if s.slot, err = g.turns.Reserve(req.Lane, from.Token()); err != nil {
		return nil, err
	}
	if s.p, err = g.queueMessage(ctx, from, nil, &s.m, false); err != nil {
		g.turns.Release(s.m.Lane, s.slot)
		return nil, err
	}
	return s, nil
}

// finishSend does what Send does after the message's commit.
func (g *Gateway) finishSend(s *pipedSend) error {
	if err := s.p.Wait(); err != nil {
		g.turns.Release(s.m.Lane, s.slot)
		return err
	}
	if err := g.turns.EnqueueReserved(turn.Pending{Msg: s.m, Origin: s.from.Conn, Slot: s.slot}); err != nil && !errors.Is(err, turn.ErrShuttingDown) {
		return err
	}
	return nil
}
