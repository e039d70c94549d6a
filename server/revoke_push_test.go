package server_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// awayWith says hello with token and an ntfy topic, and leaves.
func awayWith(t *testing.T, g *testgw.GW, token, id, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	c, err := client.Dial(ctx, g.URL, client.Options{Token: token, DeviceID: id, NtfyTopic: topic})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for range c.Events() {
	}
	for deadline := time.Now().Add(testgw.Wait); g.App.Hub.Online(id); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still online", id)
		}
	}
}

// pushedTo lists the topics the fake ntfy server was published to.
func pushedTo(nt *fakentfy.Server) map[string]int {
	got := map[string]int{}
	for _, m := range nt.Messages() {
		got[m.Topic]++
	}
	return got
}

// A revoked token's devices are woken no more: revoking (here through the
// admin socket, as irisgate token revoke does) drops the push
// registrations of the devices that said hello with it. A stolen phone
// whose token the owner revokes stops getting the previews of new
// messages. (Before, the device rows carried no token and kept their
// addresses.)
func TestRevokingATokenEndsItsDevicesPushes(t *testing.T) {
	nt := fakentfy.New(t)
	g := testgw.Start(t, func(c *server.AppConfig) { c.Push = server.PushConfig{NtfyServer: nt.URL, Content: "full"} })
	ctx := context.Background()
	stolen, tok, err := gateway.CreateToken(ctx, g.App.Store, "phone", "")
	if err != nil {
		t.Fatal(err)
	}
	awayWith(t, g, stolen, "stolen-phone", "stolen-topic")
	awayWith(t, g, testgw.Token, "kept-phone", "kept-topic")

	ac, err := admin.Connect(ctx, admin.Options{DataDir: g.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if _, err := ac.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if d, _ := g.App.Store.Device(ctx, "stolen-phone"); d.NtfyTopic != "" {
		t.Errorf("the revoked token's device keeps its ntfy topic %q", d.NtfyTopic)
	}
	tablet := g.Dial(t, "tablet")
	send(t, tablet, def, "a secret plan")
	tablet.Expect("message.stop", nil)
	nt.Wait(t, 1, testgw.Wait)
	waitPending(t, g, 0)
	if got := pushedTo(nt); got["stolen-topic"] != 0 || got["kept-topic"] == 0 {
		t.Fatalf("pushes by topic: %v; want kept-topic's alone", got)
	}
}

// A token deleted from the database by hand (another program, or an
// irisgate that could not reach the admin socket) wakes its devices no
// more either: nothing is pushed to them, not even what was queued.
func TestATokenDeletedByHandEndsItsDevicesPushes(t *testing.T) {
	nt := fakentfy.New(t)
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Push = server.PushConfig{NtfyServer: nt.URL, Content: "full", Hold: time.Second}
	})
	ctx := context.Background()
	stolen, tok, err := gateway.CreateToken(ctx, g.App.Store, "phone", "")
	if err != nil {
		t.Fatal(err)
	}
	awayWith(t, g, stolen, "stolen-phone", "stolen-topic")
	awayWith(t, g, testgw.Token, "kept-phone", "kept-topic")
	tablet := g.Dial(t, "tablet")
	send(t, tablet, def, "queued for both")
	tablet.Expect("message.stop", nil)
	// Both pushes wait out their hold; the token goes meanwhile.
	waitPending(t, g, 2)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.Dir, server.DBFile)+"?_pragma=busy_timeout(10000)") // a hand edit beside the running gateway waits its turn
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM tokens WHERE id = ?`, tok.ID); err != nil {
		t.Fatal(err)
	}
	waitPending(t, g, 0)
	send(t, tablet, def, "after the deletion")
	tablet.Expect("message.stop", nil)
	waitPending(t, g, 0)
	if got := pushedTo(nt); got["stolen-topic"] != 0 || got["kept-topic"] == 0 {
		t.Fatalf("pushes by topic: %v; want kept-topic's alone", got)
	}
}

// A push address registered right after a hello (whose device row may
// be queued, not waited for) lands on a row that names the hello's
// token, so revoking the token ends it: end to end, the state; the wait
// that makes it hold across a crash between the two writes is checked in
// gateway (TestRegisterPushWaitsForWritesQueuedBeforeIt).
func TestPushRegisteredAfterHelloNamesTheToken(t *testing.T) {
	g := testgw.Start(t)
	ctx := context.Background()
	tok, rec, err := gateway.CreateToken(ctx, g.App.Store, "phone", "")
	if err != nil {
		t.Fatal(err)
	}
	phone, err := g.DialErr(t, "phone", tok)
	if err != nil {
		t.Fatal(err)
	}
	if f := phone.MustDo("fcm.register", client.Lane{}, map[string]any{"ntfy_topic": "phone-topic-1"}); f.Type == "error" {
		t.Fatalf("fcm.register: %s", f.Raw)
	}
	d, err := g.App.Store.Device(ctx, "phone")
	if err != nil || d.NtfyTopic != "phone-topic-1" || d.TokenID != rec.ID {
		t.Fatalf("device row %+v (%v), want its topic and token %s", d, err, rec.ID)
	}
}
