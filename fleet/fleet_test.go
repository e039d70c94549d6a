package fleet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait of these tests.
const wait = 20 * time.Second

// startNATS runs a NATS server in the test process on port (-1: any),
// as a fleet's would be.
func startNATS(t *testing.T, port int) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(wait) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// textCodec makes one frame of an event, "type cursor text".
type textCodec struct{}

func (textCodec) Frames(ev *core.Event, reqID int64) []hub.Out {
	s := fmt.Sprintf("%s %d %s", ev.Type, ev.Cursor, ev.Text)
	if ev.Notification != nil {
		s += ev.Notification.Title
	}
	if reqID != 0 {
		s += fmt.Sprintf(" req=%d", reqID)
	}
	return []hub.Out{{Data: []byte(s)}}
}

type proofs struct{}

func (proofs) LoadProofs(context.Context, string) ([]core.CursorRange, error) { return nil, nil }
func (proofs) SaveProofs(context.Context, string, []core.CursorRange) error   { return nil }

// replica is a hub linked to the fleet over the shared store.
type replica struct {
	hub   *hub.Hub
	fleet *Fleet
	stop  context.CancelFunc
	done  chan struct{}
}

// testKey is the fleet key of the tests' replicas.
var testKey = bytes.Repeat([]byte{0x5a}, KeySize)

func newReplica(t *testing.T, st Store, url string, opts ...func(*Config)) *replica {
	t.Helper()
	h := hub.New(proofs{}, nil, hub.DefaultLimits)
	cfg := Config{URL: url, Key: testKey, Hold: 50 * time.Millisecond, PresenceEvery: 200 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	f, err := New(st, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{hub: h, fleet: f, stop: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); f.Run(ctx) }()
	t.Cleanup(r.close)
	return r
}

func (r *replica) close() {
	r.stop()
	<-r.done
	r.fleet.Close()
}

// commit appends a durable frame and publishes it as the replica's commit
// publisher does.
func commit(t *testing.T, st *store.Store, r *replica, text string) int64 {
	t.Helper()
	ev := &core.Event{Type: core.EvNotification, Notification: &core.Notification{Title: text}, TS: 1}
	err := st.Write(context.Background(), func(tx store.Tx) error {
		var err error
		ev.Cursor, _, err = tx.AppendEvent(ev)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r.hub.Publish(ev)
	return ev.Cursor
}

// device is a connection on a replica's hub.
type device struct {
	t    *testing.T
	c    *hub.Conn
	rest []string // taken, not returned yet
}

func connect(t *testing.T, r *replica, id string) *device {
	t.Helper()
	c, _, err := r.hub.Add(context.Background(), id, textCodec{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.hub.Remove(c) })
	return &device{t: t, c: c}
}

// next returns the device's next frame.
func (d *device) next() string {
	d.t.Helper()
	if len(d.rest) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		out, err := d.c.Take(ctx, nil)
		if err != nil {
			d.t.Fatalf("waiting for a frame: %v", err)
		}
		for _, o := range out {
			d.rest = append(d.rest, string(o.Data))
		}
	}
	s := d.rest[0]
	d.rest = d.rest[1:]
	return s
}

// eventually waits, up to the deadline, for cond to hold (presence is
// gossip: there is no event of its own to wait on here).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func openStore(t *testing.T) *store.Store {
	st, err := store.Open(filepath.Join(t.TempDir(), "irisgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Frames committed on one replica reach the devices of another once each,
// in cursor order, the transient ones after the durable frame before them;
// a device connected to either is reachable from both.
func TestTwoReplicas(t *testing.T) {
	ns := startNATS(t, -1)
	st := openStore(t)
	a, b := newReplica(t, st, ns.ClientURL()), newReplica(t, st, ns.ClientURL())
	eventually(t, "both connected", func() bool { return a.fleet.Connected() && b.fleet.Connected() })
	phone := connect(t, b, "phone")
	here := connect(t, a, "laptop")

	for i := 0; i < 20; i++ {
		if i%2 == 1 { // the last one a's, which its transient frame follows
			commit(t, st, a, fmt.Sprint("a", i))
		} else {
			commit(t, st, b, fmt.Sprint("b", i))
		}
	}
	a.hub.Publish(&core.Event{Type: core.EvMessageUpdate, StreamID: "s", Text: "streaming"})
	a.hub.Publish(&core.Event{Type: core.EvStatus, State: "restarting"}) // a's own: not relayed
	commit(t, st, a, "last")
	for _, d := range []*device{phone, here} {
		for i := 0; i < 20; i++ {
			if got, want := d.next(), fmt.Sprintf("notification %d ", i+1); !strings.HasPrefix(got, want) {
				t.Fatalf("%s: frame %d is %q, want %q…", d.c.DeviceID, i, got, want)
			}
		}
		if got := d.next(); got != "message.update 0 streaming" {
			t.Fatalf("%s: %q, want the transient frame after cursor 20", d.c.DeviceID, got)
		}
		if d == here {
			if got := d.next(); got != "status 0 " {
				t.Fatalf("laptop: %q", got)
			}
		}
		if got := d.next(); got != "notification 21 last" {
			t.Fatalf("%s: %q, want cursor 21 (and no status from another replica)", d.c.DeviceID, got)
		}
	}

	eventually(t, "a sees the phone on b", func() bool { return a.hub.Reachable("phone") && !a.hub.Online("phone") })
	eventually(t, "b sees the laptop on a", func() bool { return b.hub.Reachable("laptop") })
	b.hub.Remove(phone.c)
	eventually(t, "a sees the phone leave b", func() bool { return !a.hub.Reachable("phone") })
}

// NATS stopped for a while, then back on its address: what was committed
// meanwhile reaches the other replica's devices when it reconnects, once
// and in order, without waiting for another commit.
func TestNATSBack(t *testing.T) {
	ns := startNATS(t, -1)
	url, port := ns.ClientURL(), ns.Addr().(*net.TCPAddr).Port
	st := openStore(t)
	a, b := newReplica(t, st, url), newReplica(t, st, url)
	eventually(t, "both connected", func() bool { return a.fleet.Connected() && b.fleet.Connected() })
	phone := connect(t, b, "phone")
	commit(t, st, a, "before")
	if got := phone.next(); got != "notification 1 before" {
		t.Fatal(got)
	}
	ns.Shutdown()
	eventually(t, "a notices", func() bool { return !a.fleet.Connected() })
	for i := 0; i < 5; i++ {
		commit(t, st, a, "during")
	}
	startNATS(t, port)
	for i := 0; i < 5; i++ {
		if got, want := phone.next(), fmt.Sprintf("notification %d during", i+2); got != want {
			t.Fatalf("%q, want %q", got, want)
		}
	}
	commit(t, st, a, "after")
	if got := phone.next(); got != "notification 7 after" {
		t.Fatal(got)
	}
}

// NATS down when a replica starts: it starts, serves its own devices, and
// joins the fleet once NATS is there.
func TestStartsWithoutNATS(t *testing.T) {
	ns := startNATS(t, -1)
	port := ns.Addr().(*net.TCPAddr).Port
	url := ns.ClientURL()
	ns.Shutdown()
	st := openStore(t)
	a := newReplica(t, st, url)
	mine := connect(t, a, "tablet")
	commit(t, st, a, "alone")
	if got := mine.next(); got != "notification 1 alone" {
		t.Fatal(got)
	}
	startNATS(t, port)
	b := newReplica(t, st, url)
	eventually(t, "a connected", func() bool { return a.fleet.Connected() && b.fleet.Connected() })
	phone := connect(t, b, "phone")
	commit(t, st, a, "together")
	if got := phone.next(); got != "notification 2 together" {
		t.Fatal(got)
	}
}
