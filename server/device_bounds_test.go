package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// An Iris device_id is held to the rule of a token's binding: at most 128
// bytes of UTF-8 without spaces or control characters. (Before, any
// string was taken, and stored as the device's row.)
func TestIrisDeviceIDIsValidated(t *testing.T) {
	g := testgw.Start(t)
	for _, id := range []string{strings.Repeat("d", 129), "two words", "tab\there", "nul\x00"} {
		r := dialRaw(t, g)
		r.writeJSON(helloFrame(testgw.Token, id))
		r.refused("unsupported", websocket.StatusPolicyViolation)
	}
	g.Dial(t, strings.Repeat("d", 128)).MustDo("ping", client.Lane{}, nil)
}

// One token has at most Bounds.ConnsPerToken live connections: the next
// hello is refused (rate_limited), while the same device reconnecting
// (which replaces its connection) and another token's devices get in.
func TestConnectionsPerTokenAreBounded(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Bounds = gateway.Bounds{ConnsPerToken: 3} })
	var devs []*testgw.Device
	for i := range 3 {
		devs = append(devs, g.Dial(t, fmt.Sprint("dev-", i)))
	}
	r := dialRaw(t, g)
	r.writeJSON(helloFrame(testgw.Token, "dev-3"))
	r.refused("rate_limited", websocket.StatusPolicyViolation)
	// dev-0 again: it replaces itself.
	g.Dial(t, "dev-0").MustDo("ping", client.Lane{}, nil)
	other, _, err := gateway.CreateToken(context.Background(), g.App.Store, "other", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.DialErr(t, "elsewhere", other); err != nil {
		t.Fatalf("another token's device: %v", err)
	}
	// One gone, there is room again.
	devs[1].Close()
	deadline := time.Now().Add(testgw.Wait)
	for {
		if d, err := g.DialErr(t, "dev-4", testgw.Token); err == nil {
			d.MustDo("ping", client.Lane{}, nil)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no room after a connection closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Device rows without a push registration are pruned past the bound (the
// most recently seen kept) and after DeviceAge: a client inventing a
// device id at every hello does not grow the table without end.
func TestDeviceRowsArePruned(t *testing.T) {
	dir := t.TempDir()
	bounds := func(c *server.AppConfig) { c.Bounds = gateway.Bounds{Devices: 3} }
	g := testgw.StartIn(t, dir, bounds)
	for i := range 8 {
		d := g.Dial(t, fmt.Sprint("dev-", i))
		d.MustDo("ping", client.Lane{}, nil)
		d.Close()
	}
	if err := g.App.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Retention runs at start, and every minute after.
	testgw.StartIn(t, dir, bounds)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, server.DBFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(testgw.Wait)
	for {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM devices`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n <= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d device rows, want at most 3", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int
	db.QueryRow(`SELECT COUNT(*) FROM devices WHERE device_id IN ('dev-0', 'dev-1')`).Scan(&n)
	if n != 0 {
		t.Errorf("the first devices seen are kept, not the last")
	}
}
