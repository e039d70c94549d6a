package server_test

import (
	"context"
	"strings"
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
// away. A phone connected to replica B is not woken by a reply committed
// on replica A; once it has left B, the next reply wakes it.
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

	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	phone, err := client.Dial(ctx, b.URL, client.Options{Token: testgw.Token, DeviceID: "phone", NtfyTopic: "phone-topic"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range phone.Events() {
		}
	}()
	reachable := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(testgw.Wait)
		for a.App.Hub.Reachable("phone") != want {
			if time.Now().After(deadline) {
				t.Fatalf("replica A never saw the phone reachable=%v", want)
			}
			time.Sleep(5 * time.Millisecond) // presence is gossip: no event of A's to wait on
		}
	}
	reachable(true)
	if a.App.Hub.Online("phone") {
		t.Fatal("the phone is connected to B, not A")
	}
	laptop := a.Dial(t, "laptop")
	reply := func(text string) {
		t.Helper()
		laptop.MustDo(irisv1.TypeMessageSend, client.Lane{ChatID: "default"}, irisv1.MessageSend{Text: text})
		laptop.Expect(irisv1.TypeAgentIdle, nil)
	}
	reply("while the phone is on B")

	phone.Close()
	b.WaitOffline(t, "phone")
	reachable(false)
	reply("once it has left")
	got := nt.Wait(t, 1, testgw.Wait)
	for _, m := range got {
		if strings.Contains(m.Body, "while the phone is on B") {
			t.Fatalf("the phone was woken while connected to B: %+v", got)
		}
	}
}
