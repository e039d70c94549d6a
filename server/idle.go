package server

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Between a device's messages its read loop waits outside coder/websocket.
// Blocked in a read of coder/websocket, a goroutine sits 2.4 KiB deep, so
// every idle connection held a 4 KiB stack (a goroutine's stack never
// shrinks back to 2 KiB once grown: it would have to use under 224
// bytes). Instead, the socket's reader (sockReader) follows the frames it
// hands over; at a boundary between messages it reads with a deadline
// (idleAfter), and when nothing came by then it answers errIdle. The read
// loop then ends its goroutine, and a new one waits until the socket is
// readable (await, a few hundred bytes deep: RawConn.Read with a peek,
// which takes no byte a close handshake's read may need) and reads on.
// An idle connection thus holds one small goroutine; a busy one pays two
// deadline changes a message (timers of the runtime's poller, no system
// call), and a goroutine start after each pause longer than idleAfter.

// idleAfter is how long a device is silent between messages before its
// connection waits in a small goroutine. Short: a device that pauses
// longer pays a goroutine start (a few µs) once per pause.
const idleAfter = 50 * time.Millisecond

// errIdle is sockReader's answer, between two messages, when no byte of
// the next one came within idleAfter.
var errIdle = errors.New("no frame waiting")

// sockReader is what coder/websocket's buffered reader reads: the bytes
// that came right behind the upgrade request, then the socket.
type sockReader struct {
	nc    net.Conn
	early []byte // read before, handed over first
	// idle: errIdle may be answered (the read loop reads); never once
	// closing (a close handshake reads for the peer's answer from
	// whichever goroutine closes, and must wait for it).
	idle    atomic.Bool
	closing atomic.Bool
	fr      frameTracker
	// rc waits on the socket apart from a read; nil when it cannot (not
	// a socket with a descriptor, as TLS's): then reads block as before.
	rc      syscall.RawConn
	peek    [1]byte
	readyFn func(fd uintptr) bool // readable, made once: not an allocation per wait
}

func newSockReader(nc net.Conn, early []byte) *sockReader {
	r := &sockReader{nc: nc, early: early}
	if sc, ok := nc.(syscall.Conn); ok && canPeek {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc, r.readyFn = rc, r.readable
		}
	}
	return r
}

// arm lets reads between messages answer errIdle, where the socket can
// be waited on apart.
func (r *sockReader) arm() { r.idle.Store(r.rc != nil) }

func (r *sockReader) Read(p []byte) (int, error) {
	if len(r.early) > 0 {
		n := copy(p, r.early)
		r.early = r.early[n:]
		if len(r.early) == 0 {
			r.early = nil
		}
		r.fr.feed(p[:n])
		return n, nil
	}
	if r.idle.Load() && !r.closing.Load() && r.fr.between() {
		r.nc.SetReadDeadline(time.Now().Add(idleAfter))
		n, err := r.nc.Read(p)
		r.nc.SetReadDeadline(time.Time{}) // the rest of a frame may take its time
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, errIdle
		}
		r.fr.feed(p[:n])
		return n, err
	}
	n, err := r.nc.Read(p)
	r.fr.feed(p[:n])
	return n, err
}

// close makes every later read block as a socket's does: a close
// handshake follows.
func (r *sockReader) close() { r.closing.Store(true) }

// await waits, outside any read, until the socket has something to read
// (or an end to report). A failed wait turns errIdle off: the next read
// blocks, and reports what went wrong.
func (r *sockReader) await() {
	if err := r.rc.Read(r.readyFn); err != nil {
		r.idle.Store(false)
	}
}

// frameTracker follows the frames of the bytes a device sends (RFC 6455
// §5.2), to know when they stand between two messages. Bytes it cannot
// make sense of turn it off for good: coder/websocket refuses them
// anyway.
type frameTracker struct {
	hdr   [14]byte
	hn    int    // header bytes seen of the frame being read
	left  uint64 // payload bytes still to come of the current frame
	inMsg bool   // a data message has begun and not ended
	bad   bool
}

// between reports whether the next byte begins a frame, outside any data
// message.
func (t *frameTracker) between() bool { return !t.bad && t.hn == 0 && t.left == 0 && !t.inMsg }

func (t *frameTracker) feed(p []byte) {
	for len(p) > 0 && !t.bad {
		if t.left > 0 {
			k := uint64(len(p))
			if k > t.left {
				k = t.left
			}
			t.left -= k
			p = p[k:]
			continue
		}
		t.hdr[t.hn] = p[0]
		t.hn++
		p = p[1:]
		if t.hn < 2 {
			continue
		}
		need := 2
		switch t.hdr[1] & 0x7f {
		case 126:
			need += 2
		case 127:
			need += 8
		}
		if t.hdr[1]&0x80 != 0 {
			need += 4
		}
		if t.hn < need {
			continue
		}
		t.frame()
	}
}

// frame takes in a whole header.
func (t *frameTracker) frame() {
	t.hn = 0
	fin, op := t.hdr[0]&0x80 != 0, t.hdr[0]&0x0f
	var n uint64
	switch l := t.hdr[1] & 0x7f; l {
	case 126:
		n = uint64(t.hdr[2])<<8 | uint64(t.hdr[3])
	case 127:
		for _, b := range t.hdr[2:10] {
			n = n<<8 | uint64(b)
		}
	default:
		n = uint64(l)
	}
	switch op {
	case 0, 1, 2: // continuation, text, binary
		t.inMsg = !fin
	case 8, 9, 10: // control frames may come in the middle of a message
	default:
		t.bad = true
	}
	t.left = n
}
