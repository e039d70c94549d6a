package main

// Issue 15's CLI: admin commands act on the running gateway (found by
// --data, ./irisgate-data or the user's registry of running gateways) and
// never invent a data directory; channels by name; messages and hints
// instead of the whole usage; the version.

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

// TestAdminCommandsNeverInventADataDir: on main, token create and cron add
// run from another directory made a new ./irisgate-data and printed a
// token the running gateway did not know.
func TestAdminCommandsNeverInventADataDir(t *testing.T) {
	noGateways(t)
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"token", "create", "--name", "x"}, {"token", "list"}, {"cron", "add", "every 1h", "--text", "x"}, {"channels"},
		{"send", "--to", "default", "--text", "x"},
	} {
		code, out, errOut := irisgate(t, args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "irisgate: no gateway is running and there is no data directory here") ||
			!strings.Contains(errOut, "--data DIR") || strings.Contains(errOut, "Usage:") {
			t.Fatalf("%v: %d %q %q", args, code, out, errOut)
		}
	}
	if _, err := os.Stat("irisgate-data"); !os.IsNotExist(err) {
		t.Fatalf("a data directory was made: %v", err)
	}
	// A directory that exists but holds no gateway's data is not one.
	empty := t.TempDir()
	if code, _, errOut := irisgate(t, "token", "list", "--data", empty); code != 1 || !strings.Contains(errOut, "no gateway data in") {
		t.Fatalf("list in an empty directory: %d %q", code, errOut)
	}
}

// TestAdminCommandsReachTheRunningGateway: with a gateway running, the
// commands act through its admin socket, from any directory: a new token
// works at once, a revoked one's connection is closed, channels are
// listed and named.
func TestAdminCommandsReachTheRunningGateway(t *testing.T) {
	noGateways(t)
	g := testgw.Start(t)
	laptop := g.Dial(t, "laptop")
	ch := laptop.MustDo("channel.create", client.Lane{}, map[string]any{"name": "Reports", "kind": "channel"})
	reports := testgw.Str(t, ch, "chat_id")
	// The registry is how `irisgate serve` is found from elsewhere.
	unregister, err := admin.Register(g.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	t.Chdir(t.TempDir())

	code, tok, errOut := irisgate(t, "token", "create", "--name", "tablet")
	tok = strings.TrimSpace(tok)
	if code != 0 || !strings.Contains(errOut, "on the running gateway ("+g.Dir+")") {
		t.Fatalf("create: %d %q %q", code, tok, errOut)
	}
	tablet, err := g.DialErr(t, "tablet", tok)
	if err != nil {
		t.Fatalf("the new token, at once: %v", err)
	}
	tablet.MustDo("ping", client.Lane{}, nil)

	code, out, _ := irisgate(t, "channels")
	if row := lineWith(out, reports); code != 0 || !strings.Contains(row, "Reports") || !strings.Contains(row, "channel") ||
		!strings.Contains(lineWith(out, "Default"), "default") {
		t.Fatalf("channels: %d\n%s", code, out)
	}
	// send --to and cron --to take a channel's name.
	code, out, errOut = irisgate(t, "send", "--to", "reports", "--text", "by name")
	if code != 0 || !strings.HasPrefix(out, "m_") {
		t.Fatalf("send by name: %d %q %q", code, out, errOut)
	}
	m := laptop.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "by name" })
	if m.ChatID != reports {
		t.Fatalf("delivered into %s, want %s", m.ChatID, reports)
	}
	code, out, errOut = irisgate(t, "cron", "add", "every 1h", "--text", "tick", "--to", "Reports", "--name", "tick")
	if code != 0 || !strings.Contains(out, "into "+reports) || errOut != "" {
		t.Fatalf("cron add by name: %d %q %q", code, out, errOut)
	}
	id := strings.Fields(out)[1]
	if code, out, _ := irisgate(t, "cron", "run", id); code != 0 || out != id+` "tick" runs now, into `+reports+"\n" {
		t.Fatalf("cron run: %d %q", code, out)
	}
	laptop.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "tick" })

	// Revoked by its value: its connection ends.
	code, _, errOut = irisgate(t, "token", "revoke", tok)
	if code != 0 || !strings.Contains(errOut, "1 live connection(s) closed") {
		t.Fatalf("revoke: %d %q", code, errOut)
	}
	if st := closedWith(t, tablet); st != websocket.StatusPolicyViolation {
		t.Fatalf("the tablet's connection closed with %v", st)
	}
}

func closedWith(t *testing.T, d *testgw.Device) websocket.StatusCode {
	t.Helper()
	for {
		if _, ok := d.NextWithin(testgw.Wait); !ok {
			break
		}
	}
	<-d.Done()
	return websocket.CloseStatus(d.Err())
}

func TestErrorsPrintAMessageAndAHint(t *testing.T) {
	noGateways(t)
	for _, tc := range []struct {
		args       []string
		says, hint string
	}{
		{[]string{"token"}, `expected one of "create"`, "see: irisgate token --help"},
		{[]string{"cron", "add", "--text", "x"}, "expected \"<schedule>\"", "see: irisgate cron add --help"},
		{[]string{"cron", "add", "every 1h"}, "give --prompt", "see: irisgate cron add --help"},
		{[]string{"cron", "add", "every 1h", "--prompt", "a", "--text", "b"}, "can't be used together", "see: irisgate cron add --help"},
		{[]string{"nonsense"}, "unexpected argument nonsense", "see: irisgate --help"},
	} {
		code, out, errOut := irisgate(t, tc.args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 2 || out != "" || len(lines) != 2 || !strings.Contains(lines[0], tc.says) || strings.TrimSpace(lines[1]) != tc.hint {
			t.Errorf("%v: %d %q\n%s", tc.args, code, out, errOut)
		}
	}
	// cron add's usage no longer shows --prompt and --text as both required.
	code, out, _ := irisgate(t, "cron", "add", "--help")
	usage := lineWith(out, "Usage:")
	if code != 0 || strings.Contains(usage, "--prompt") || strings.Contains(usage, "--text") || !strings.Contains(out, "Give this or --text") {
		t.Fatalf("cron add --help: %d\n%s", code, out)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := irisgate(t, args...)
		if code != 0 || !strings.HasPrefix(out, "irisgate ") || !strings.Contains(out, runtime.Version()) {
			t.Fatalf("%v: %d %q", args, code, out)
		}
	}

}

// A gateway that could not open its admin socket (a mount that refuses
// Unix sockets; here, a directory in the socket's place) still has its
// tokens managed from the command line: token create, list and revoke act
// on its database beside it, and a revoked token's connection is closed
// by the gateway's watch of the tokens table, within a second or so.
// (Before, every token command failed while the gateway ran: nothing could
// be revoked.)
func TestTokenCommandsWithoutAnAdminSocket(t *testing.T) {
	noGateways(t)
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "admin.sock", "blocked"), 0o700); err != nil {
		t.Fatal(err)
	}
	g := testgw.StartIn(t, dir)
	code, tok, errOut := irisgate(t, "token", "create", "--data", dir, "--name", "tablet")
	tok = strings.TrimSpace(tok)
	if code != 0 || !strings.Contains(errOut, "beside the gateway running there") {
		t.Fatalf("create: %d %q %q", code, tok, errOut)
	}
	tablet, err := g.DialErr(t, "tablet", tok)
	if err != nil {
		t.Fatalf("the new token: %v", err)
	}
	tablet.MustDo("ping", client.Lane{}, nil)
	if code, list, errOut := irisgate(t, "token", "list", "--data", dir); code != 0 || !strings.Contains(list, "tablet") {
		t.Fatalf("list: %d %q %q", code, list, errOut)
	}
	code, _, errOut = irisgate(t, "token", "revoke", tok, "--data", dir)
	if code != 0 || !strings.Contains(errOut, "beside the gateway running there") {
		t.Fatalf("revoke: %d %q", code, errOut)
	}
	if st := closedWith(t, tablet); st != websocket.StatusPolicyViolation {
		t.Fatalf("the revoked tablet's connection closed with %v", st)
	}
	if _, err := g.DialErr(t, "tablet", tok); err == nil {
		t.Fatal("the revoked token still admits")
	}
}
