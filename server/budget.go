package server

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// Frames are read whole into memory before they are handled, and a frame
// may be large (16 MiB for Hermes Mobile). What frames being read and
// handled hold is bounded in all, not only per connection: past
// frameFree bytes, a frame needs a grant of its dialect's whole frame
// limit from the server's budget (Config.MaxBuffered), held until the
// frame has been handled. A grant is all or nothing, so every holder can
// finish and a connection waiting for one holds at most frameFree bytes
// (it stops reading: TCP pushes back on the device). A frame that has a
// grant must arrive within bigFrameTime, or the connection is closed:
// a device trickling bytes cannot keep a grant for ever. Hellos, which
// anyone may send, draw on a budget of their own (a quarter as large), so
// a flood of them never starves the devices' frames.
const (
	frameFree    = 16 << 10
	bigFrameTime = 2 * time.Minute
)

// budget is a FIFO counting semaphore of bytes.
type budget struct {
	mu      sync.Mutex
	free    int64
	waiters []*budgetWait
}

type budgetWait struct {
	n     int64
	ready chan struct{}
}

func newBudget(n int64) *budget { return &budget{free: n} }

// acquire takes n bytes, waiting its turn; n is at most the budget.
func (b *budget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWait{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.free += n
			b.grantLocked()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked() // the waiter behind it may fit now
		}
		return ctx.Err()
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	b.grantLocked()
	b.mu.Unlock()
}

// grantLocked hands out bytes to waiters in order.
func (b *budget) grantLocked() {
	for len(b.waiters) > 0 && b.free >= b.waiters[0].n {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		close(w.ready)
	}
}

func noRelease() {}

// readFrame reads one message, refusing it once it passes limit bytes:
// memory grows with the bytes that arrive, never beyond the limit, and
// past frameFree only within the server's budget. release gives the grant
// back; call it once the frame has been handled. stalled, when set, is
// told when the read waits for a grant and when it goes on.
func readFrame(ctx context.Context, c *websocket.Conn, limit int64, bud *budget, stalled func(bool)) (typ websocket.MessageType, data []byte, release func(), err error) {
	typ, r, err := c.Reader(ctx)
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
	grant := limit
	if stalled != nil {
		stalled(true)
	}
	err = bud.acquire(ctx, grant)
	if stalled != nil {
		stalled(false)
	}
	if err != nil {
		return 0, nil, noRelease, err
	}
	release = func() { bud.release(grant) }
	slow := time.AfterFunc(bigFrameTime, func() { c.CloseNow() })
	data, err = readCapped(r, b.Bytes(), limit)
	slow.Stop()
	if err != nil {
		release()
		return 0, nil, noRelease, err
	}
	return typ, data, release, nil
}

// readCapped reads the rest of a frame after head, growing its buffer by
// doubling but never past limit+1 bytes (bytes.Buffer would grow a 15 MiB
// frame's to 30): what a frame holds stays within its grant, with half
// of it more while a doubling copies.
func readCapped(r io.Reader, head []byte, limit int64) ([]byte, error) {
	buf := make([]byte, len(head), min(limit+1, max(4*int64(len(head)), 64<<10)))
	copy(buf, head)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, errTooBig
			}
			next := make([]byte, len(buf), min(limit+1, 2*int64(cap(buf))))
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
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
func (b *budget) state(total int64) (used int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return total - b.free, len(b.waiters)
}

// registerBudgets exposes the budgets' use in the metrics.
func (s *Server) registerBudgets() {
	if s.reg == nil {
		return
	}
	for _, x := range []struct {
		name  string
		b     *budget
		total int64
	}{{"frames", s.budget, s.cfg.MaxBuffered}, {"hellos", s.helloBudget, max(helloLimit, s.cfg.MaxBuffered/4)}} {
		s.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "irisgate_frame_buffer_bytes", Help: "Bytes granted to large frames being read and handled.",
				ConstLabels: prometheus.Labels{"budget": x.name}}, func() float64 { u, _ := x.b.state(x.total); return float64(u) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "irisgate_frame_buffer_waiting", Help: "Connections waiting for a grant to read a large frame.",
				ConstLabels: prometheus.Labels{"budget": x.name}}, func() float64 { _, w := x.b.state(x.total); return float64(w) }),
		)
	}
}
