package hub

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Out is one frame waiting to be written to a connection.
type Out struct {
	Data   []byte
	Binary bool
	// Key, when set, lets a newer frame with the same key replace this one
	// while it waits (message.update per message, tool.progress per tool).
	Key string
	// Cursor is the outbox cursor of the frame, 0 for ephemeral frames;
	// once written and followed by an answered ping it is proven received.
	Cursor int64
}

// ErrSlow is the reason a connection whose queue overflowed is closed.
var ErrSlow = errors.New("hub: device too slow, queue full")

// ErrClosed is returned by a closed queue.
var ErrClosed = errors.New("hub: connection closed")

// ErrReplaced closes a connection when its device connects again.
var ErrReplaced = errors.New("hub: replaced by a newer connection of the same device")

// queue is a connection's bounded outbound queue. Only coalescable frames
// are ever dropped (replaced by newer ones); anything else that does not fit
// closes the queue, and the device recovers with sync.
//
// The byte budget bounds the backlog, not the size of one frame: a frame
// is charged at most a quarter of the budget (see charge), so one large
// frame (a history page of long messages, a directory with icons, a reply
// of many MiB) is delivered, while a device that lets several of them
// pile up is too slow, as one that lets many small ones pile up is.
type queue struct {
	mu       sync.Mutex
	items    []Out
	box      *[]Out         // items' holder in itemArrays, kept to give it back
	keys     map[string]int // Key -> index in items
	bytes    int            // charged, see charge
	size     int            // the frames' real bytes, which replays pace by
	maxItems int
	maxBytes int
	closed   error
	// sent holds the cursors ever queued here: the connection will carry
	// them (or fail), so a sync on it need not queue them again.
	sent Intervals
	// Made on first use, under mu: most connections never need them.
	wake chan struct{} // take waits here
	room chan struct{} // replay waits here for the queue to drain

	// start, once set, runs a writer whenever frames (or a close) wait and
	// none is running: an idle connection then has no writer goroutine and
	// its stack. running is true from the start until the writer's next
	// finds nothing to do.
	start   func()
	running bool
	// holding: the connection's read loop is handling a frame (hold), and
	// a reply it queues (pushHere) waits for the loop to write it after
	// the frame (release) instead of for a writer goroutine to be started
	// and scheduled; due: such a reply waits. Other frames start a writer
	// as ever, which takes the waiting reply along.
	holding, due bool

	// Pacing of keyed frames (pace.go), made on the first one.
	lanes   map[string]*lane
	held    int // lanes holding a frame
	growth  int // see dueAt; 0: PaceGrowth
	timer   *time.Timer
	timerAt time.Time        // when timer fires; zero when it is not armed
	now     func() time.Time // nil: time.Now (tests stop the clock)
}

func newQueue(maxItems, maxBytes int) *queue {
	return &queue{
		maxItems: maxItems,
		maxBytes: maxBytes,
	}
}

// charge is what a frame counts against the byte budget: its size, up to
// a quarter of the budget. The memory a queue pins is then at most the
// budget plus four frames of any size (the large ones are mostly shared
// by every connection they are broadcast to).
func (q *queue) charge(o Out) int { return min(len(o.Data), q.maxBytes/4) }

// sentHas reports whether the frame at cursor was queued on this
// connection.
func (q *queue) sentHas(cursor int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sent.Has(cursor)
}

// skip records a cursor the connection gets nothing of as sent: a sync on
// it need not look at it either, and the set stays one range.
func (q *queue) skip(cursor int64) {
	q.mu.Lock()
	q.sent.Add(cursor, cursor)
	q.mu.Unlock()
}

// dropBelow forgets the sent cursors below floor.
func (q *queue) dropBelow(floor int64) {
	q.mu.Lock()
	q.sent.DropBelow(floor)
	q.mu.Unlock()
}

// noteSent records a queued frame's cursor; q.mu is held.
func (q *queue) noteSent(o Out) {
	if o.Cursor != 0 {
		q.sent.Add(o.Cursor, o.Cursor)
	}
}

// push adds o; it reports false (and closes the queue) when the cap is hit.
func (q *queue) push(o Out) bool { return q.pushFrom(o, false) }

// pushHere is push for a reply the read loop makes while it holds the
// queue: no writer is started for it, release says one is due.
func (q *queue) pushHere(o Out) bool { return q.pushFrom(o, true) }

func (q *queue) pushFrom(o Out, here bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushLocked(o, here)
}

// pushEvent queues a broadcast event's frames, all carrying cursor,
// unless a sync queued that cursor here already: the check and the push
// take the lock once (Hub.Deliver's cost per device and event). It
// reports false when the queue is closed.
func (q *queue) pushEvent(frames []Out, cursor int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushEventLocked(frames, cursor)
}

// pushEventLocked is pushEvent with q.mu held.
func (q *queue) pushEventLocked(frames []Out, cursor int64) bool {
	if cursor != 0 && q.sent.Has(cursor) {
		return q.closed == nil
	}
	for _, o := range frames {
		o.Cursor = cursor
		if !q.pushLocked(o, false) {
			return false
		}
	}
	return true
}

func (q *queue) pushLocked(o Out, here bool) bool {
	if q.closed != nil {
		return false
	}
	if o.Key != "" {
		if i, ok := q.keys[o.Key]; ok {
			q.bytes += q.charge(o) - q.charge(q.items[i])
			q.size += len(o.Data) - len(q.items[i].Data)
			q.items[i] = o
			q.queuedAgain(o)
			q.noteSent(o)
			return true
		}
		if q.paceLocked(o) {
			q.noteSent(o)
			return true
		}
	} else if q.held > 0 {
		q.releaseAllLocked()
	}
	if len(q.items) >= q.maxItems || q.bytes+q.charge(o) > q.maxBytes {
		q.closeLocked(ErrSlow)
		return false
	}
	if o.Key != "" {
		if q.keys == nil {
			q.keys = make(map[string]int)
		}
		q.keys[o.Key] = len(q.items)
	}
	q.appendLocked(o)
	q.bytes += q.charge(o)
	q.size += len(o.Data)
	q.noteSent(o)
	if here && q.holding && q.start != nil && !q.running {
		q.due = true
		return true
	}
	q.kick()
	return true
}

// hold marks the read loop's handling of a frame: its replies (pushHere)
// wait for release.
func (q *queue) hold() {
	q.mu.Lock()
	q.holding = true
	q.mu.Unlock()
}

// release ends hold. True means replies wait and no writer runs: the
// caller must run the writer itself, as if the queue had started it.
func (q *queue) release() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.holding = false
	due := q.due
	q.due = false
	if !due || q.running || (len(q.items) == 0 && q.closed == nil) {
		return false
	}
	if q.size > hereMax || q.closed != nil {
		// Much to write, which may wait for the device to read, or a
		// close handshake: a writer of its own, the loop reads on.
		q.kick()
		return false
	}
	q.running = true
	return true
}

// writing is Conn.Writing. A closed queue's writer is finishing (its
// Next gave the close), so it does not count.
func (q *queue) writing() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running && q.closed == nil
}

// hereMax bounds the bytes a read loop writes itself at release: a
// reply or two (a page of history), which leave in one write(2) at once
// unless the device has stopped reading.
const hereMax = 64 << 10

// kick wakes whoever drains the queue; q.mu is held.
func (q *queue) kick() {
	if q.start != nil {
		if !q.running && (len(q.items) > 0 || q.closed != nil) {
			q.running = true
			go q.start()
		}
		return
	}
	if q.wake != nil {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// drive makes start the queue's writer from now on.
func (q *queue) drive(start func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.start = start
	q.kick()
}

// driveHere is drive, except that a writer due now is not started: it
// reports true, and the caller runs start itself.
func (q *queue) driveHere(start func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.start = start
	if q.running || (len(q.items) == 0 && q.closed == nil) {
		return false
	}
	q.running = true
	return true
}

// next is take for a writer that start runs: it never waits. Nothing
// queued and the queue open ends the writer's turn (no frames, nil error);
// the next push starts another.
func (q *queue) next(buf []Out) ([]Out, error) {
	q.mu.Lock()
	if len(q.items) > 0 {
		buf = q.takeLocked(buf)
		room := q.room
		q.mu.Unlock()
		signal(room)
		return buf, nil
	}
	err := q.closed
	if err == nil {
		q.running = false
		// Idle from now on, perhaps for hours: keep no arrays sized for
		// the last burst.
		q.giveBackLocked()
		q.keys = nil
		if at := q.forgetLanesLocked(); !at.IsZero() {
			q.armLocked(at.Sub(q.clock()))
		}
	}
	q.mu.Unlock()
	return buf[:0], err
}

// itemArrays lends queues their arrays while frames flow (*[]Out). A
// queue going idle gives its array back instead of keeping one per idle
// connection; and a fan-out burst's writers go idle and busy again once
// a commit, so an array grown from nothing each time was half of the bytes
// a burst allocated.
var itemArrays sync.Pool

// pooledItemsMax bounds the arrays itemArrays keeps (a 64 KiB one).
const pooledItemsMax = 1024

// appendLocked adds o to items, borrowing an array for the first.
func (q *queue) appendLocked(o Out) {
	if cap(q.items) == 0 {
		if p, ok := itemArrays.Get().(*[]Out); ok {
			q.items, q.box = (*p)[:0], p
		}
	}
	q.items = append(q.items, o)
}

// giveBackLocked returns items' array to itemArrays. Every path that
// shortens items clears what it drops, so the array holds no frames past
// its length and is not cleared again here.
func (q *queue) giveBackLocked() {
	if c := cap(q.items); c > 0 && c <= pooledItemsMax {
		p := q.box
		if p == nil {
			p = new([]Out)
		}
		*p = q.items[:0]
		itemArrays.Put(p)
	}
	q.items, q.box = nil, nil
}

func (q *queue) takeLocked(buf []Out) []Out {
	buf = append(buf[:0], q.items...)
	clear(q.items)
	q.items = q.items[:0]
	clear(q.keys)
	q.bytes, q.size = 0, 0
	return buf
}

// signal wakes a waiter on ch (a nil ch has none).
func signal(ch chan struct{}) {
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pushWait adds o once the queue is at most half full (in real bytes):
// replays and file transfers use it, so they flow at the device's pace
// instead of overflowing the queue, holding little beyond the frame being
// written. A frame over half the budget waits for an empty queue.
func (q *queue) pushWait(ctx context.Context, o Out) error {
	for {
		q.mu.Lock()
		if q.closed != nil {
			err := q.closed
			q.mu.Unlock()
			return err
		}
		half := q.size+len(o.Data) <= q.maxBytes/2 || len(q.items) == 0
		if len(q.items) < q.maxItems/2 && half {
			q.mu.Unlock()
			if !q.push(o) {
				return q.err()
			}
			return nil
		}
		if q.room == nil {
			q.room = make(chan struct{}, 1)
		}
		if q.due {
			// A reply left for release fills the queue: the writer goes
			// now, or this waits for the read loop's frame to end.
			q.due = false
			q.kick()
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take waits for frames and returns all that are queued, in order.
func (q *queue) take(ctx context.Context, buf []Out) ([]Out, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			buf = q.takeLocked(buf)
			room := q.room
			q.mu.Unlock()
			signal(room)
			return buf, nil
		}
		err := q.closed
		if q.wake == nil {
			q.wake = make(chan struct{}, 1)
		}
		wake := q.wake
		q.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (q *queue) close(err error) {
	q.mu.Lock()
	q.closeLocked(err)
	q.mu.Unlock()
}

func (q *queue) closeLocked(err error) {
	if q.closed != nil {
		return
	}
	q.closed = err
	if q.timer != nil {
		q.timer.Stop()
	}
	q.lanes, q.held = nil, 0 // held frames are intermediate: nothing is lost
	if errors.Is(err, ErrSlow) || errors.Is(err, ErrReplaced) {
		// Nobody will read these: the device recovers them with sync.
		clear(q.items)
		q.items = q.items[:0]
		q.bytes, q.size = 0, 0
	}
	q.kick()
	signal(q.room)
}

func (q *queue) err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

func (q *queue) pushFront(o Out) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed != nil {
		return false
	}
	q.items = append(q.items, Out{})
	copy(q.items[1:], q.items)
	q.items[0] = o
	q.bytes += q.charge(o)
	q.size += len(o.Data)
	q.noteSent(o)
	for k, i := range q.keys {
		q.keys[k] = i + 1
	}
	q.kick()
	return true
}
