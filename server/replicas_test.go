package server_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
)

// startNATS runs a NATS server in the test process until the test's
// gateways have stopped.
func startNATS(t *testing.T) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown) // registered first: runs after the gateways' own cleanups
	if !ns.ReadyForConnections(testgw.Wait) {
		t.Fatal("nats-server did not start")
	}
	return ns
}

// Issue 18: replicas share a media directory. A file uploaded through
// replica A and sent in a message reaches a device on replica B with the
// message (committed on A, read from the store by B), which pulls the
// file through B.
func TestMediaAcrossReplicas(t *testing.T) {
	ns := startNATS(t)
	url, shared := pgtest.DB(t), t.TempDir()
	replica := func(c *server.AppConfig) { c.Store, c.NATS, c.MediaDir = url, ns.ClientURL(), shared }
	a, b := testgw.Start(t, replica), testgw.Start(t, replica)
	phone, tablet := a.Dial(t, "phone"), b.Dial(t, "tablet")
	data := blob(300_001, 7)
	upload(t, phone, "doc", data, 64<<10)
	echo, err := sendWith(t, phone, def, "a file from A", "doc")
	if err != nil {
		t.Fatal(err)
	}
	ms := mediaOf(t, echo)
	got := tablet.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "a file from A" })
	if theirs := mediaOf(t, got); len(ms) != 1 || len(theirs) != 1 || theirs[0] != ms[0] {
		t.Fatalf("the device on B got media %+v, the sender %+v", theirs, ms)
	}
	_, pulled, err := pull(t, tablet, ms[0].MediaID)
	if err != nil || !bytes.Equal(pulled, data) {
		t.Fatalf("pulled through B: %d bytes, %v", len(pulled), err)
	}
}

// Issue 18: with replicas, a device connected to another replica is not
// away. A reply committed on replica A wakes the tablet, which is
// connected nowhere, and not the phone, connected to replica B throughout.
func TestPushSkipsDevicesOnOtherReplicas(t *testing.T) {
	ns := startNATS(t)
	url := pgtest.DB(t)
	nt := fakentfy.New(t)
	replica := func(c *server.AppConfig) {
		c.Store, c.NATS = url, ns.ClientURL()
		c.Fleet.PresenceEvery = 200 * time.Millisecond
		c.Push = server.PushConfig{NtfyServer: nt.URL, WebApp: "https://iris.example.invalid/", Content: "full"}
	}
	a, b := testgw.Start(t, replica), testgw.Start(t, replica)
	awayPhone(t, a, "tablet", "tablet-topic")

	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	phone, err := client.Dial(ctx, b.URL, client.Options{Token: testgw.Token, DeviceID: "phone", NtfyTopic: "phone-topic"})
	if err != nil {
		t.Fatal(err)
	}
	defer phone.Close()
	go func() {
		for range phone.Events() {
		}
	}()
	deadline := time.Now().Add(testgw.Wait)
	for !a.App.Hub.Reachable("phone") {
		if time.Now().After(deadline) {
			t.Fatal("replica A never saw the phone connected to B")
		}
		time.Sleep(5 * time.Millisecond) // presence is gossip: no event of A's to wait on
	}
	if a.App.Hub.Online("phone") {
		t.Fatal("the phone is connected to B, not A")
	}
	laptop := a.Dial(t, "laptop")
	laptop.MustDo(irisv1.TypeMessageSend, client.Lane{ChatID: "default"}, irisv1.MessageSend{Text: "wake the away ones"})
	laptop.Expect(irisv1.TypeAgentIdle, nil)
	nt.Wait(t, 1, testgw.Wait)
	// Every push queued has been sent (answered by ntfy) before the check:
	// a wrong one for the phone would be among them.
	a.WaitPush(t, "the push queue drained", func() bool {
		// Both stores count their queue (the pusher claims from it and
		// needs no count: server.Store has none).
		n, err := a.App.Store.(interface {
			PendingPushes(context.Context) (int, error)
		}).PendingPushes(context.Background())
		return err == nil && n == 0
	})
	got := nt.Messages()
	if len(got) != 1 || got[0].Topic != "tablet-topic" || got[0].Body != "wake the away ones" {
		t.Fatalf("pushes %+v: want the tablet's alone (the phone is connected to B)", got)
	}
}

// Issue 18 with issue 17's directory held in memory: a channel created,
// turned to automation or deleted through replica A is judged so by the
// next send through replica B, whose directory was loaded before the
// change (B applies the channels A commits as it reads them).
func TestDirectoryAcrossReplicas(t *testing.T) {
	ns := startNATS(t)
	url := pgtest.DB(t)
	replica := func(c *server.AppConfig) { c.Store, c.NATS = url, ns.ClientURL(); parkedAgent(c) }
	a, b := testgw.Start(t, replica), testgw.Start(t, replica)
	phone, tablet := a.Dial(t, "phone"), b.Dial(t, "tablet")
	send(t, tablet, client.Lane{}, "loads B's directory")

	c := createChannel(t, phone, "Work", "")
	lane := client.Lane{ChatID: c.ChatID}
	tablet.Expect("channel.created", func(f client.Frame) bool { return entry(t, f).ChatID == c.ChatID })
	send(t, tablet, lane, "into A's new channel, through B")

	phone.MustDo("channel.set_automation", lane, map[string]any{"on": true})
	tablet.Expect("channel.renamed", func(f client.Frame) bool { return entry(t, f).ChatID == c.ChatID })
	_, err := tablet.Do("message.send", lane, map[string]any{"text": "refused"})
	wantCode(t, err, "unsupported")

	phone.MustDo("channel.delete", lane, nil)
	tablet.Expect("channel.deleted", func(f client.Frame) bool { return entry(t, f).ChatID == c.ChatID })
	_, err = tablet.Do("message.send", lane, map[string]any{"text": "gone"})
	wantCode(t, err, "not_found")
}

// Issue 18 with issue 17's head held in memory: a replica's hello.ack and
// sync reach the frames other replicas committed, not only its own. B
// learns its head once (the tablet's hello), A then commits three
// messages, and a laptop connecting to B afterwards is told A's head and
// replays all three.
//
// Two things happen after the last echo, and the test waits for both
// before the laptop comes: A's turn commits its agent.busy whenever the
// lane's turn starts (after any of the three messages: the head grows
// past the last echo's), and B's fleet delivers A's frames to B's devices
// (a laptop on B before that gets the ones not delivered yet live, ahead
// of the replay, and they are not replayed: the hub queues a frame once).
// The tablet on B getting them all is B's fleet done.
func TestSyncOnAReplicaReachesTheOthersFrames(t *testing.T) {
	ns := startNATS(t)
	url := pgtest.DB(t)
	replica := func(c *server.AppConfig) { c.Store, c.NATS = url, ns.ClientURL(); parkedAgent(c) }
	a, b := testgw.Start(t, replica), testgw.Start(t, replica)
	tablet := b.Dial(t, "tablet")
	phone := a.Dial(t, "phone")
	from := phone.HelloAck().SyncCursor
	var sent []string
	for _, text := range []string{"one", "two", "three"} {
		sent = append(sent, send(t, phone, client.Lane{}, text))
	}
	phone.Expect(irisv1.TypeAgentBusy, nil) // committed: the parked turn commits nothing more
	head, err := a.App.Store.OutboxHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := from + int64(len(sent)) + 1; head != want {
		t.Fatalf("the store's head is %d after three messages and agent.busy from %d: want %d", head, from, want)
	}
	tablet.Expect(irisv1.TypeAgentBusy, nil)
	for _, id := range sent {
		if !slices.ContainsFunc(tablet.Seen, isMessage(t, id)) {
			tablet.Expect("message", isMessage(t, id))
		}
	}

	laptop := b.Dial(t, "laptop")
	if got := laptop.HelloAck().SyncCursor; got != head {
		t.Fatalf("B's hello.ack says the head is %d, the store's is %d", got, head)
	}
	var ids []string
	for _, f := range syncFrom(t, laptop, from) {
		if f.Type == "message" {
			ids = append(ids, testgw.Str(t, f, "message_id"))
		}
	}
	if !slices.Equal(ids, sent) {
		t.Fatalf("the laptop on B replayed messages %v, A committed %v (it saw %s)", ids, sent, typesOf(laptop.Seen))
	}
}

func isMessage(t *testing.T, id string) func(client.Frame) bool {
	return func(f client.Frame) bool { return f.Type == "message" && testgw.Str(t, f, "message_id") == id }
}
