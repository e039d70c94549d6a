package e2e

// The sandbox in the real binary: irisgate re-executes itself as the
// helper that walls a command in, with the defaults' layout (the data
// directory inside the working directory).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/kernel"
	"github.com/irisgate/irisgate/sandbox"
)

// TestSandboxInTheBinary: serve says which wall holds; a command run by
// the terminal tool sees none of the gateway's environment and none of its
// data directory, and ordinary work runs without a question.
func TestSandboxInTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the irisgate binary")
	}
	if why := kernel.Lacks(sandbox.Namespaces); why != "" {
		t.Skipf("needs the namespaces wall: %s", why)
	}
	bin := irisgateBinary(t)
	fake := fakeopenai.New(t)
	work, addr := t.TempDir(), freeAddr(t)
	data := filepath.Join(work, "irisgate-data")
	env := append(modelEnv(t, fake), "IRISGATE_WORKDIR="+work)
	script := "env; cat /proc/$PPID/environ; ls irisgate-data; cat irisgate-data/*; echo hi > out.txt && cat out.txt"
	fake.Push(
		fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c1", "terminal", fmt.Sprintf(`{"command":%q}`, script), 4)},
		fakeopenai.Script{Chunks: fakeopenai.Text("Looked around.", 2)},
	)
	p := startServe(t, "irisgate", bin, addr, data, env...)
	if log := p.output(); !strings.Contains(log, `msg="tool sandbox: namespaces"`) {
		t.Fatalf("serve did not say the namespaces wall holds:\n%s", log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "ws://"+addr+"/ws", client.Options{Token: crashToken, DeviceID: "phone"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	r := record(t, "phone", c.Events())
	ask(ctx, t, c, "message.send", client.Lane{ChatID: "default"}, "look around")
	fs := r.waitFor(30*time.Second, "the reply", answered(t, "Looked around."))
	if has(fs, func(f client.Frame) bool { return f.Type == "picker.approval" }) {
		t.Fatal("an ordinary command asked")
	}
	out := lastContent(modelCalls(t, fake, 2)[1])
	for _, secret := range []string{"sk-test", crashToken, "IRISGATE_", "SQLite format"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the command saw %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "PATH=") || !strings.HasSuffix(strings.TrimSpace(out), "hi") {
		t.Fatalf("the command's output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(data, "irisgate.db")); err != nil {
		t.Fatal(err)
	}
}
