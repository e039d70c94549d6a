package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
)

// serveAddr is the address serve's log says it listens on.
func serveAddr(t *testing.T, p *serveProc) string {
	t.Helper()
	p.stderr.waitFor(t, "irisgate listening")
	m := regexp.MustCompile(`ws=ws://(127\.0\.0\.1:\d+)/ws`).FindStringSubmatch(strings.Join(p.stderr.snapshot(), "\n"))
	if m == nil {
		t.Fatalf("no address in serve's log:\n%s", strings.Join(p.stderr.snapshot(), "\n"))
	}
	return m[1]
}

func dialToken(t *testing.T, addr, device, token string) (*client.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	c, err := client.Dial(ctx, "ws://"+addr+"/ws", client.Options{Token: token, DeviceID: device, DeviceName: device})
	if err == nil {
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, err
}

// TestServeOnPostgres runs `irisgate serve` as people do, its store named
// in the config file (the TOML key store, as the flag): it answers
// /healthz, a token made beside it with `irisgate token create` admits a
// device at once, and it stops cleanly. Afterwards the data directory
// remembers its database: the commands acting on it without a gateway
// need its --store (and say so), and serve without one is refused.
func TestServeOnPostgres(t *testing.T) {
	noGateways(t)
	url := pgtest.DB(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "irisgate.toml")
	if err := os.WriteFile(conf, []byte("store = \""+url+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dir, nil, "--config", conf)
	addr := serveAddr(t, p)
	if line := p.stderr.waitFor(t, "irisgate listening"); !strings.Contains(line, `store="postgres://postgres@/`) {
		t.Errorf("the log does not say which store: %s", line)
	}
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", res.Status)
	}

	tok, errOut := runIrisgate(t, dir, nil, "token", "create", "--name", "tablet")
	tok = strings.TrimSpace(tok)
	if !strings.HasPrefix(tok, "igt_") || !strings.Contains(errOut, "on the running gateway") {
		t.Fatalf("token create beside serve: %q %q", tok, errOut)
	}
	c, err := dialToken(t, addr, "tablet", tok)
	if err != nil {
		t.Fatalf("the new token: %v", err)
	}
	c.Close()
	p.stop(t)
	data := filepath.Join(dir, "irisgate-data")
	if _, err := os.Stat(filepath.Join(data, "irisgate.db")); !os.IsNotExist(err) {
		t.Errorf("a SQLite file beside PostgreSQL: %v", err)
	}

	// No gateway now: the commands act on the database itself, given it.
	code, _, errOut := irisgate(t, "token", "list", "--data", data)
	if code != 1 || !strings.Contains(errOut, "keeps its state in PostgreSQL") || !strings.Contains(errOut, "give the same --store") {
		t.Fatalf("token list without --store: %d %q", code, errOut)
	}
	if list, _ := runIrisgate(t, dir, []string{"IRISGATE_STORE=" + url}, "token", "list"); !strings.Contains(list, "tablet") {
		t.Fatalf("token list with IRISGATE_STORE: %q", list)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	out, err := irisgateCmd(t, ctx, dir, nil, "serve", "--listen", "127.0.0.1:0").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "keeps its state in PostgreSQL") {
		t.Fatalf("serve without --store: %v\n%s", err, out)
	}
	// And with it again, everything is there.
	p = startServe(t, dir, []string{"IRISGATE_STORE=" + url})
	if _, err := dialToken(t, serveAddr(t, p), "tablet", tok); err != nil {
		t.Fatalf("the token after a restart: %v", err)
	}
	// Killed and started again at once (a supervisor's restart), it is
	// not refused for the database its dead self held a moment ago.
	p.cmd.Process.Kill()
	<-p.stderr.done
	p.cmd.Wait()
	p = startServe(t, dir, []string{"IRISGATE_STORE=" + url})
	if _, err := dialToken(t, serveAddr(t, p), "tablet", tok); err != nil {
		t.Fatalf("the token after kill -9 and a restart: %v", err)
	}
	p.stop(t)
}

// A gateway on PostgreSQL whose admin socket cannot be made (here, a
// directory in its place) still has its tokens managed beside it: the
// commands open the database without migrating it (the gateway owns its
// schema), given its --store; a revoked token's connection is closed by
// the gateway's watch of the tokens table.
func TestTokenCommandsBesideAGatewayOnPostgres(t *testing.T) {
	noGateways(t)
	url := pgtest.DB(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "irisgate-data")
	if err := os.MkdirAll(filepath.Join(data, "admin.sock", "blocked"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dir, []string{"IRISGATE_STORE=" + url})
	addr := serveAddr(t, p)
	code, _, errOut := irisgate(t, "token", "create", "--data", data)
	if code != 1 || !strings.Contains(errOut, "give the same --store") {
		t.Fatalf("token create beside, without --store: %d %q", code, errOut)
	}
	code, tok, errOut := irisgate(t, "token", "create", "--data", data, "--store", url, "--name", "tablet")
	tok = strings.TrimSpace(tok)
	if code != 0 || !strings.Contains(errOut, "beside the gateway running there") {
		t.Fatalf("token create beside: %d %q %q", code, tok, errOut)
	}
	c, err := dialToken(t, addr, "tablet", tok)
	if err != nil {
		t.Fatalf("the new token: %v", err)
	}
	code, _, errOut = irisgate(t, "token", "revoke", tok, "--data", data, "--store", url)
	if code != 0 || !strings.Contains(errOut, "beside the gateway running there") {
		t.Fatalf("revoke beside: %d %q", code, errOut)
	}
	deadline := time.After(testgw.Wait)
	for open := true; open; {
		select {
		case _, open = <-c.Events():
		case <-deadline:
			t.Fatalf("the revoked tablet's connection still open after %v", testgw.Wait)
		}
	}
	<-c.Done()
	if st := websocket.CloseStatus(c.Err()); st != websocket.StatusPolicyViolation {
		t.Fatalf("the revoked tablet's connection closed with %v", st)
	}
	p.stop(t)
}
