package hub

import (
	"context"
	"errors"
	"sync"
)

// Out is one frame waiting to be written to a connection.
type Out struct {
	Data   []byte
	Binary bool
	// Key, when set, lets a newer frame with the same key replace this one
	// while it waits (message.update per message, tool.progress per tool).
	Key string
	// Cursor is the outbox cursor of the frame, 0 for ephemeral frames;
	// once written and followed by a read it is proven received.
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
type queue struct {
	mu       sync.Mutex
	items    []Out
	keys     map[string]int // Key -> index in items
	bytes    int
	maxItems int
	maxBytes int
	closed   error
	wake     chan struct{} // the writer waits here
	room     chan struct{} // replay waits here for the queue to drain
}

func newQueue(maxItems, maxBytes int) *queue {
	return &queue{
		keys:     make(map[string]int),
		maxItems: maxItems,
		maxBytes: maxBytes,
		wake:     make(chan struct{}, 1),
		room:     make(chan struct{}, 1),
	}
}

// push adds o; it reports false (and closes the queue) when the cap is hit.
func (q *queue) push(o Out) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed != nil {
		return false
	}
	if o.Key != "" {
		if i, ok := q.keys[o.Key]; ok {
			q.bytes += len(o.Data) - len(q.items[i].Data)
			q.items[i] = o
			return true
		}
	}
	if len(q.items) >= q.maxItems || q.bytes+len(o.Data) > q.maxBytes {
		q.closeLocked(ErrSlow)
		return false
	}
	if o.Key != "" {
		q.keys[o.Key] = len(q.items)
	}
	q.items = append(q.items, o)
	q.bytes += len(o.Data)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// pushWait adds o once the queue is at most half full: replays use it, so
// a long sync flows at the device's pace instead of overflowing the queue.
func (q *queue) pushWait(ctx context.Context, o Out) error {
	for {
		q.mu.Lock()
		if q.closed != nil {
			err := q.closed
			q.mu.Unlock()
			return err
		}
		if len(q.items) < q.maxItems/2 && q.bytes+len(o.Data) <= q.maxBytes/2 {
			q.mu.Unlock()
			if !q.push(o) {
				return q.err()
			}
			return nil
		}
		q.mu.Unlock()
		select {
		case <-q.room:
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
			buf = append(buf[:0], q.items...)
			clear(q.items)
			q.items = q.items[:0]
			clear(q.keys)
			q.bytes = 0
			q.mu.Unlock()
			select {
			case q.room <- struct{}{}:
			default:
			}
			return buf, nil
		}
		err := q.closed
		q.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-q.wake:
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
	if errors.Is(err, ErrSlow) || errors.Is(err, ErrReplaced) {
		// Nobody will read these: the device recovers them with sync.
		clear(q.items)
		q.items = q.items[:0]
		q.bytes = 0
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case q.room <- struct{}{}:
	default:
	}
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
	q.bytes += len(o.Data)
	for k, i := range q.keys {
		q.keys[k] = i + 1
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}
