package server_test

import (
	"context"
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

// Issue 18: with replicas, a device connected to another replica is not
// away. A reply committed on replica A wakes the tablet, which is
// connected nowhere, and not the phone, connected to replica B throughout.
func TestPushSkipsDevicesOnOtherReplicas(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown) // after the gateways' own cleanups
	if !ns.ReadyForConnections(testgw.Wait) {
		t.Fatal("nats-server did not start")
	}
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
		jobs, err := a.App.Store.DuePushes(context.Background(), time.Now().Add(time.Hour), 10)
		return err == nil && len(jobs) == 0
	})
	got := nt.Messages()
	if len(got) != 1 || got[0].Topic != "tablet-topic" || got[0].Body != "wake the away ones" {
		t.Fatalf("pushes %+v: want the tablet's alone (the phone is connected to B)", got)
	}
}
