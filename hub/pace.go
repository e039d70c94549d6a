package hub

import "time"

// Pacing of streams per connection. A message.update carries the whole
// text so far, so a device sent every update of a fast stream receives the
// reply hundreds of times over. The spec lets an app coalesce updates to
// the latest (only intermediate message.update and tool.progress frames);
// the queue does it on the sending side too, per connection: a keyed frame
// goes at once when its key has sent nothing for its interval (the first
// update of a stream always does, so the first token is not delayed), and
// otherwise waits, replaced by newer ones, until the interval is over — or
// until any frame without a key is queued behind it, so the newest update
// always precedes the terminal frame and nothing is reordered.
//
// The interval grows with the frame: UpdateEvery per PaceChunk of it, at
// most PaceMax, so a long text (costly to resend) is resent less often,
// as Hermes Mobile's edits are (wire/mobile: EditEvery per 3,500 chars).

const (
	// UpdateEvery is the least time between two frames of one key on one
	// connection.
	UpdateEvery = 50 * time.Millisecond
	// PaceChunk is the size a frame's interval grows by UpdateEvery for.
	PaceChunk = 2 << 10
	// PaceMax bounds the interval.
	PaceMax = time.Second
)

// clock is the queue's time: time.Now, unless a test stops it.
func (q *queue) clock() time.Time {
	if q.now != nil {
		return q.now()
	}
	return time.Now()
}

// paceInterval is how long a key that just sent size bytes waits.
func paceInterval(size int) time.Duration {
	n := (size + PaceChunk - 1) / PaceChunk
	return min(UpdateEvery*time.Duration(max(n, 1)), PaceMax)
}

// lane is one key's pacing on a connection.
type lane struct {
	due     time.Time // the key may send again from then on
	held    Out       // the newest frame waiting for due
	holding bool
}

// paceLocked decides what to do with keyed frame o whose key is not in the
// queue: it reports true when o was held back (and arms the timer); false
// when o goes now, which it records. q.mu is held.
func (q *queue) paceLocked(o Out) bool {
	now := q.clock()
	l := q.lanes[o.Key]
	if l == nil {
		if q.lanes == nil {
			q.lanes = make(map[string]*lane)
		}
		q.lanes[o.Key] = &lane{due: now.Add(paceInterval(len(o.Data)))}
		return false
	}
	if !now.Before(l.due) && !l.holding {
		l.due = now.Add(paceInterval(len(o.Data)))
		return false
	}
	if !l.holding && q.bytes+q.charge(o) > q.maxBytes {
		return false // queued as any frame: the queue is full, and says so
	}
	if l.holding {
		q.bytes += q.charge(o) - q.charge(l.held)
		q.size += len(o.Data) - len(l.held.Data)
	} else {
		q.bytes += q.charge(o)
		q.size += len(o.Data)
		q.held++
	}
	l.held, l.holding = o, true
	q.armLocked(l.due.Sub(now))
	return true
}

// armLocked makes the pace timer fire within d.
func (q *queue) armLocked(d time.Duration) {
	at := time.Now().Add(d)
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.paced)
		q.timerAt = at
		return
	}
	if q.timerAt.IsZero() || at.Before(q.timerAt) {
		q.timer.Reset(d)
		q.timerAt = at
	}
}

// paced runs on the pace timer: held frames that are due are queued.
func (q *queue) paced() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.timerAt = time.Time{}
	if q.closed != nil || q.held == 0 {
		return
	}
	now := q.clock()
	var next time.Duration
	for _, l := range q.lanes {
		if !l.holding {
			continue
		}
		if wait := l.due.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		q.releaseLocked(l, now)
	}
	if next > 0 {
		q.armLocked(next)
	}
	q.kick()
}

// releaseAllLocked queues every held frame, before a frame without a key.
func (q *queue) releaseAllLocked() {
	now := q.clock()
	for _, l := range q.lanes {
		if l.holding {
			q.releaseLocked(l, now)
		}
	}
}

// releaseLocked moves l's held frame into the queue (already charged).
func (q *queue) releaseLocked(l *lane, now time.Time) {
	o := l.held
	l.held, l.holding = Out{}, false
	l.due = now.Add(paceInterval(len(o.Data)))
	q.held--
	if q.keys == nil {
		q.keys = make(map[string]int)
	}
	q.keys[o.Key] = len(q.items)
	q.items = append(q.items, o)
}

// forgetLanesLocked drops the lanes that hold nothing and are due: a
// frame of theirs would go at once anyway. The writer calls it when it
// finds the queue empty, so an idle connection keeps no lanes.
func (q *queue) forgetLanesLocked() {
	if q.lanes == nil {
		return
	}
	now := q.clock()
	for k, l := range q.lanes {
		if !l.holding && !now.Before(l.due) {
			delete(q.lanes, k)
		}
	}
	if len(q.lanes) == 0 {
		q.lanes = nil
	}
}
