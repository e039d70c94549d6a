package hub

import "github.com/irisgate/irisgate/core"

// Publishing: an event, or a transaction's events, handed to every live
// connection's queue.

// Publish hands ev to every connection, through the relay when there is
// one. It never blocks: a connection whose queue is full is closed.
func (h *Hub) Publish(ev *core.Event) {
	if h.relay != nil {
		h.relay.Publish(ev)
		return
	}
	h.Deliver(ev)
}

// Deliver is Publish without the relay: the relay's way in.
func (h *Hub) Deliver(ev *core.Event) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, c := range h.conns {
		h.deliverTo(c, ev)
	}
}

// PublishAll is Publish of each of evs, in order. Without a relay each
// connection takes all of them under one lock and wakes its writer once:
// a committed batch reaches a device as one write, where event by event
// its writer woke for each and a hundred writers stood in the run queue
// ahead of the sender's next send (issue 17's burst).
func (h *Hub) PublishAll(evs []*core.Event) {
	if h.relay != nil {
		for _, ev := range evs {
			h.relay.Publish(ev)
		}
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	frames := make([][]Out, len(evs))
	for _, c := range h.conns {
		// The codec runs outside the queue's lock: it may ask the
		// connection (Hermes Mobile's asks whether it has ended).
		for i, ev := range evs {
			frames[i] = h.framesFor(c, ev)
		}
		c.q.mu.Lock()
		for i, ev := range evs {
			if len(frames[i]) > 0 {
				c.q.pushEventLocked(frames[i], ev.Cursor)
			}
		}
		c.q.mu.Unlock()
		for i, ev := range evs {
			if len(frames[i]) == 0 && (ev.Cursor == 0 || !c.q.sentHas(ev.Cursor)) {
				c.skip(ev.Cursor)
			}
		}
	}
}

func (h *Hub) deliverTo(c *Conn, ev *core.Event) {
	// A sync may have queued the frame on this connection already: its
	// commit was visible before it got here (with replicas, the read of
	// another's frames takes a moment longer). pushEvent checks that
	// under the lock it pushes with.
	if frames := h.framesFor(c, ev); len(frames) > 0 {
		c.q.pushEvent(frames, ev.Cursor)
	} else if ev.Cursor == 0 || !c.q.sentHas(ev.Cursor) {
		c.skip(ev.Cursor)
	}
}

// framesFor is what c's dialect sends of ev: nothing for the device ev is
// not for, the reply's request id on the connection it answers.
func (h *Hub) framesFor(c *Conn, ev *core.Event) []Out {
	if ev.NotTo != "" && ev.NotTo == c.DeviceID {
		return nil
	}
	var reqID int64
	if ev.ReplyTo != nil && ev.ReplyTo.ConnID == c.ID {
		reqID = ev.ReplyTo.ReqID
	}
	return c.codec.Frames(ev, reqID)
}
