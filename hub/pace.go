package hub

import "time"

// Pacing of streams per connection. A message.update carries the whole
// text so far, so a device sent every update of a stream receives the
// reply many times over. The spec lets an app coalesce updates to the
// latest (only intermediate message.update and tool.progress frames); the
// queue does it on the sending side too, per connection and key:
//
//   - the first frame of a key goes at once (the first token is never
//     delayed); after a frame of n bytes the key waits UpdateEvery per
//     PaceChunk of them, at most PaceSpacing (a long text, costly to
//     resend, is resent less often, as Hermes Mobile's edits are:
//     wire/mobile's EditEvery per 3,500 chars);
//   - after that a frame leaves when it has grown by a 1/growth share of
//     the last one the key sent (pacing by bytes): the sizes sent then
//     grow geometrically, so a whole stream costs about growth+1 times its
//     final frame on the wire, whether the model streams fast or slowly —
//     pacing by time alone sends a slow stream's text over and over;
//   - a frame that has not grown enough still leaves once the key has been
//     quiet for PaceQuiet (the stream paused: show its newest text), or
//     once its size's worth of time at PaceRate has passed since the key
//     last sent (a key whose frames do not grow, a tool's progress line,
//     moves at that byte rate), at most PaceMax;
//   - and a frame that has grown at all leaves at most PaceGap after the
//     key last sent (the longest gap): pacing by bytes alone spaces a slow
//     stream's updates further and further apart (at a model's 300 B/s, a
//     12 KB reply on a deflate connection moved every 10 s near its end),
//     and a person watching sees the reply freeze; with the gap it moves
//     at least every PaceGap, at a cost on the wire measured in
//     TestPaceGapBoundsASlowStream;
//   - a held frame is replaced by newer ones, and queued right before any
//     frame without a key (the terminal one): the newest update always
//     precedes message.stop and nothing is reordered or lost.
//
// A stream slower than one piece per PaceQuiet gets an update a piece:
// the bound holds for streams, not for trickles.

const (
	// UpdateEvery is the least time between two frames of one key on one
	// connection.
	UpdateEvery = 50 * time.Millisecond
	// PaceChunk is the size a frame's spacing grows by UpdateEvery for.
	PaceChunk = 2 << 10
	// PaceSpacing bounds the spacing by time.
	PaceSpacing = time.Second
	// PaceGrowth is the default growth: a frame leaves once it is 1/20
	// larger than the last one its key sent (about 21 times a reply's
	// final frame in all on the wire).
	PaceGrowth = 20
	// PaceGrowthDeflate is the growth for a connection whose frames are
	// compressed each on its own (the server sets it: the device asked for
	// server_no_context_takeover): a frame leaves once it is a third
	// larger. Compressed without a shared window each resend still costs
	// about half its size, and the target there is 3 times the reply
	// (issue 17), so fewer resends: 2.3x measured
	// (TestStreamedReplyBytesOnTheWireBounded), where 4 gave 2.95x. A
	// device that keeps our window is paced as a plain one: each resend
	// costs it a few bytes per 258 of the text (server/compress.go).
	PaceGrowthDeflate = 3
	// PaceQuiet is how long a key that sends nothing newer counts as
	// paused: its held frame goes.
	PaceQuiet = 500 * time.Millisecond
	// PaceRate is the byte rate a key whose frames do not grow enough is
	// held to.
	PaceRate = 1 << 10 // bytes a second
	// PaceMax bounds the wait of a frame that has not grown enough.
	PaceMax = 10 * time.Second
	// PaceGap is the longest a key that has grown waits after its last
	// frame: 1.5 s, so a watcher sees the text move (a line or so at a
	// model's 300 B/s). It cost a slow stream's deflate connection, each
	// message compressed on its own, resends: a 6 KB reply at 300 B/s
	// (irisgate bench --scenarios ratios --ratio-modes wire) 2.52x -> 3.90x
	// its size on the wire (gap 1 s: 5.47x, 2 s: 3.42x; the longest
	// stillness 4.4 s -> 1.5 s), a 12 KB one about 5x
	// (TestPaceGapBoundsASlowStream). Compressed with the device's window
	// (server/compress.go) the same reply costs 2.1x at a plain device's
	// pace; plain connections and fast streams already move more often
	// and pay nothing.
	PaceGap = 1500 * time.Millisecond
	// paceForget: a lane idle that long is forgotten; a frame of its key
	// would go at once anyway (PaceMax has passed).
	paceForget = PaceMax
)

// clock is the queue's time: time.Now, unless a test stops it.
func (q *queue) clock() time.Time {
	if q.now != nil {
		return q.now()
	}
	return time.Now()
}

// paceInterval is how long a key that just sent size bytes waits at least.
func paceInterval(size int) time.Duration {
	n := (size + PaceChunk - 1) / PaceChunk
	return min(UpdateEvery*time.Duration(max(n, 1)), PaceSpacing)
}

// lane is one key's pacing on a connection.
type lane struct {
	last    time.Time // when the key's last frame left
	sent    int       // that frame's size
	held    Out       // the newest frame waiting
	heldAt  time.Time // when it came
	holding bool
}

// SetPaceGrowth sets the connection's growth (PaceGrowth unless set).
func (c *Conn) SetPaceGrowth(n int) {
	c.q.mu.Lock()
	c.q.growth = max(n, 1)
	c.q.mu.Unlock()
}

// dueAt is when a frame of s bytes may leave on l, if nothing newer
// comes; q.mu is held.
func (q *queue) dueAt(l *lane, s int) time.Time {
	at := l.last.Add(paceInterval(l.sent))
	g := q.growth
	if g == 0 {
		g = PaceGrowth
	}
	if s < l.sent || s-l.sent >= max(l.sent/g, 1) {
		return at // grown enough, or a new text (a reset) that is shorter
	}
	wait := min(time.Duration(s)*time.Second/PaceRate, PaceMax)
	if s > l.sent {
		wait = min(wait, PaceGap) // grown, if too little: the longest gap
	}
	return maxTime(at, minTime(l.last.Add(wait), l.heldAt.Add(PaceQuiet)))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// paceLocked decides what to do with keyed frame o whose key is not in the
// queue: it reports true when o was held back (and arms the timer); false
// when o goes now, which it records. q.mu is held.
func (q *queue) paceLocked(o Out) bool {
	now := q.clock()
	s := len(o.Data)
	l := q.lanes[o.Key]
	if l == nil {
		if q.lanes == nil {
			q.lanes = make(map[string]*lane)
		}
		q.lanes[o.Key] = &lane{last: now, sent: s}
		return false
	}
	if !l.holding && q.bytes+q.charge(o) > q.maxBytes {
		l.last, l.sent = now, s
		return false // queued as any frame: the queue is full, and says so
	}
	if l.holding {
		q.bytes += q.charge(o) - q.charge(l.held)
		q.size += s - len(l.held.Data)
	} else {
		q.bytes += q.charge(o)
		q.size += s
		q.held++
	}
	l.held, l.heldAt, l.holding = o, now, true
	at := q.dueAt(l, s)
	if now.Before(at) {
		q.armLocked(at.Sub(now))
		return true
	}
	// Due now: it goes as any frame, uncharged as a held one.
	q.bytes -= q.charge(o)
	q.size -= s
	q.held--
	l.held, l.holding = Out{}, false
	l.last, l.sent = now, s
	return false
}

// queuedAgain notes that keyed frame o replaced its key's frame in the
// queue: o is what its lane sends. q.mu is held.
func (q *queue) queuedAgain(o Out) {
	if l := q.lanes[o.Key]; l != nil {
		l.sent = len(o.Data)
	}
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

// paced runs on the pace timer: held frames that are due are queued, and
// lanes idle for paceForget are forgotten.
func (q *queue) paced() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.timerAt = time.Time{}
	if q.closed != nil {
		return
	}
	now := q.clock()
	var next time.Time
	released := false
	for _, l := range q.lanes {
		if !l.holding {
			continue
		}
		at := q.dueAt(l, len(l.held.Data))
		if now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		q.releaseLocked(l, now)
		released = true
	}
	if next.IsZero() {
		next = q.forgetLanesLocked()
	}
	if !next.IsZero() {
		q.armLocked(next.Sub(now))
	}
	if released {
		q.kick()
	}
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
	l.last, l.sent = now, len(o.Data)
	q.held--
	if q.keys == nil {
		q.keys = make(map[string]int)
	}
	q.keys[o.Key] = len(q.items)
	q.appendLocked(o)
}

// forgetLanesLocked drops the lanes that hold nothing and have been idle
// for paceForget: a frame of theirs would go at once anyway. It runs when
// the writer finds the queue empty and on the pace timer, so a connection
// keeps no lanes (nor timer) paceForget after its last stream. It returns
// when the next remaining lane may be forgotten (zero: none left, or one
// holds, which the timer already covers). q.mu is held.
func (q *queue) forgetLanesLocked() time.Time {
	if q.lanes == nil {
		return time.Time{}
	}
	now := q.clock()
	var next time.Time
	for k, l := range q.lanes {
		if l.holding {
			return time.Time{}
		}
		if at := l.last.Add(paceForget); now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		delete(q.lanes, k)
	}
	if len(q.lanes) == 0 {
		q.lanes = nil
		if q.timerAt.IsZero() {
			q.timer = nil // not armed: nothing refers to it
		}
	}
	return next
}
