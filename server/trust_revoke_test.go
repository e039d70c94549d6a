package server_test

// Issue 12.2 (revoking a token ends its sessions) and 12.7 (secret files
// are private, one gateway per data directory). The same revocation by a
// separate `irisgate token revoke` process is in e2e.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

func TestRevokeEndsTheTokensSessions(t *testing.T) { testRevokeEndsTheTokensSessions(t) }

func testRevokeEndsTheTokensSessions(t *testing.T, on ...func(*server.AppConfig)) {
	g := mobileGW(t, on...)
	ctx := context.Background()
	ac, err := admin.Connect(ctx, admin.Options{DataDir: g.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if !ac.Live() {
		t.Fatal("the admin client did not find the running gateway")
	}
	tok, err := ac.CreateToken(ctx, "shared", "")
	if err != nil {
		t.Fatal(err)
	}
	// A browser and a phone with the token, and a laptop with another.
	browser, err := g.DialErr(t, "browser", tok.Value)
	if err != nil {
		t.Fatal(err)
	}
	browser.MustDo("ping", client.Lane{}, nil)
	phone := connectPhoneWith(t, g, nil, mhello(tok.Value, "tel-1", "Phone"))
	phone.barrier()
	laptop := g.Dial(t, "laptop")

	start := time.Now()
	rv, err := ac.RevokeToken(ctx, tok.ID)
	if err != nil || rv.Closed != 2 || rv.ID != tok.ID {
		t.Fatalf("revoke: %+v, %v", rv, err)
	}
	f := browser.Expect("error", nil)
	if testgw.Str(t, f, "code") != "auth" || !strings.Contains(testgw.Str(t, f, "message"), "revoked") {
		t.Fatalf("the browser got %s", f.Raw)
	}
	if st := closed(t, browser); st != websocket.StatusPolicyViolation {
		t.Fatalf("the browser closed with %v", st)
	}
	t.Logf("the browser's connection ended %v after the revocation", time.Since(start))
	if e := phone.refused("auth_failed"); !strings.Contains(e.S("message"), "revoked") {
		t.Fatalf("the phone got %v", e)
	}
	t.Logf("both ended %v after the revocation", time.Since(start))
	// Gone for good, and the other token's device is untouched.
	_, err = g.DialErr(t, "browser", tok.Value)
	wantCode(t, err, "auth")
	laptop.MustDo("ping", client.Lane{}, nil)

	// By its value too; a value that is no stored token says what to use.
	tok2, _ := ac.CreateToken(ctx, "second", "")
	if rv, err := ac.RevokeToken(ctx, tok2.Value); err != nil || rv.ID != tok2.ID {
		t.Fatalf("revoke by value: %+v %v", rv, err)
	}
	if _, err := ac.RevokeToken(ctx, "igt_0000"); err == nil || !strings.Contains(err.Error(), "tok_ id") {
		t.Fatalf("an unknown value: %v", err)
	}
}

// TestDataDirIsPrivate: on main a database made in a directory that
// already existed (made by hand, or by a container's volume) was 0644, as
// were the files an older version left.
func TestDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g := testgw.StartIn(t, dir, func(c *server.AppConfig) { c.Push.WebPush = true })
	check := func(when string) {
		t.Helper()
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: the directory is %v (%v)", when, fi.Mode().Perm(), err)
		}
		n := 0
		for _, name := range []string{"irisgate.db", "irisgate.db-wal", "irisgate.db-shm", "vapid.json", "admin.sock", "irisgate.lock"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s is %v (%v)", when, name, fi.Mode().Perm(), err)
			}
			n++
		}
		if n < 5 {
			t.Fatalf("%s: only %d of the secret files exist", when, n)
		}
	}
	check("made in a directory that existed")
	g.Close()
	// What an older version (or a careless copy) left.
	for _, name := range []string{"irisgate.db", "irisgate.db-wal", "irisgate.db-shm", "vapid.json"} {
		os.Chmod(filepath.Join(dir, name), 0o644)
	}
	os.Chmod(dir, 0o755)
	testgw.StartIn(t, dir, func(c *server.AppConfig) { c.Push.WebPush = true })
	check("after a restart")
}

// TestSecondGatewayRefused: on main two gateways could serve one data
// directory at once, running every cron job twice.
func TestSecondGatewayRefused(t *testing.T) {
	g := testgw.Start(t)
	_, err := server.Open(server.AppConfig{DataDir: g.Dir, Token: "x"})
	var inUse *datadir.InUseError
	if !errors.As(err, &inUse) || inUse.Role != datadir.RoleServe || inUse.PID != os.Getpid() {
		t.Fatalf("a second gateway on one directory: %v", err)
	}
	if !strings.Contains(err.Error(), "in use by another irisgate serve") {
		t.Fatalf("message %q", err)
	}
	// The first one is unharmed; once it stops, the directory is free.
	g.Dial(t, "laptop").MustDo("ping", client.Lane{}, nil)
	g.Close()
	testgw.StartIn(t, g.Dir).Dial(t, "laptop").MustDo("ping", client.Lane{}, nil)
}

// TestTokenDeletedByAnotherWriterEndsItsSessions: a token deleted from the
// database by another writer than the gateway (an irisgate older than the
// admin socket revoking on the data directory, as main's did) still ends
// its sessions, within the watch's second.
func TestTokenDeletedByAnotherWriterEndsItsSessions(t *testing.T) {
	g := mobileGW(t)
	ctx := context.Background()
	tok, rec, err := gateway.CreateToken(ctx, g.App.Store, "old cli", "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := g.DialErr(t, "browser", tok)
	if err != nil {
		t.Fatal(err)
	}
	phone := connectPhoneWith(t, g, nil, mhello(tok, "tel-1", "Phone"))
	phone.barrier()
	other, err := store.Open(filepath.Join(g.Dir, server.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.RevokeToken(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if f := d.Expect("error", nil); testgw.Str(t, f, "code") != "auth" {
		t.Fatalf("the browser got %s", f.Raw)
	}
	if st := closed(t, d); st != websocket.StatusPolicyViolation {
		t.Fatalf("the browser closed with %v", st)
	}
	phone.refused("auth_failed")
}
