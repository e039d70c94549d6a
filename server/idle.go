package server

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
)

// Between a device's messages its read loop waits outside coder/websocket.
// Blocked in a read of coder/websocket, a goroutine sits 2.4 KiB deep, so
// every idle connection held a 4 KiB stack (a goroutine's stack never
// shrinks back to 2 KiB once grown: it would have to use under 224
// bytes). Instead, the socket's reader (sockReader) follows the frames it
// hands over; at a boundary between messages, with nothing more to read
// now, it answers errIdle rather than block. The read loop then ends its
// goroutine, and a new one waits until the socket is readable (await,
// a few hundred bytes deep) and reads on. An idle connection thus holds
// one small goroutine; a busy one pays a goroutine start when its socket
// runs dry between messages.

// errIdle is sockReader's answer, between two messages, when no byte of
// the next one has arrived.
var errIdle = errors.New("no frame waiting")

// sockReader is what coder/websocket's buffered reader reads: the bytes
// that came right behind the upgrade request, then the socket.
type sockReader struct {
	nc    net.Conn
	early []byte
	// rc waits on the socket apart from a read; nil when it cannot (not
	// a socket with a descriptor: then reads block as before).
	rc syscall.RawConn
	// idle: errIdle may be answered (the read loop reads); never once
	// closing (a close handshake reads for the peer's answer from
	// whichever goroutine closes, and must wait for it).
	idle    atomic.Bool
	closing atomic.Bool
	fr      frameTracker

	// For the descriptor's callbacks, made once: a closure per wait
	// would be an allocation per wait.
	p       []byte
	n       int
	err     error
	again   bool
	peek    [1]byte
	readFn  func(fd uintptr) bool
	readyFn func(fd uintptr) bool
}

func newSockReader(nc net.Conn, early []byte) *sockReader {
	r := &sockReader{nc: nc, early: early}
	if sc, ok := nc.(syscall.Conn); ok && canWait {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
			r.readFn, r.readyFn = r.readNow, r.readable
		}
	}
	return r
}

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
	if r.rc != nil && r.idle.Load() && !r.closing.Load() && r.fr.between() {
		r.p = p
		err := r.rc.Read(r.readFn)
		n, again := r.n, r.again
		if err == nil {
			err = r.err
		}
		r.p, r.err = nil, nil
		if again && err == nil {
			return 0, errIdle
		}
		r.fr.feed(p[:n])
		if n == 0 && err == nil {
			err = io.EOF
		}
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
	if r.rc == nil {
		return
	}
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
