package server

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/gateway"
)

// Connections that have not said hello yet are anyone's: they are bounded,
// in all (Config.MaxWaiting) and per client address (MaxWaitingPerAddr,
// counted by gateway.AddrKey: an IPv6 /64 is one address). Past a bound,
// a connection is closed (after error{rate_limited}, with no close
// handshake) to make room: which one, the waiting room decides (room), so
// that neither a flood sharing the owner's address nor one from many
// addresses keeps the owner's hello from arriving. Past half the bound,
// new connections also get a shorter time to say hello (pressureHello).

// pressureHello is the hello timeout of a connection made while more than
// half the bound waits.
const pressureHello = 3 * time.Second

// preHello counts the waiting connections; guarded by Server.mu (valid
// has its own lock: ConnState reads it too).
type preHello struct {
	room  room[*helloWait]
	valid helloMemory
	// warnedProxy is when an untrusted proxy was last warned of.
	warnedProxy time.Time
}

// helloWait bounds the wait for a connection's first frame. The read
// is not given a deadline: a read whose context ends closes the socket at
// once, with no way to tell the device why. Closing the socket with a
// status ends the read just as well. Its fields are guarded by Server.mu
// (done and the timer's own state aside).
type helloWait struct {
	t        *time.Timer   // nil until startHello
	done     chan struct{} // closed when the timer's close has run
	timeout  time.Duration
	counted  bool // in Server.waiting's counts
	shutdown bool
	evicted  bool // closed to make room, or turned away
}

// limits are the waiting room's bounds for a newcomer.
func (s *Server) roomLimits(perAddr int) roomLimits {
	now := time.Now()
	return roomLimits{total: s.cfg.MaxWaiting, perAddr: perAddr, grace: s.cfg.HelloGrace,
		spared: func(k string) bool { return s.pre.valid.recent(k, now) }}
}

// waitHello counts a new connection from addr as waiting for its hello,
// making room under the bounds first; a newcomer the room turns away is
// returned evicted, and startHello closes it at once. startHello then
// starts its clock.
func (s *Server) waitHello(addr string) *helloWait {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	key := gateway.AddrKey(addr)
	w := &helloWait{done: make(chan struct{}), timeout: s.cfg.HelloTimeout}
	w.shutdown = s.down // Shutdown has been through the waiting sockets already
	victim, evict, refuse := s.pre.room.admit(key, now, s.roomLimits(s.cfg.MaxWaitingPerAddr))
	switch {
	case refuse:
		s.m.Limited.WithLabelValues("prehello").Inc()
		w.evicted = true
		return w
	case evict:
		s.evictLocked(victim)
	}
	if s.pre.room.len() >= s.cfg.MaxWaiting/2 {
		w.timeout = min(w.timeout, pressureHello)
	}
	s.waiting[w] = struct{}{}
	s.pre.room.add(w, key, now, false)
	w.counted = true
	return w
}

// sawHello remembers that addr said a valid hello: its connections are
// spared in the waiting room for a while.
func (s *Server) sawHello(addr string) { s.pre.valid.saw(gateway.AddrKey(addr), time.Now()) }

// startHello starts w's clock for the socket c.
func (s *Server) startHello(c *websocket.Conn, w *helloWait) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.t = time.AfterFunc(w.timeout, func() {
		defer close(w.done)
		s.mu.Lock()
		shutdown, evicted := w.shutdown, w.evicted
		s.mu.Unlock()
		switch {
		case shutdown:
			c.Close(websocket.StatusGoingAway, "gateway restarting")
		case evicted:
			// At once, without a close handshake: a flood that does not
			// answer one would keep each socket 5 s more, past the bound.
			// The frame is an error in every dialect (Server.refuse).
			s.writeRawWithin(c, s.refusals.evicted.Frame, time.Second)
			c.CloseNow()
		default:
			f := s.refusals.timeout
			s.writeRaw(c, f.Frame)
			c.Close(f.Status, f.Reason)
		}
	})
	if w.shutdown || w.evicted { // cut before its clock ran
		w.cutLocked()
	}
}

// evictLocked ends the wait of ow, closed to make room, and stops
// counting it. s.mu is held.
func (s *Server) evictLocked(ow *helloWait) {
	s.forgetLocked(ow)
	s.m.Limited.WithLabelValues("prehello").Inc()
	ow.evicted = true
	ow.cutLocked()
}

// forgetLocked stops counting w as waiting. s.mu is held.
func (s *Server) forgetLocked(w *helloWait) {
	if !w.counted {
		return
	}
	w.counted = false
	delete(s.waiting, w)
	s.pre.room.remove(w)
}

// cutLocked ends the wait now (a shutdown, an eviction): the timer's
// close runs at once. s.mu is held.
func (w *helloWait) cutLocked() {
	if w.t != nil && w.t.Stop() {
		w.t.Reset(0)
	}
}

// helloCame ends w's wait for its connection's first frame. False means
// the wait was cut (the socket is closed or closing) and the frame must
// be ignored.
func (s *Server) helloCame(w *helloWait) bool {
	s.mu.Lock()
	s.forgetLocked(w)
	t := w.t
	s.mu.Unlock()
	if t == nil || t.Stop() { // never started (the upgrade failed), or stopped in time
		return true
	}
	<-w.done
	return false
}

// writeRawWithin writes a frame, giving up after d.
func (s *Server) writeRawWithin(c *websocket.Conn, data []byte, d time.Duration) {
	ctx, cancel := context.WithTimeout(s.base, d)
	defer cancel()
	c.Write(ctx, websocket.MessageText, data)
}

// Before the WebSocket upgrade, a TCP connection is net/http's: one that
// sends no request (or idles between requests) costs a goroutine and its
// buffers until ReadHeaderTimeout or IdleTimeout. ConnState holds such
// connections to the same bounds and the same waiting room. A trusted
// proxy's connections carry many clients: only the bound in all applies
// to them (the WebSocket's bounds count each client the proxy names).
type httpWaiting struct {
	room room[net.Conn]
}

// WaitingBeforeRequest is how many connections net/http holds that have
// sent no request yet (or idle between requests): the room ConnState keeps.
func (s *Server) WaitingBeforeRequest() int {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	return s.http.room.len()
}

// ConnState is the http.Server's ConnState hook.
func (s *Server) ConnState(c net.Conn, st http.ConnState) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	h := &s.http
	h.room.remove(c)
	if st != http.StateNew && st != http.StateIdle {
		return // serving a request (or hijacked: the WebSocket bounds take over), or gone
	}
	peer := c.RemoteAddr().String()
	perAddr := s.cfg.MaxWaitingPerAddr
	a, ok := parseAddr(peer)
	proxy := ok && s.trusted(a)
	if proxy {
		perAddr = 0
	}
	key := gateway.AddrKey(remoteHost(peer))
	now := time.Now()
	victim, evict, refuse := h.room.admit(key, now, s.roomLimits(perAddr))
	switch {
	case refuse:
		s.m.Limited.WithLabelValues("prehttp").Inc()
		c.Close()
		return
	case evict:
		h.room.remove(victim)
		s.m.Limited.WithLabelValues("prehttp").Inc()
		victim.Close()
	}
	h.room.add(c, key, now, proxy)
}
