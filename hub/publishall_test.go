package hub_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// typeAndReq frames an event as "type/reqID", so a test sees which
// connection got the answer.
type typeAndReq struct{}

func (typeAndReq) Frames(ev *core.Event, reqID int64) []hub.Out {
	return []hub.Out{{Data: []byte(string(ev.Type) + "/" + strconv.FormatInt(reqID, 10))}}
}

// PublishAll hands a transaction's events to each connection at once: its
// writer is started once and its first batch holds them all, in order,
// with the answer's request id on the connection it answers and nothing
// for the device an event is not for (counted as sent, so a sync skips
// it).
func TestPublishAllGivesEachConnectionTheBatchAtOnce(t *testing.T) {
	h := newHub(t)
	ctx := context.Background()
	type got struct {
		starts atomic.Int32
		first  chan []string
	}
	conns := map[string]*hub.Conn{}
	gots := map[string]*got{}
	for _, id := range []string{"phone", "tablet"} {
		c, _, err := h.Add(ctx, id, typeAndReq{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Remove(c)
		c.TrackProofs()
		g := &got{first: make(chan []string, 1)}
		conns[id], gots[id] = c, g
		c.Drive(func() {
			if g.starts.Add(1) > 1 {
				return
			}
			buf, _ := c.Next(nil)
			var frames []string
			for _, o := range buf {
				frames = append(frames, string(o.Data))
			}
			c.Wrote(buf)
			g.first <- frames
		})
	}
	h.PublishAll([]*core.Event{
		{Type: core.EvMessage, Cursor: 1, ReplyTo: &core.ReplyAddr{ConnID: conns["phone"].ID, ReqID: 7}},
		{Type: core.EvNotification, Cursor: 2, NotTo: "tablet"},
		{Type: core.EvTyping},
	})
	want := map[string][]string{
		"phone":  {"message/7", "notification/0", "typing/0"},
		"tablet": {"message/0", "typing/0"},
	}
	for id, g := range gots {
		select {
		case frames := <-g.first:
			if !slices.Equal(frames, want[id]) {
				t.Errorf("%s's writer first took %v, want %v", id, frames, want[id])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s's writer never started", id)
		}
		if n := g.starts.Load(); n != 1 {
			t.Errorf("%s's writer was started %d times", id, n)
		}
	}
	if !conns["tablet"].Has(2) {
		t.Error("the frame the tablet gets nothing of is not counted as sent to it")
	}
}

// asksItsConn is a codec that asks its connection whether it has ended,
// as Hermes Mobile's does for a picker's close, and whether an earlier
// cursor is queued there already.
type asksItsConn struct {
	c      *hub.Conn
	queued []bool // per Frames call: cursor 1 was queued on c before it
}

func (a *asksItsConn) Frames(ev *core.Event, _ int64) []hub.Out {
	if a.c != nil {
		a.queued = append(a.queued, a.c.Has(1))
		if a.c.Err() != nil {
			return nil
		}
	}
	return []hub.Out{{Data: []byte(ev.Type)}}
}

// PublishAll runs the codec outside the connection's lock: a codec that
// asks its connection must not deadlock the publisher. And it chooses a
// transaction's frames before it queues any, so the connection takes
// them in one hand-off (event by event, cursor 1 would be queued before
// the codec is asked for cursor 2).
func TestPublishAllLetsTheCodecAskItsConnection(t *testing.T) {
	h := newHub(t)
	codec := &asksItsConn{}
	c, _, err := h.Add(context.Background(), "phone", codec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Remove(c)
	codec.c = c
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.PublishAll([]*core.Event{{Type: core.EvNotification, Cursor: 1}, {Type: core.EvNotification, Cursor: 2}})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("PublishAll deadlocked on a codec that asks its connection")
	}
	out, err := c.Take(context.Background(), nil)
	if err != nil || len(out) != 2 {
		t.Fatalf("queued %d frames (%v), want 2", len(out), err)
	}
	if !slices.Equal(codec.queued, []bool{false, false}) {
		t.Fatalf("cursor 1 queued before the codec was asked for each event: %v; want the frames chosen before any is queued", codec.queued)
	}
}
