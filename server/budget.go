package server

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// Frames are read whole into memory before they are handled, and a frame
// may be large (16 MiB for Hermes Mobile). What frames being read and
// handled hold is bounded in all, not only per connection: past
// frameFree bytes, a frame draws on the server's budget
// (Config.MaxBuffered) step by step as its bytes arrive (each growth of
// its buffer), and holds what it drew until it has been handled. A frame
// waiting for a step stops reading (TCP pushes back on the device).
//
// Steps cannot deadlock: the oldest frame being read (the head) may draw
// on the whole budget; every other frame only while as much as the
// largest frame limit, less what the head holds, stays free, so the head
// can always finish, and when it is done the next oldest can. Nor can one
// token's devices take the budget: their frames together hold at most a
// share of it (a quarter, at least one frame's limit), the head excepted.
// What the other tokens' frames find is what is left beside that share
// and the head's reserve: MaxBuffered less the share, less the largest
// frame limit, plus what the head holds (the default 64 MiB leaves them
// at least 32 MiB; a budget of two frame limits would leave them only
// what the head holds).
// And a frame must keep arriving: past Config.FrameGrace it must have come at
// minFrameRate on average (the time it waited for steps not counted), or
// the connection is closed; a device trickling bytes holds little, and
// not for long. Hellos, which anyone may send, draw on a budget of their
// own (a quarter as large), by client address.
const (
	frameFree    = 16 << 10
	minFrameRate = 32 << 10 // bytes a second: 16 MiB in about 9 minutes
)

// budget is a semaphore of bytes drawn in steps by holds (frames being
// read), with the rules above.
type budget struct {
	mu      sync.Mutex
	grace   time.Duration // bigFrameGrace, unless the tests say otherwise
	total   int64
	free    int64
	maxHold int64     // the largest frame limit
	share   int64     // what one key's holds may draw together
	holds   list.List // *hold, oldest first
	byKey   map[string]int64
	waiting []*hold
}

// hold is one frame's draw on a budget.
type hold struct {
	b     *budget
	key   string
	held  int64
	e     *list.Element
	want  int64         // while waiting
	ready chan struct{} // while waiting
}

func newBudget(total, maxHold int64, grace time.Duration) *budget {
	return &budget{grace: grace, total: total, free: total, maxHold: min(maxHold, total), share: min(total, max(maxHold, total/4)), byKey: map[string]int64{}}
}

// hold registers a frame of key that is about to draw on b.
func (b *budget) hold(key string) *hold {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := &hold{b: b, key: key}
	h.e = b.holds.PushBack(h)
	return h
}

// canLocked says whether h may draw n more bytes now.
func (b *budget) canLocked(h *hold, n int64) bool {
	if b.free < n {
		return false
	}
	head := b.holds.Front().Value.(*hold)
	if h == head {
		return true
	}
	return b.free-n >= b.maxHold-head.held && b.byKey[h.key]+n <= b.share
}

func (b *budget) grantLocked(h *hold, n int64) {
	b.free -= n
	h.held += n
	b.byKey[h.key] += n
}

// acquire draws n more bytes for h, waiting until the rules allow it.
func (h *hold) acquire(ctx context.Context, n int64) error {
	b := h.b
	b.mu.Lock()
	if b.canLocked(h, n) {
		b.grantLocked(h, n)
		b.mu.Unlock()
		return nil
	}
	h.want, h.ready = n, make(chan struct{})
	b.waiting = append(b.waiting, h)
	ready := h.ready
	b.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-ready: // granted meanwhile: it is released with the hold
		default:
			b.waiting = slices.DeleteFunc(b.waiting, func(x *hold) bool { return x == h })
		}
		return ctx.Err()
	}
}

// release gives back everything h drew and ends it.
func (h *hold) release() {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.e == nil {
		return
	}
	b.holds.Remove(h.e)
	h.e = nil
	b.free += h.held
	if b.byKey[h.key] -= h.held; b.byKey[h.key] <= 0 {
		delete(b.byKey, h.key)
	}
	h.held = 0
	b.waiting = slices.DeleteFunc(b.waiting, func(x *hold) bool { return x == h })
	b.wakeLocked()
}

// wakeLocked grants the waiters the rules now allow, oldest request
// first; one that must wait longer does not hold up those behind it (the
// head among them).
func (b *budget) wakeLocked() {
	for i := 0; i < len(b.waiting); {
		w := b.waiting[i]
		if !b.canLocked(w, w.want) {
			i++
			continue
		}
		b.grantLocked(w, w.want)
		close(w.ready)
		b.waiting = slices.Delete(b.waiting, i, i+1)
		i = 0 // a grant can change the head's share of the rules: look again
	}
}

func noRelease() {}

// readFrame reads one message, refusing it once it passes limit bytes:
// memory grows with the bytes that arrive, never beyond the limit, and
// past frameFree only as bud allows, drawn under key (the connection's
// token, or a hello's client address). release gives the draw back; call
// it once the frame has been handled. stalled, when set, is told when the
// read waits for the budget and when it goes on.
//
// ctx bounds the wait for the budget. The read itself is ended by the
// socket's close, as every end of a connection closes it (and Shutdown,
// once its wait is over, closes them all): handed a context that can end,
// coder/websocket registers and stops a context.AfterFunc on every
// message, 2 % of a request's round trip.
func readFrame(ctx context.Context, c *websocket.Conn, limit int64, bud *budget, key string, stalled func(bool)) (typ websocket.MessageType, data []byte, release func(), err error) {
	typ, r, err := c.Reader(context.WithoutCancel(ctx))
	if err != nil {
		return 0, nil, noRelease, err
	}
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(r, min(limit, frameFree)+1))
	if err != nil {
		return 0, nil, noRelease, err
	}
	if n <= frameFree && n <= limit {
		return typ, b.Bytes(), noRelease, nil
	}
	if n > limit {
		return 0, nil, noRelease, errTooBig
	}
	h := bud.hold(key)
	clock := &frameClock{c: c, start: time.Now(), grace: bud.grace}
	grow := func(n int64) error {
		if stalled != nil {
			stalled(true)
			defer stalled(false)
		}
		clock.pause()
		defer clock.resume()
		return h.acquire(ctx, n)
	}
	data, err = readCapped(r, b.Bytes(), limit, grow, clock.progress)
	clock.stop()
	if err != nil {
		h.release()
		return 0, nil, noRelease, err
	}
	return typ, data, h.release, nil
}

// frameClock closes a connection whose large frame arrives slower than
// minFrameRate (after its grace), not counting the time it waited
// for the budget.
type frameClock struct {
	c      *websocket.Conn
	grace  time.Duration
	start  time.Time // moved on by the waits
	read   int64
	t      *time.Timer
	due    time.Time
	paused time.Time
}

func (f *frameClock) deadline() time.Time {
	return f.start.Add(f.grace + time.Duration(float64(f.read)/minFrameRate*float64(time.Second)))
}

// progress counts bytes that arrived, moving the deadline on (a timer
// reset a second at most).
func (f *frameClock) progress(n int) {
	f.read += int64(n)
	if d := f.deadline(); f.t != nil && d.Sub(f.due) >= time.Second {
		f.due = d
		f.t.Reset(time.Until(d))
	}
}

func (f *frameClock) pause() {
	if f.t != nil {
		f.t.Stop()
	}
	f.paused = time.Now()
}

func (f *frameClock) resume() {
	if !f.paused.IsZero() {
		f.start = f.start.Add(time.Since(f.paused))
		f.paused = time.Time{}
	}
	f.due = f.deadline()
	if f.t == nil {
		f.t = time.AfterFunc(time.Until(f.due), func() { f.c.CloseNow() })
	} else {
		f.t.Reset(time.Until(f.due))
	}
}

func (f *frameClock) stop() {
	if f.t != nil {
		f.t.Stop()
	}
}

// readCapped reads the rest of a frame after head, growing its buffer by
// doubling but never past limit+1 bytes (bytes.Buffer would grow a 15 MiB
// frame's to 30), each growth drawn from the budget first (grow): what a
// frame holds stays within its draw, with half of it more while a
// doubling copies. progress is told of the bytes as they arrive.
func readCapped(r io.Reader, head []byte, limit int64, grow func(int64) error, progress func(int)) ([]byte, error) {
	size := min(limit+1, max(4*int64(len(head)), 64<<10))
	if err := grow(size); err != nil {
		return nil, err
	}
	buf := make([]byte, len(head), size)
	copy(buf, head)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, errTooBig
			}
			size := min(limit+1, 2*int64(cap(buf)))
			if err := grow(size - int64(cap(buf))); err != nil {
				return nil, err
			}
			next := make([]byte, len(buf), size)
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			progress(n)
		}
		if err == io.EOF {
			if int64(len(buf)) > limit {
				return nil, errTooBig
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// state is what the budget has handed out and how many wait for it.
func (b *budget) state() (used int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.free, len(b.waiting)
}

// registerBudgets exposes the budgets' use in the metrics.
func (s *Server) registerBudgets() {
	if s.reg == nil {
		return
	}
	for _, x := range []struct {
		name string
		b    *budget
	}{{"frames", s.budget}, {"hellos", s.helloBudget}} {
		s.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "irisgate_frame_buffer_bytes", Help: "Bytes granted to large frames being read and handled.",
				ConstLabels: prometheus.Labels{"budget": x.name}}, func() float64 { u, _ := x.b.state(); return float64(u) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "irisgate_frame_buffer_waiting", Help: "Connections waiting for a grant to read a large frame.",
				ConstLabels: prometheus.Labels{"budget": x.name}}, func() float64 { _, w := x.b.state(); return float64(w) }),
		)
	}
}
