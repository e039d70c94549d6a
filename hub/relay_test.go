package hub_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

type oneFrame struct{}

func (oneFrame) Frames(ev *core.Event, _ int64) []hub.Out { return []hub.Out{{Data: []byte(ev.Type)}} }

type relay struct {
	h   *hub.Hub
	got []*core.Event
}

func (r *relay) Publish(ev *core.Event) { r.got = append(r.got, ev); r.h.Deliver(ev) }

type presence struct {
	elsewhere map[string]bool
	changed   []string
}

func (p *presence) Elsewhere(id string) bool { return p.elsewhere[id] }
func (p *presence) Changed(id string)        { p.changed = append(p.changed, id) }

func newHub(t *testing.T) *hub.Hub {
	st, err := store.Open(filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return hub.New(st, slog.New(slog.NewTextHandler(io.Discard, nil)), hub.DefaultLimits)
}

// With a relay, Publish goes through it; a durable frame a sync queued on
// a connection already is not queued there again when it is delivered
// (with replicas, the read of another replica's frame may come after a
// sync that found it committed).
func TestRelayAndDeliverOnce(t *testing.T) {
	h := newHub(t)
	r := &relay{h: h}
	h.SetRelay(r)
	c, _, err := h.Add(context.Background(), "phone", oneFrame{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Remove(c)
	ev := &core.Event{Type: core.EvNotification, Cursor: 5}
	c.SendEvent(ev, 0) // what a sync queues
	h.Publish(ev)
	h.Publish(&core.Event{Type: core.EvTyping})
	if len(r.got) != 2 {
		t.Fatalf("the relay got %d events", len(r.got))
	}
	out, err := c.Take(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, o := range out {
		types = append(types, string(o.Data))
	}
	if !slices.Equal(types, []string{"notification", "typing"}) {
		t.Fatalf("queued %v", types)
	}
}

// Reachable counts the devices other replicas have; the presence hears of
// a device's first connection here and of its last one leaving.
func TestReachableElsewhere(t *testing.T) {
	h := newHub(t)
	p := &presence{elsewhere: map[string]bool{"tablet": true}}
	h.SetPresence(p)
	if !h.Reachable("tablet") || h.Online("tablet") || h.Reachable("phone") {
		t.Fatal("Reachable does not ask the presence")
	}
	c1, _, _ := h.Add(context.Background(), "phone", oneFrame{}, nil)
	if !h.Reachable("phone") {
		t.Fatal("a device here is not reachable")
	}
	c2, old, _ := h.Add(context.Background(), "phone", oneFrame{}, nil) // a reconnect replaces c1
	if old != c1 {
		t.Fatal("not replaced")
	}
	h.Remove(c1)
	h.Remove(c2)
	if !slices.Equal(p.changed, []string{"phone", "phone"}) {
		t.Fatalf("changes told: %v (want the first connection and the last leaving)", p.changed)
	}
}

// A replay (sync) does not queue a frame the connection got live since the
// replay looked at it.
func TestReplayOfAFrameQueuedLiveMeanwhile(t *testing.T) {
	h := newHub(t)
	c, _, err := h.Add(context.Background(), "phone", oneFrame{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Remove(c)
	h.Deliver(&core.Event{Type: core.EvNotification, Cursor: 7}) // live, after the replay's look
	if err := c.SendWait(context.Background(), hub.Out{Data: []byte("replayed"), Cursor: 7}); err != nil {
		t.Fatal(err)
	}
	if err := c.SendWait(context.Background(), hub.Out{Data: []byte("file chunk")}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Take(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range out {
		got = append(got, string(o.Data))
	}
	if !slices.Equal(got, []string{"notification", "file chunk"}) {
		t.Fatalf("queued %v", got)
	}
}
