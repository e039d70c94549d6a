package server

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/hub"
)

// prober owns a socket's WebSocket pings: the keepalive and the proofs of
// delivery. A peer answers a Ping only once it has read every frame
// before it (browsers and WebSocket libraries do, without app code), so
// the Pong proves the outbox frames written before the Ping. One ping is
// in flight at a time; frames written meanwhile wait for the next, which
// goes out as soon as the answer comes (and only when such frames exist):
// under load a ping covers many batches, and an idle connection sends
// only the keepalive. Consecutive proof pings are at least
// Config.ProofEvery apart: a connection fed a frame a millisecond would
// otherwise pay a Ping, a Pong and their timers per frame (a third of the
// gateway's CPU in the paced fan-out's profile), while a proof only
// spares sync a replay, which a few milliseconds' delay costs nothing.
//
// The answer is recognised by its payload, in the read loop itself
// (OnPongReceived), so a proof is in place before any later frame of the
// device is handled — a close, a sync. coder/websocket gives the n-th
// Ping of a connection the payload "n"; the prober is the only caller of
// Ping on its socket, so it knows which payload answers its ping. (Were
// that ever to change, nothing would be proven and sync would replay
// more, never less: TestSyncSkipsProvenFrames would say so.)
type prober struct {
	s  *Server
	ws *websocket.Conn

	mu        sync.Mutex
	conn      *hub.Conn     // the Iris connection whose frames it proves; nil before hello and for Hermes Mobile
	pings     int64         // Ping calls made on ws
	want      string        // payload of the ping in flight, "" when it was answered
	inflight  bool          // a ping is in flight, or the next one is scheduled
	scheduled bool          // the next one is scheduled (again), not sent yet
	settling  bool          // the socket is closing: proofs go at once (settle)
	idle      chan struct{} // made by settle, closed when no ping is in flight
	last      time.Time     // when the last ping went out
	ended     bool          // the socket's handler is done: no new pings
	// stalled is set while the read loop waits for a grant to read a
	// large frame (readFrame): it reads nothing meanwhile, Pongs
	// included, so an unanswered ping then says nothing of the peer.
	stalled atomic.Bool
}

// stall is readFrame's report of a wait for a grant.
func (p *prober) stall(on bool) { p.stalled.Store(on) }

// attach makes the prober prove conn's frames.
func (p *prober) attach(conn *hub.Conn) {
	p.mu.Lock()
	p.conn = conn
	p.mu.Unlock()
}

// end stops new pings; the one in flight fails when the socket closes.
func (p *prober) end() {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
}

// ping sends a ping unless one is in flight (whose answer, or its
// absence, serves as well). The frames written so far are the ones it
// proves.
func (p *prober) ping() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight || p.ended {
		return
	}
	p.startLocked()
	p.s.wg.Add(1) // the socket's handler still holds the group: !ended
	go p.run()
}

// proof asks for a ping proving the frames written so far: at once, or
// ProofEvery after the last ping.
func (p *prober) proof() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight || p.ended {
		return
	}
	if wait := time.Until(p.last.Add(p.s.cfg.ProofEvery)); wait > 0 && !p.settling {
		p.inflight = true // what is written meanwhile waits for this one
		p.scheduleLocked(wait)
		return
	}
	p.startLocked()
	p.s.wg.Add(1) // the socket's handler still holds the group: !ended
	go p.run()
}

// scheduleLocked has again send the next proof ping after wait.
func (p *prober) scheduleLocked(wait time.Duration) {
	p.scheduled = true
	time.AfterFunc(wait, p.again)
}

// doneLocked records that no ping is in flight any more.
func (p *prober) doneLocked() {
	p.inflight, p.want = false, ""
	if p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}

// settle is called before the socket is closed on purpose (a restart):
// a proof ping put off by ProofEvery goes now, and settle waits (at most
// a second) until the frames written so far are proven or the ping
// fails, so a device that comes back is replayed nothing it had.
func (p *prober) settle() {
	p.mu.Lock()
	p.settling = true
	switch {
	case p.ended || p.conn == nil:
	case p.scheduled:
		p.scheduled = false // again does nothing now
		p.startLocked()
		p.s.wg.Add(1)
		go p.run()
	case !p.inflight && p.conn.Pending():
		p.startLocked()
		p.s.wg.Add(1)
		go p.run()
	}
	if !p.inflight {
		p.mu.Unlock()
		return
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	idle := p.idle
	p.mu.Unlock()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-p.s.base.Done():
	}
}

// startLocked covers the frames written so far with the next ping.
func (p *prober) startLocked() {
	p.inflight = true
	p.last = time.Now()
	p.pings++
	p.want = strconv.FormatInt(p.pings, 10)
	if p.conn != nil {
		p.conn.Cover()
	}
	p.s.m.Pings.Inc()
}

func (p *prober) run() {
	defer p.s.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(p.s.base, p.s.cfg.PingInterval)
		err := p.ws.Ping(ctx)
		cancel()
		p.mu.Lock()
		conn := p.conn
		if err != nil {
			p.doneLocked()
			p.mu.Unlock()
			if conn != nil {
				conn.Unproved()
			}
			if p.s.base.Err() == nil && !p.stalled.Load() {
				p.ws.CloseNow() // a silent peer is dead: the read loop ends and cleans up
			}
			return
		}
		// The answer was handled by pong, in the read loop. Frames
		// written since the ping went out need one of their own.
		if p.ended || conn == nil || !conn.Pending() {
			p.doneLocked()
			p.mu.Unlock()
			return
		}
		p.want = ""
		if wait := time.Until(p.last.Add(p.s.cfg.ProofEvery)); wait > 0 && !p.settling {
			// Still in flight for ping's callers: what they write
			// meanwhile waits for the scheduled one.
			p.scheduleLocked(wait)
			p.mu.Unlock()
			return
		}
		p.startLocked()
		p.mu.Unlock()
	}
}

// again sends the proof ping run scheduled, unless the socket is done.
func (p *prober) again() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.scheduled {
		return // settle sent it
	}
	p.scheduled = false
	if p.ended || p.conn == nil || !p.conn.Pending() {
		p.doneLocked()
		return
	}
	p.startLocked()
	p.s.wg.Add(1) // the socket's handler still holds the group: !ended
	go p.run()
}

// pong is the socket's OnPongReceived: run by the read loop, before it
// reads the device's next frame.
func (p *prober) pong(_ context.Context, payload []byte) {
	p.mu.Lock()
	if p.want == "" || string(payload) != p.want {
		p.mu.Unlock()
		return // unsolicited, or a late answer: proves nothing
	}
	p.want = ""
	conn := p.conn
	p.mu.Unlock()
	if conn != nil {
		conn.Proved()
	}
}
