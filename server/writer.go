package server

import (
	"errors"
	"fmt"
	"sync"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/irisgate/irisgate/hub"
)

// writer puts a connection's queued frames on its socket. A drain runs
// while frames wait and ends when the queue is empty; the one that finds
// the queue closed closes the socket with the status it was closed with.
type writer struct {
	s    *Server
	c    *websocket.Conn
	sock *corkedConn
	conn *hub.Conn
	out  prometheus.Counter
	done chan struct{} // closed once the socket is closed
	// prober, when set, is pinged after a batch that carried outbox
	// frames: its answer proves them.
	prober *prober
}

// startHere paces the connection for its socket and has its queue run
// the writer whenever frames wait, except the writer due now, which the
// caller runs itself when it returns true (hub.Conn.DriveHere).
func (w *writer) startHere() bool {
	if w.sock.deflate && !w.sock.dfl.window {
		// Each message compressed on its own: resends cost about half
		// their size, so fewer of them. With the device's window they
		// cost little, and the pacing is a plain device's.
		w.conn.SetPaceGrowth(hub.PaceGrowthDeflate)
	}
	return w.conn.DriveHere(w.drain)
}

var outBufs = sync.Pool{New: func() any { return new([]hub.Out) }}

func (w *writer) drain() {
	finished := false
	defer func() {
		if p := recover(); p != nil {
			w.s.log.Error("panic in writer", "device", w.conn.DeviceID, "panic", fmt.Sprint(p))
			w.c.CloseNow()
			w.conn.Close(errors.New("writer failed"))
			if !finished {
				close(w.done)
			}
		}
	}()
	bp := outBufs.Get().(*[]hub.Out)
	defer outBufs.Put(bp)
	for {
		buf, err := w.conn.Next(*bp)
		*bp = buf
		if len(buf) > 0 {
			if werr := w.write(buf); werr != nil {
				w.c.CloseNow()
				w.conn.Close(werr)
				finished = true
				close(w.done)
				return
			}
			clear(buf) // the pool must not keep frames alive
		}
		if err != nil {
			var ce *closeErr
			if w.prober != nil && errors.As(err, &ce) {
				w.prober.settle() // closed on purpose: prove what it got first
			}
			w.closeSocket(err)
			finished = true
			close(w.done)
			return
		}
		if len(buf) == 0 {
			if w.prober != nil {
				w.prober.turnEnds()
			}
			return
		}
	}
}

// write sends a batch in as few system calls as the socket allows, with
// the proof ping that is due (proof.go).
func (w *writer) write(buf []hub.Out) error {
	w.sock.cork()
	var err error
	for _, o := range buf {
		if w.sock.deflate && len(o.Data) >= deflateMin {
			if err = w.writeDeflated(o); err != nil {
				break
			}
			continue
		}
		// Framed here rather than by coder/websocket: its Write took
		// ~1.5 us a frame of a fan-out burst (locks, a flush per message
		// through its buffer), the append ~0.2 us.
		if err = w.sock.writeMessage(o.Binary, o.Data); err != nil {
			break
		}
	}
	// The batch counts as written before it leaves the cork, so that a
	// proof ping due now covers it and goes in the same system call,
	// after it. Should the write fail, the socket closes and that ping
	// is never answered: the frames stay unproven.
	if err == nil && w.prober != nil && w.conn.Wrote(buf) {
		w.prober.proof()
	}
	if uerr := w.sock.uncork(); err == nil {
		err = uerr
	}
	if err != nil {
		return err
	}
	w.out.Add(float64(len(buf)))
	return nil
}

var frameBufs = sync.Pool{New: func() any { return new([]byte) }}

// writeDeflated writes o compressed (compress.go), its frame in one Write.
func (w *writer) writeDeflated(o hub.Out) error {
	bp := frameBufs.Get().(*[]byte)
	defer frameBufs.Put(bp)
	f, off, err := w.sock.dfl.frame(*bp, o.Data, o.Binary, o.Key != "")
	*bp = f[:0]
	if cap(f) > 4*windowSize {
		*bp = nil // a large frame's buffer is not kept in the pool
	}
	if err != nil {
		return err
	}
	_, err = w.sock.Write(f[off:])
	return err
}

func (w *writer) closeSocket(err error) {
	w.sock.rd.close() // a close handshake reads the answer: no errIdle
	var ce *closeErr
	switch {
	case errors.As(err, &ce):
		w.c.Close(ce.code, ce.reason)
	case errors.Is(err, hub.ErrSlow):
		w.s.log.Warn("closing a device that reads too slowly", "device", w.conn.DeviceID)
		w.c.Close(websocket.StatusTryAgainLater, "too slow: reconnect and sync")
	case errors.Is(err, hub.ErrReplaced):
		w.c.Close(websocket.StatusNormalClosure, "replaced by a newer connection of this device")
	default:
		w.c.CloseNow()
	}
}
