package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// Proof pings are spaced (Config.ProofEvery): a device fed frames one
// after another gets one ping for the first and a later one covering the
// rest, not a ping, a pong and their timers per frame.
func TestProofPingsAreSpaced(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.ProofEvery = time.Hour })
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	before := pings(t, g)
	for i := range 10 {
		createChannel(t, b, fmt.Sprint("c", i), "")
		a.Expect("channel.created", nil)
	}
	// A round trip of each: everything before its answer was written.
	a.MustDo("ping", client.Lane{}, nil)
	b.MustDo("ping", client.Lane{}, nil)
	// At most the first batch of each socket pinged at once; the rest wait
	// the hour.
	if n := pings(t, g) - before; n > 2 {
		t.Fatalf("%v pings for 10 frames to each of 2 sockets, want at most one each", n)
	}
}

// A proof ping put off by the spacing still goes, and proves what was
// written meanwhile.
func TestSpacedProofPingsProveEverything(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.ProofEvery = 30 * time.Millisecond })
	g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	for i := range 20 {
		createChannel(t, b, fmt.Sprint("c", i), "")
	}
	ctx, cancel := contextWait()
	defer cancel()
	head, err := g.App.Store.OutboxHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.App.Hub.WaitProven(ctx, "phone", head); err != nil {
		t.Fatalf("the phone's last frame (cursor %d) was never proven: %v", head, err)
	}
}

func pings(t *testing.T, g *testgw.GW) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.App.Metrics.Pings.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A restart proves what each device was written before its socket
// closes, even with the proof ping put off: the ping goes at once then
// (prober.settle), and the device that comes back is replayed nothing.
func TestRestartProvesWhatWaitedForItsPing(t *testing.T) {
	spaced := func(c *server.AppConfig) { c.Server.ProofEvery = time.Hour }
	g := testgw.Start(t, spaced)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	createChannel(t, b, "first", "") // the phone's first proof ping: at once
	a.Expect("channel.created", nil)
	createChannel(t, b, "second", "") // its next one: in an hour
	a.Expect("channel.created", nil)
	a.MustDo("ping", client.Lane{}, nil)
	g.Close()
	g = testgw.StartIn(t, g.Dir, spaced)
	if got := syncFrom(t, g.Dial(t, "phone"), 0); len(got) != 0 {
		t.Fatalf("after a restart the phone is replayed %d frames it had read", len(got))
	}
}

// A device that stops answering pings is closed once one of them goes
// unanswered for the ping interval. After the hello the prober writes its
// pings itself and times their answers with a timer of its own
// (proof.go), as coder/websocket's Ping did with its context.
func TestUnansweredPingClosesTheDevice(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.PingInterval = 100 * time.Millisecond })
	r := dialRaw(t, g)
	r.writeJSON(helloFrame(testgw.Token, "mute"))
	if f, err := r.read(); err != nil || f.Type != "hello.ack" {
		t.Fatalf("hello answered %+v, %v; want hello.ack", f, err)
	}
	if !g.App.Hub.Online("mute") {
		t.Fatal("the device is not online after its hello.ack")
	}
	// From now on it reads nothing, so it answers no ping (coder/websocket
	// answers them while reading). A device that reads stays:
	// TestKeepalivePingsSpareLiveDevices.
	g.WaitOffline(t, "mute")
}

// A proof ping that falls due on the spacing timer while the writer is
// writing waits for the writer's next system call, or for the end of its
// turn (prober.again, turnEnds): it is never left behind, so every frame
// is proven in the end. With the spacing at a millisecond and a flood of
// frames, most of the pings take that path.
func TestProofPingsDueWhileWritingStillGo(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.ProofEvery = time.Millisecond })
	g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	ctx, cancel := contextWait()
	defer cancel()
	for round := range 5 {
		for i := range 40 {
			if err := b.Send(ctx, "channel.create", client.Lane{}, map[string]any{"name": fmt.Sprint("c", round, "-", i), "kind": "channel"}); err != nil {
				t.Fatal(err)
			}
		}
		b.MustDo("ping", client.Lane{}, nil)
		head, err := g.App.Store.OutboxHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.App.Hub.WaitProven(ctx, "phone", head); err != nil {
			t.Fatalf("round %d: the phone's last frame (cursor %d) was never proven: %v", round, head, err)
		}
	}
}

// A restart while a proof ping is in flight and a frame was written after
// it: settle waits for that ping, whose answer has the next one go at once
// (pong, again). again must write it itself, since the writer, settling,
// writes nothing more. (It once left the ping for the writer's next write,
// which never came: the frame was replayed after the restart, and the
// close waited settle's second out.) Found by a review.
func TestRestartProvesWhatWasWrittenAfterThePingInFlight(t *testing.T) {
	spaced := func(c *server.AppConfig) { c.Server.ProofEvery = time.Hour }
	g := testgw.Start(t, spaced)
	a := dialTap(t, g, "phone") // it reads nothing until told: pings go unanswered
	b := g.Dial(t, "tablet")
	before := pings(t, g)
	createChannel(t, b, "pinged", "") // the phone's first proof ping: at once
	phone := func() *hub.Conn {
		var c *hub.Conn
		g.App.Hub.Each(func(x *hub.Conn) {
			if x.DeviceID == "phone" {
				c = x
			}
		})
		return c
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(testgw.Wait); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	until("the phone's first ping", func() bool { return pings(t, g) > before })
	createChannel(t, b, "after-the-ping", "") // written to the phone, waits for the next ping
	until("the second frame written, unproven", func() bool { c := phone(); return c != nil && c.Pending() })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		g.Close()
	}()
	until("the phone's connection closed", func() bool { c := phone(); return c == nil || c.Err() != nil })
	// The phone reads from now on: its library answers the ping in
	// flight, and the one its answer brings.
	go func() {
		for {
			if _, _, err := a.ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	<-closed
	g = testgw.StartIn(t, g.Dir, spaced)
	if got := syncFrom(t, g.Dial(t, "phone"), a.ack.SyncCursor); len(got) != 0 {
		t.Errorf("after a restart the phone is replayed %d frames it had read: %v", len(got), types(got))
	}
}
