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
//
// That is before the hello. Once the connection serves (useSocket), the
// prober writes its pings itself, as the writer writes its frames (a
// ping frame is one write, like every frame on the socket, so nothing
// interleaves): a ping due when a batch is written goes in that batch's
// system call (writer.write) — so does one that falls due on the spacing
// timer while the writer runs (again, due) — and its answer is awaited
// with a timer, not a goroutine. coder/websocket's Ping took a goroutine, a context, a lock
// and a write(2) per ping: 5 % of a fan-out burst's CPU. Its payloads are
// "i<n>", which coder/websocket's own ("<n>") never are.
type prober struct {
	s  *Server
	ws *websocket.Conn
	// sock, once set (useSocket), is where pings go: frames of the
	// prober's own. Before it, coder/websocket's Ping (run).
	sock *corkedConn

	mu        sync.Mutex
	conn      *hub.Conn     // the Iris connection whose frames it proves; nil before hello and for Hermes Mobile
	pings     int64         // Ping calls made on ws
	own       int64         // pings the prober wrote itself on sock
	mine      bool          // the ping in flight is one of those: pong goes on from it, not run
	timer     *time.Timer   // fails the ping in flight of sock's unless answered in time
	want      string        // payload of the ping in flight, "" when it was answered
	inflight  bool          // a ping is in flight, or the next one is scheduled
	scheduled bool          // the next one is scheduled (again), not sent yet
	due       bool          // the scheduled one fell due while the writer ran: its next write sends it
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

// useSocket has the prober write its pings on sock from now on.
func (p *prober) useSocket(sock *corkedConn) {
	p.mu.Lock()
	p.sock = sock
	p.mu.Unlock()
}

// end stops new pings. A ping of coder/websocket's fails when the socket
// closes; one of the prober's own is over now.
func (p *prober) end() {
	p.mu.Lock()
	p.ended = true
	if p.due {
		p.due = false
		p.doneLocked()
	}
	if p.mine && p.want != "" {
		p.stopTimerLocked()
		p.doneLocked()
	}
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
	p.goLocked()
}

// proof asks for a ping proving the frames written so far: at once, or
// ProofEvery after the last ping.
func (p *prober) proof() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.due {
		// Put off for this batch (again): it proves the batch too.
		p.due = false
		p.startLocked()
		p.sendLocked()
		return
	}
	if p.inflight || p.ended {
		return
	}
	if wait := time.Until(p.last.Add(p.s.cfg.ProofEvery)); wait > 0 && !p.settling {
		p.inflight = true // what is written meanwhile waits for this one
		p.scheduleLocked(wait)
		return
	}
	p.startLocked()
	if p.sock == nil {
		p.goLocked()
		return
	}
	// The writer calls this with its batch in the cork: the ping goes in
	// the same system call, after the frames it proves.
	p.sendLocked()
}

// turnEnds is the writer's report that its turn ends (its queue is
// empty): a proof ping again left for its next write goes now, from a
// goroutine of its own. The writer may be the read loop (hub's Release),
// which a write(2) waiting for a peer that does not read must not hold:
// the loop would stop reading that peer's frames.
func (p *prober) turnEnds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.due {
		return
	}
	p.due = false
	if p.ended || p.conn == nil || !p.conn.Pending() {
		p.doneLocked()
		return
	}
	p.startLocked()
	p.goLocked()
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
	case p.scheduled || p.due:
		p.scheduled, p.due = false, false // again does nothing now
		p.startLocked()
		p.goLocked()
	case !p.inflight && p.conn.Pending():
		p.startLocked()
		p.goLocked()
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
	if p.mine = p.sock != nil; p.mine {
		p.own++
		p.want = "i" + strconv.FormatInt(p.own, 10)
	} else {
		p.pings++
		p.want = strconv.FormatInt(p.pings, 10)
	}
	if p.conn != nil {
		p.conn.Cover()
	}
	p.s.m.Pings.Inc()
}

// goLocked sends the ping startLocked prepared from a goroutine of its
// own: the caller must not wait on the socket.
func (p *prober) goLocked() {
	p.s.wg.Add(1) // the socket's handler still holds the group: !ended
	if !p.mine {
		go p.run()
		return
	}
	want := p.want
	p.armLocked(want)
	go func() {
		defer p.s.wg.Done()
		p.write(want)
	}()
}

// sendLocked writes the ping startLocked prepared on sock, here: into
// the cork when the writer holds one, else one write(2).
func (p *prober) sendLocked() {
	want := p.want
	p.armLocked(want)
	if err := p.sock.writePing(want); err != nil {
		p.failLocked(want)
	}
}

// write is sendLocked for a caller that does not hold p.mu, which a
// write(2) that waits for a slow peer must not keep from pong.
func (p *prober) write(want string) {
	if err := p.sock.writePing(want); err != nil {
		p.mu.Lock()
		p.failLocked(want)
		p.mu.Unlock()
	}
}

// armLocked fails the ping want unless it is answered within the ping
// interval, as coder/websocket's Ping does with its context.
func (p *prober) armLocked(want string) {
	p.stopTimerLocked()
	p.timer = time.AfterFunc(p.s.cfg.PingInterval, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.failLocked(want)
	})
}

func (p *prober) stopTimerLocked() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// failLocked ends the ping want, unanswered or not written: its frames
// stay unproven, and a peer that did not answer is dead.
func (p *prober) failLocked(want string) {
	if p.want != want || !p.mine {
		return // answered, or another ping's
	}
	p.stopTimerLocked()
	p.doneLocked()
	if p.conn != nil {
		p.conn.Unproved()
	}
	if p.s.base.Err() == nil && !p.stalled.Load() && !p.ended {
		p.ws.CloseNow() // the read loop ends and cleans up
	}
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
		if p.mine {
			// The connection serves now: the prober writes its pings.
			want := p.want
			p.armLocked(want)
			p.mu.Unlock()
			p.write(want)
			return
		}
		p.mu.Unlock()
	}
}

// again sends the proof ping run scheduled, unless the socket is done.
func (p *prober) again() {
	p.mu.Lock()
	if !p.scheduled {
		p.mu.Unlock()
		return // settle sent it
	}
	p.scheduled = false
	if p.ended || p.conn == nil || !p.conn.Pending() {
		p.doneLocked()
		p.mu.Unlock()
		return
	}
	if p.sock != nil && p.conn.Writing() {
		// The writer writes again before its turn ends: the ping goes
		// in that write's system call (proof, or turnEnds), covering
		// what it writes too, rather than in a write(2) of its own
		// (2.6 % of a fan-out burst's CPU). The writer's turn ends
		// only after Next (which ends Writing) and then turnEnds,
		// which waits for p.mu: the ping cannot be left behind. A
		// close ends Writing too: the writer then settles (settle
		// sends a due ping) or the socket is done (end).
		p.due = true
		p.mu.Unlock()
		return
	}
	p.startLocked()
	if !p.mine {
		p.goLocked()
		p.mu.Unlock()
		return
	}
	// The timer's goroutine writes it (into the cork if the writer holds
	// one), counted in the group as run is.
	want := p.want
	p.armLocked(want)
	p.s.wg.Add(1) // the socket's handler still holds the group: !ended
	p.mu.Unlock()
	p.write(want)
	p.s.wg.Done()
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
	conn, mine := p.conn, p.mine
	if mine {
		p.stopTimerLocked()
	}
	p.mu.Unlock()
	if conn != nil {
		conn.Proved()
	}
	if !mine {
		return // run goes on
	}
	// As run does after coder/websocket's Ping: frames written since the
	// ping went out get the next one, ProofEvery after the last.
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.want != "" || !p.inflight || p.scheduled {
		return // settle sent the next one already
	}
	if p.ended || conn == nil || !conn.Pending() {
		p.doneLocked()
		return
	}
	wait := time.Until(p.last.Add(p.s.cfg.ProofEvery))
	if p.settling {
		wait = 0
	}
	p.scheduleLocked(max(wait, 0))
}
