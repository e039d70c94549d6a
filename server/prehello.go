package server

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// Connections that have not said hello yet are anyone's: they are bounded,
// in all (Config.MaxWaiting) and from one address (MaxWaitingPerAddr).
// A new connection over a bound does not wait for room, nor is it refused:
// the oldest waiting connection (of its address, or of all) is closed
// instead (after error{rate_limited}, with no close handshake). A device says hello as soon as its
// socket opens, so a legitimate connection gets in unless the bound fills
// anew before its hello arrives; one that has waited longest is the most
// likely to be a squatter. Past half the bound, new connections also get
// a shorter time to say hello (pressureHello).

// pressureHello is the hello timeout of a connection made while more than
// half the bound waits.
const pressureHello = 3 * time.Second

// preHello counts the waiting connections; guarded by Server.mu.
type preHello struct {
	seq    uint64
	byAddr map[string]int
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
	addr     string
	seq      uint64 // order of arrival
	counted  bool   // in Server.waiting's counts
	shutdown bool
	evicted  bool
}

// waitHello counts a new connection from addr as waiting for its hello,
// making room under the bounds first. startHello then starts its clock.
func (s *Server) waitHello(addr string) *helloWait {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pre.byAddr == nil {
		s.pre.byAddr = map[string]int{}
	}
	s.pre.seq++
	w := &helloWait{done: make(chan struct{}), addr: addr, seq: s.pre.seq, timeout: s.cfg.HelloTimeout}
	if s.pre.byAddr[addr] >= s.cfg.MaxWaitingPerAddr {
		s.evictLocked(addr)
	} else if len(s.waiting) >= s.cfg.MaxWaiting {
		s.evictLocked("")
	}
	if len(s.waiting) >= s.cfg.MaxWaiting/2 {
		w.timeout = min(w.timeout, pressureHello)
	}
	s.waiting[w] = struct{}{}
	s.pre.byAddr[addr]++
	w.counted = true
	w.shutdown = s.down // Shutdown has been through the waiting sockets already
	return w
}

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

// evictLocked ends the wait of the oldest connection from addr ("": from
// anywhere) and stops counting it. s.mu is held.
func (s *Server) evictLocked(addr string) {
	var ow *helloWait
	for w := range s.waiting {
		if (addr == "" || w.addr == addr) && (ow == nil || w.seq < ow.seq) {
			ow = w
		}
	}
	if ow == nil {
		return
	}
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
	if s.pre.byAddr[w.addr]--; s.pre.byAddr[w.addr] <= 0 {
		delete(s.pre.byAddr, w.addr)
	}
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
// connections to the same bounds, closing the oldest past one.
type httpWaiting struct {
	seq    uint64
	conns  map[net.Conn]httpWait
	byAddr map[string]int
}

type httpWait struct {
	addr string
	seq  uint64
}

// ConnState is the http.Server's ConnState hook.
func (s *Server) ConnState(c net.Conn, st http.ConnState) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	h := &s.http
	if h.conns == nil {
		h.conns, h.byAddr = map[net.Conn]httpWait{}, map[string]int{}
	}
	h.forget(c)
	if st != http.StateNew && st != http.StateIdle {
		return // serving a request (or hijacked: the WebSocket bounds take over), or gone
	}
	addr := remoteHost(c.RemoteAddr().String())
	if h.byAddr[addr] >= s.cfg.MaxWaitingPerAddr {
		s.closeOldestHTTP(addr)
	} else if len(h.conns) >= s.cfg.MaxWaiting {
		s.closeOldestHTTP("")
	}
	h.seq++
	h.conns[c] = httpWait{addr: addr, seq: h.seq}
	h.byAddr[addr]++
}

func (h *httpWaiting) forget(c net.Conn) {
	if w, ok := h.conns[c]; ok {
		delete(h.conns, c)
		if h.byAddr[w.addr]--; h.byAddr[w.addr] <= 0 {
			delete(h.byAddr, w.addr)
		}
	}
}

// closeOldestHTTP closes the connection from addr ("": from anywhere)
// that has waited longest, and stops counting it at once.
func (s *Server) closeOldestHTTP(addr string) {
	var oldest net.Conn
	var ow httpWait
	for c, w := range s.http.conns {
		if (addr == "" || w.addr == addr) && (oldest == nil || w.seq < ow.seq) {
			oldest, ow = c, w
		}
	}
	if oldest != nil {
		s.http.forget(oldest)
		s.m.Limited.WithLabelValues("prehttp").Inc()
		oldest.Close()
	}
}
