package e2e

// Steering and crashes: the real irisgate binary, its model backend
// pointed at an in-process fake Chat Completions server whose held
// responses keep a turn running, killed with SIGKILL and restarted on the
// same data directory. A steer the turn had not taken is answered once
// after the restart; one it had taken into a model call is not answered
// again.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
)

// modelEnv configures the binary's model backend on fake.
func modelEnv(t *testing.T, fake *fakeopenai.Server) []string {
	return []string{
		"IRISGATE_TOKEN=" + crashToken, "IRISGATE_MODEL=fake-model",
		"OPENAI_BASE_URL=" + fake.URL, "OPENAI_API_KEY=sk-test",
		"IRISGATE_WORKDIR=" + t.TempDir(), // the tools' directory
	}
}

// ask sends a request carrying text and returns its answer.
func ask(ctx context.Context, t *testing.T, c *client.Conn, typ string, lane client.Lane, text string) client.Frame {
	t.Helper()
	f, err := c.Request(ctx, typ, lane, map[string]any{"text": text})
	if err != nil {
		t.Fatalf("%s %q: %v", typ, text, err)
	}
	if f.Type != "message" || str(t, f, "role") != "user" {
		t.Fatalf("%s %q answered with %s", typ, text, f.Raw)
	}
	return f
}

// answered holds once a reply with final text final has stopped and its
// lane has gone idle after it.
func answered(t *testing.T, final string) func([]client.Frame) bool {
	return func(fs []client.Frame) bool {
		stopped := false
		for _, f := range fs {
			switch {
			case f.Type == "message.stop" && str(t, f, "final_text") == final:
				stopped = true
			case f.Type == "agent.idle" && stopped:
				return true
			}
		}
		return false
	}
}

// modelCalls waits for the fake to have had n requests and fails if it had
// more.
func modelCalls(t *testing.T, fake *fakeopenai.Server, n int) []map[string]any {
	t.Helper()
	reqs, ok := fake.WaitRequests(n, 20*time.Second)
	if !ok || len(reqs) != n {
		t.Fatalf("the model got %d requests, want %d", len(reqs), n)
	}
	return reqs
}

// callMsgs returns the messages of a model request.
func callMsgs(req map[string]any) []map[string]any {
	raw, _ := req["messages"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, m := range raw {
		mm, _ := m.(map[string]any)
		out = append(out, mm)
	}
	return out
}

// lastContent is the content of a model request's last message.
func lastContent(req map[string]any) string {
	ms := callMsgs(req)
	if len(ms) == 0 {
		return ""
	}
	return fmt.Sprint(ms[len(ms)-1]["content"])
}

// mentions counts the messages of a model request that contain s.
func mentions(req map[string]any, s string) int {
	n := 0
	for _, m := range callMsgs(req) {
		if strings.Contains(fmt.Sprint(m["content"]), s) {
			n++
		}
	}
	return n
}

// historyCount counts a lane's history messages of role with text.
func historyCount(ctx context.Context, t *testing.T, c *client.Conn, lane client.Lane, role, text string) int {
	t.Helper()
	n := 0
	for _, m := range fullHistory(ctx, t, c, lane) {
		if m.Role == role && m.Text == text {
			n++
		}
	}
	return n
}

// TestCrashSteerUnreadIsAnsweredOnce: the gateway is killed while a turn
// waits on its model call with a steer it has not taken. After the
// restart the steer is answered once, as a turn of its own; the killed
// turn is not run again.
func TestCrashSteerUnreadIsAnsweredOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the irisgate binary")
	}
	bin := irisgateBinary(t)
	fake := fakeopenai.New(t)
	data, addr := t.TempDir(), freeAddr(t)
	url := "ws://" + addr + "/ws"
	env := modelEnv(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	def := client.Lane{ChatID: "default"}

	hold := make(chan struct{})
	defer close(hold)
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Working on the long thing.", 4), Hold: hold, HoldAfter: 2})
	p1 := startServe(t, "irisgate#1", bin, addr, data, env...)
	c1, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "phone"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c1.CloseNow()
	r1 := record(t, "phone#1", c1.Events())
	ask(ctx, t, c1, "message.send", def, "do the long thing")
	r1.waitFor(20*time.Second, "the reply streaming", func(fs []client.Frame) bool {
		return has(fs, func(f client.Frame) bool { return f.Type == "message.update" })
	})
	// The echo is the answer, sent once the steer is committed (and owed).
	ask(ctx, t, c1, "agent.steer", def, "focus on the errors")
	p1.kill()
	r1.waitClosed(10 * time.Second)

	// The steer's turn is held until a device is there to see it end.
	answer := make(chan struct{})
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Looking at the errors.", 3), Hold: answer})
	startServe(t, "irisgate#2", bin, addr, data, env...)
	c2, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "phone"})
	if err != nil {
		t.Fatalf("redial: %v", err)
	}
	defer c2.CloseNow()
	r2 := record(t, "phone#2", c2.Events())
	close(answer)
	r2.waitFor(20*time.Second, "the steer's answer", answered(t, "Looking at the errors."))
	reqs := modelCalls(t, fake, 2)
	if got := lastContent(reqs[1]); got != "focus on the errors" {
		t.Fatalf("after the restart the model was asked %q, want the steer as the turn's input", got)
	}

	// Once: the next message is the next model call.
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("You are welcome.", 2)})
	ask(ctx, t, c2, "message.send", def, "thanks")
	r2.waitFor(20*time.Second, "the next answer", answered(t, "You are welcome."))
	reqs = modelCalls(t, fake, 3)
	if got := lastContent(reqs[2]); got != "thanks" {
		t.Fatalf("third model call %q", got)
	}
	if n := mentions(reqs[2], "focus on the errors"); n != 1 {
		t.Fatalf("the steer is %d times in the conversation, want once: %v", n, callMsgs(reqs[2]))
	}
	if n := historyCount(ctx, t, c2, def, "user", "focus on the errors"); n != 1 {
		t.Fatalf("the steer is %d times in history", n)
	}
	if n := historyCount(ctx, t, c2, def, "assistant", "Looking at the errors."); n != 1 {
		t.Fatalf("the steer was answered %d times", n)
	}
}

// TestCrashSteerConsumedIsNotAnsweredAgain: the turn took the steer into
// its second model call, and the gateway is killed while that call
// streams. After the restart no turn answers the steer again: the next
// model call is the person's next message, with the steer once in the
// conversation.
func TestCrashSteerConsumedIsNotAnsweredAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the irisgate binary")
	}
	bin := irisgateBinary(t)
	fake := fakeopenai.New(t)
	data, addr := t.TempDir(), freeAddr(t)
	url := "ws://" + addr + "/ws"
	env := modelEnv(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	def := client.Lane{ChatID: "default"}

	hold1, hold2 := make(chan struct{}), make(chan struct{})
	defer close(hold2)
	fake.Push(
		fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c1", "todo", `{"todos":[{"id":"a","content":"look"}]}`, 3), Hold: hold1},
		fakeopenai.Script{Chunks: fakeopenai.Text("Using the blue one, as you say.", 4), Hold: hold2, HoldAfter: 2},
	)
	p1 := startServe(t, "irisgate#1", bin, addr, data, env...)
	c1, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "phone"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c1.CloseNow()
	r1 := record(t, "phone#1", c1.Events())
	ask(ctx, t, c1, "message.send", def, "do the thing")
	modelCalls(t, fake, 1)
	ask(ctx, t, c1, "agent.steer", def, "use the blue one")
	close(hold1)
	// The steer is recorded, and no longer owed, before this call is made.
	reqs := modelCalls(t, fake, 2)
	if n := mentions(reqs[1], "use the blue one"); n != 1 {
		t.Fatalf("the steer is %d times in the second call: %v", n, callMsgs(reqs[1]))
	}
	r1.waitFor(20*time.Second, "the second call streaming", func(fs []client.Frame) bool {
		return has(fs, func(f client.Frame) bool { return f.Type == "message.update" })
	})
	p1.kill()
	r1.waitClosed(10 * time.Second)

	startServe(t, "irisgate#2", bin, addr, data, env...)
	c2, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "phone"})
	if err != nil {
		t.Fatalf("redial: %v", err)
	}
	defer c2.CloseNow()
	r2 := record(t, "phone#2", c2.Events())
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Here is the rest.", 3)})
	ask(ctx, t, c2, "message.send", def, "and then?")
	r2.waitFor(20*time.Second, "the next answer", answered(t, "Here is the rest."))
	// Had the steer been owed, the start would have queued its turn ahead
	// of this message, and this call would be the steer's.
	reqs = modelCalls(t, fake, 3)
	if got := lastContent(reqs[2]); got != "and then?" {
		t.Fatalf("third model call %q", got)
	}
	if n := mentions(reqs[2], "use the blue one"); n != 1 {
		t.Fatalf("the steer is %d times in the conversation, want once: %v", n, callMsgs(reqs[2]))
	}
	if n := historyCount(ctx, t, c2, def, "user", "use the blue one"); n != 1 {
		t.Fatalf("the steer is %d times in history", n)
	}
}
