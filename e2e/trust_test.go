package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
)

// cliProc runs one irisgate command to its end, in dir, with env added,
// and returns its exit code, stdout and stderr.
func cliProc(t *testing.T, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IRISGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("irisgate %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// privateDir is a temporary directory only this user can enter (the
// registry of running gateways must be).
func privateDir(t *testing.T) string {
	d := t.TempDir()
	os.Chmod(d, 0o700)
	return d
}

// TestRevokeFromAnotherProcess: `irisgate token revoke`, a process of its
// own run from another directory, ends the live sessions of the token in
// both dialects (on main it only deleted the row: both kept working). It
// also checks that a second `irisgate serve` on the same data directory
// refuses to start.
func TestRevokeFromAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the irisgate binary")
	}
	bin := irisgateBinary(t)
	data, elsewhere := t.TempDir(), t.TempDir()
	env := []string{"IRISGATE_RUNTIME_DIR=" + privateDir(t)}
	addr := freeAddr(t)
	gw := startServe(t, "irisgate", bin, addr, data, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A token made by a command run in another directory, with no --data:
	// the command finds the running gateway.
	code, out, errOut := cliProc(t, bin, elsewhere, env, "token", "create", "--name", "shared")
	tok := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(tok, "igt_") || !strings.Contains(errOut, "on the running gateway") {
		t.Fatalf("token create: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(elsewhere + "/irisgate-data"); !os.IsNotExist(err) {
		t.Fatalf("token create made a data directory where it ran: %v", err)
	}
	url := "ws://" + addr + "/ws"
	browser, err := client.Dial(ctx, url, client.Options{Token: tok, DeviceID: "browser", DeviceName: "browser"})
	if err != nil {
		t.Fatalf("the browser with the new token: %v", err)
	}
	defer browser.CloseNow()
	rb := record(t, "browser", browser.Events())
	phone, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer phone.CloseNow()
	hello, _ := json.Marshal(map[string]any{"t": "hello", "token": tok, "device": map[string]any{"id": "tel-1", "name": "Phone"}})
	phone.Write(ctx, websocket.MessageText, hello)
	if _, b, err := phone.Read(ctx); err != nil || !strings.Contains(string(b), `"t":"ready"`) {
		t.Fatalf("the phone's hello: %s %v", b, err)
	}
	phoneFrames := make(chan []byte, 64)
	phoneEnd := make(chan error, 1)
	go func() {
		for {
			_, b, err := phone.Read(context.Background())
			if err != nil {
				phoneEnd <- err
				return
			}
			phoneFrames <- b
		}
	}()

	revoked := time.Now() // the command's own start included
	code, _, errOut = cliProc(t, bin, elsewhere, env, "token", "revoke", tok)
	if code != 0 || !strings.Contains(errOut, "2 live connection(s) closed") {
		t.Fatalf("token revoke: %d %q", code, errOut)
	}
	fs := rb.waitFor(10*time.Second, "the browser's auth error", func(fs []client.Frame) bool {
		return has(fs, func(f client.Frame) bool { return f.Type == "error" && str(t, f, "code") == "auth" })
	})
	if !rb.waitClosed(10 * time.Second) {
		t.Fatal("the browser's connection is still open")
	}
	browserGone := time.Since(revoked)
	if st := websocket.CloseStatus(browser.Err()); st != websocket.StatusPolicyViolation {
		t.Fatalf("the browser closed with %v after %s", st, summary(fs))
	}
	select {
	case err := <-phoneEnd:
		if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Fatalf("the phone's connection ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the phone's connection is still open")
	}
	phoneGone := time.Since(revoked)
	close(phoneFrames)
	var last []byte
	for b := range phoneFrames {
		last = b
	}
	if !strings.Contains(string(last), `"code":"auth_failed"`) || !strings.Contains(string(last), "revoked") {
		t.Fatalf("the phone's last frame: %s", last)
	}
	t.Logf("from the revoke command's start: the browser was closed within %v, the phone within %v", browserGone, phoneGone)

	// A second gateway on the same directory refuses, saying why.
	second := exec.Command(bin, "serve", "--listen", freeAddr(t), "--data", data)
	second.Env = append(os.Environ(), env...)
	msg, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "is in use by another irisgate serve (pid ") {
		t.Fatalf("a second gateway on the directory: %v\n%s", err, msg)
	}
	if err := gw.stop(20 * time.Second); err != nil {
		t.Fatalf("the gateway's shutdown: %v\n%s", err, gw.output())
	}
}
