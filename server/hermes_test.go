package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakehermes"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// These tests drive a real gateway whose agent is the Hermes bridge, talking
// to a fake Hermes API server over HTTP, with real WebSocket devices (every
// frame they read is checked against the schema).

const hermesKey = "sk-hermes-gw"

// hermesGW starts a gateway in dir whose agent is a bridge to fake.
func hermesGW(t *testing.T, fake *fakehermes.Server, dir string, edit ...func(*agent.HermesConfig)) *testgw.GW {
	t.Helper()
	cfg := agent.HermesConfig{URL: fake.URL, Key: hermesKey, PollEvery: 10 * time.Millisecond, RetryBackoff: time.Millisecond, MaxRetries: 1}
	for _, e := range edit {
		e(&cfg)
	}
	h, err := agent.NewHermes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() }) // after the gateway's own cleanup
	g := testgw.StartIn(t, dir, func(c *server.AppConfig) { c.Agent = h })
	hermesAwaitRecovered(t)
	return g
}

// hermesAwaitRecovered waits until the gateway has finished its start-up
// recovery. It works around a gateway bug: gateway.Run settles what the
// last run left open (recover) in its own goroutine while the server
// already takes messages, so a turn started in the first moments can be
// taken for one a crash left behind (its turn idled, its reply finished
// under it). A Hermes turn lasts long enough to be caught by it. Recovery
// is over once Run has started its prune loop, which lives until the
// gateway closes (these tests run one gateway at a time).
func hermesAwaitRecovered(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if bytes.Contains(buf[:n], []byte("gateway.(*Gateway).pruneLoop")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not finish its start-up recovery within %v", testgw.Wait)
		}
		<-time.After(time.Millisecond) // polling a condition, with a deadline
	}
}

// turnFrames sends text and returns what d got until the turn's agent.idle.
func turnFrames(t *testing.T, d *testgw.Device, text string) []client.Frame {
	t.Helper()
	send(t, d, def, text)
	return until(t, d, is(t, "agent.idle"))
}

func findFrame(t *testing.T, frames []client.Frame, match func(client.Frame) bool) (client.Frame, bool) {
	t.Helper()
	for _, f := range frames {
		if match(f) {
			return f, true
		}
	}
	return client.Frame{}, false
}

// systemSays matches a system message containing substr.
func systemSays(t *testing.T, substr string) func(client.Frame) bool {
	return func(f client.Frame) bool {
		return f.Type == "message" && testgw.Str(t, f, "role") == "system" && strings.Contains(testgw.Str(t, f, "text"), substr)
	}
}

// commentarySays matches a commentary frame containing substr.
func commentarySays(t *testing.T, substr string) func(client.Frame) bool {
	return func(f client.Frame) bool {
		return f.Type == "commentary" && strings.Contains(testgw.Str(t, f, "text"), substr)
	}
}

func finalText(t *testing.T, frames []client.Frame) string {
	t.Helper()
	f, ok := findFrame(t, frames, is(t, "message.stop"))
	if !ok {
		t.Fatalf("no message.stop among %s", typesOf(frames))
	}
	return testgw.Str(t, f, "final_text")
}

func waitFake(t *testing.T, fake *fakehermes.Server, what string, cond func([]fakehermes.Run) bool) {
	t.Helper()
	if !fake.Wait(testgw.Wait, cond) {
		t.Fatalf("fake Hermes: %s did not happen: %+v", what, fake.Runs())
	}
}

func TestHermesTurnThroughTheGateway(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	const answer = "Two files: go.mod and main.go."
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Reasoning("They want a listing."),
		fakehermes.Split(fakehermes.Delta("Let me look — "), 7),
		fakehermes.Keepalive(),
		fakehermes.Delta("one moment."),
		fakehermes.ToolStarted("terminal", "ls"),
		fakehermes.Keepalive(),
		fakehermes.ToolCompleted("terminal", 0.042, false),
		fakehermes.Split(fakehermes.Delta("Two files: go.mod "), 5),
		fakehermes.Delta("and main.go."),
		fakehermes.Completed(answer, 812, 21),
	}})
	g := hermesGW(t, fake, t.TempDir())
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")

	send(t, a, def, "what is in this directory?")
	for _, d := range []*testgw.Device{a, b} {
		got := until(t, d, is(t, "agent.idle"))
		var seq []string
		var last string
		for _, f := range got {
			p := testgw.P(t, f)
			switch f.Type {
			case "commentary":
				if p["text"] != "Let me look — one moment." {
					t.Errorf("%s: commentary %s", d.ID, f.Raw)
				}
			case "tool.start":
				if p["name"] != "terminal" || p["emoji"] != "💻" || p["preview"] != "ls" {
					t.Errorf("%s: %s", d.ID, f.Raw)
				}
			case "tool.end":
				if p["name"] != "terminal" || p["ok"] != true || p["duration"] != 0.042 {
					t.Errorf("%s: %s", d.ID, f.Raw)
				}
			case "message.update":
				cur, _ := p["text"].(string)
				// The text so far, of the bubble before the tool (which then
				// became the commentary) or after it; updates may coalesce.
				if !strings.HasPrefix("Let me look — one moment.", cur) && !strings.HasPrefix(answer, cur) {
					t.Errorf("%s: update %q", d.ID, cur)
				}
				last = cur
				continue
			case "message.stop":
				if p["final_text"] != answer || p["model"] != agent.HermesModelID || p["tokens"] != float64(21) {
					t.Errorf("%s: %s", d.ID, f.Raw)
				}
				if r, _ := p["reasoning"].(string); r != "They want a listing." {
					t.Errorf("%s: reasoning %q", d.ID, r)
				}
			case "message", "read.receipt", "status", "typing", "agent.busy":
				continue
			}
			seq = append(seq, f.Type)
		}
		want := "message.start,commentary,tool.start,tool.end,message.stop,agent.idle"
		if strings.Join(seq, ",") != want {
			t.Errorf("%s: frames %v, want %s", d.ID, seq, want)
		}
		if last != answer {
			t.Errorf("%s: last update %q", d.ID, last)
		}
	}
	first := fake.Runs()[0]
	if body := fake.RunBodies()[0]; body["input"] != "what is in this directory?" || body["session_id"] != nil {
		t.Fatalf("first run %v", body)
	}

	// The next turn continues Hermes's session, with the conversation.
	fake.Push(fakehermes.Reply("main.go holds the entry point.", 3))
	if got := finalText(t, turnFrames(t, a, "and main.go?")); got != "main.go holds the entry point." {
		t.Fatalf("second reply %q", got)
	}
	body := fake.RunBodies()[1]
	wantHist := fmt.Sprintf("[map[content:what is in this directory? role:user] map[content:%s role:assistant]]", answer)
	if body["session_id"] != first.ID || fmt.Sprint(body["conversation_history"]) != wantHist {
		t.Fatalf("second run %v", body)
	}

	// So does a turn after a restart, through a new bridge.
	g.Close()
	g2 := hermesGW(t, fake, g.Dir)
	c := g2.Dial(t, "laptop")
	fake.Push(fakehermes.Reply("Still here.", 1))
	if got := finalText(t, turnFrames(t, c, "still there?")); got != "Still here." {
		t.Fatalf("reply after restart %q", got)
	}
	if body := fake.RunBodies()[2]; body["session_id"] != first.ID {
		t.Fatalf("after the restart the run went to session %v, want %s", body["session_id"], first.ID)
	}
	h, err := history(t, c, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.Messages); n != 6 || h.Messages[5].Model != agent.HermesModelID {
		t.Fatalf("history %+v", h.Messages)
	}
}

func TestHermesApprovalThroughThePicker(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.ToolStarted("terminal", "rm -rf build"),
		fakehermes.Approval("rm -rf build", "recursive delete"),
		fakehermes.ToolCompleted("terminal", 0.3, false),
		fakehermes.Completed("Cleaned the build directory.", 10, 5),
	}})
	g := hermesGW(t, fake, t.TempDir())
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	send(t, a, def, "clean up")
	var pickerID string
	for _, d := range []*testgw.Device{a, b} {
		pk := d.Expect("picker.approval", nil)
		p := testgw.P(t, pk)
		if p["command"] != "rm -rf build" || p["description"] != "recursive delete" {
			t.Fatalf("%s: %s", d.ID, pk.Raw)
		}
		pickerID, _ = p["picker_id"].(string)
	}
	if err := b.Send(t.Context(), "picker.select", def, map[string]any{"picker_id": pickerID, "value": "session"}); err != nil {
		t.Fatal(err)
	}
	got := until(t, a, is(t, "agent.idle"))
	if _, ok := findFrame(t, got, systemSays(t, "✅ Allowed for this session: `rm -rf build` (by tablet")); !ok {
		t.Errorf("no word on the approval, with who gave it: %s", typesOf(got))
	}
	if txt := finalText(t, got); txt != "Cleaned the build directory." {
		t.Fatalf("reply %q", txt)
	}
	if ap := fake.Runs()[0].Approvals; len(ap) != 1 || ap[0] != "session" {
		t.Fatalf("Hermes got %v", ap)
	}
}

// Hermes's own approval timeout denied the command before the person
// answered: the chat says so, once, and never "Allowed".
func TestHermesLateApprovalSaysOnlyThatItIsLate(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	hold := make(chan struct{})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.ApprovalWithin("rm -rf build", "recursive delete", 20*time.Millisecond),
		fakehermes.Hold(hold),
		fakehermes.Completed("I left it.", 1, 1),
	}})
	g := hermesGW(t, fake, t.TempDir())
	a := g.Dial(t, "phone")
	send(t, a, def, "clean up")
	pk := a.Expect("picker.approval", nil)
	waitFake(t, fake, "Hermes's own timeout", func(rs []fakehermes.Run) bool { return len(rs) == 1 && len(rs[0].Approvals) == 1 })
	reply := a.MustDo("picker.select", def, map[string]any{"picker_id": testgw.P(t, pk)["picker_id"], "value": "once"})
	if txt := testgw.Str(t, reply, "text"); !strings.Contains(txt, "Too late for `rm -rf build`") || !strings.Contains(txt, "(by phone") {
		t.Fatalf("reply %s", reply.Raw)
	}
	close(hold)
	got := until(t, a, is(t, "agent.idle"))
	none(t, "phone", got, systemSays(t, "Allowed"))
	if ap := fake.Runs()[0].Approvals; len(ap) != 1 || ap[0] != "timeout" {
		t.Fatalf("Hermes took %v", ap)
	}
}

func TestHermesStopThroughTheGateway(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	hold := make(chan struct{})
	defer close(hold)
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Working on it"), fakehermes.Hold(hold)}})
	g := hermesGW(t, fake, t.TempDir())
	a := g.Dial(t, "phone")
	send(t, a, def, "a long job")
	a.Expect("message.update", nil)
	idle := a.MustDo("agent.stop", def, nil)
	if idle.Type != "agent.idle" {
		t.Fatalf("agent.stop answered with %s", idle.Raw)
	}
	got := until(t, a, reply(idle.ID))
	if txt := finalText(t, got); txt != "Working on it" {
		t.Fatalf("stopped reply %q", txt)
	}
	none(t, "phone", got, systemSays(t, "failed"))
	if r := fake.Runs()[0]; !r.StopRequested || r.Status != "cancelled" {
		t.Fatalf("Hermes's run was not stopped: %+v", r)
	}
	// The lane goes on.
	fake.Push(fakehermes.Reply("Ready.", 1))
	if txt := finalText(t, turnFrames(t, a, "next")); txt != "Ready." {
		t.Fatalf("next reply %q", txt)
	}
}

func TestHermesDroppedStreamThroughTheGateway(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	const full = "Part one, and part two."
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Delta("Part one, "),
		fakehermes.Disconnect(),
		fakehermes.AwaitPolls(2),
		fakehermes.Delta("and part two."),
		fakehermes.Completed(full, 5, 5),
	}})
	g := hermesGW(t, fake, t.TempDir())
	a := g.Dial(t, "phone")
	got := turnFrames(t, a, "tell me")
	if _, ok := findFrame(t, got, commentarySays(t, "broke off")); !ok {
		t.Errorf("the person was not told the live stream broke off: %s", typesOf(got))
	}
	none(t, "phone", got, systemSays(t, "failed"))
	if txt := finalText(t, got); txt != full {
		t.Fatalf("reply %q, want the whole answer", txt)
	}
}

// An older Hermes has no steer route: the note goes with the next message.
func TestHermesSteerGoesWithTheNextMessage(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: true})
	hold := make(chan struct{})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Reading"), fakehermes.Hold(hold), fakehermes.Completed("Read it all.", 1, 1)}})
	g := hermesGW(t, fake, t.TempDir())
	a := g.Dial(t, "phone")
	send(t, a, def, "read the logs")
	a.Expect("message.update", nil)
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "only errors"})
	if echo.Type != "message" {
		t.Fatalf("agent.steer answered with %s", echo.Raw)
	}
	a.Expect("commentary", func(f client.Frame) bool { return strings.Contains(testgw.Str(t, f, "text"), "next message") })
	close(hold)
	a.Expect("agent.idle", nil)
	fake.Push(fakehermes.Reply("Three errors.", 1))
	if txt := finalText(t, turnFrames(t, a, "so?")); txt != "Three errors." {
		t.Fatalf("reply %q", txt)
	}
	bodies := fake.RunBodies()
	if len(bodies) != 2 {
		t.Fatalf("%d runs: the steer must not run on its own", len(bodies))
	}
	if in := fmt.Sprint(bodies[1]["input"]); !strings.Contains(in, "only errors") || !strings.HasSuffix(in, "so?") || strings.Index(in, "only errors") > strings.Index(in, "so?") {
		t.Fatalf("next input %q does not start with the note", in)
	}
}

// occupy starts ten runs nobody follows, filling Hermes.
func occupy(t *testing.T, fake *fakehermes.Server) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < 10; i++ {
		req, _ := http.NewRequest(http.MethodPost, fake.URL+"/v1/runs", strings.NewReader(`{"input":"elsewhere"}`))
		req.Header.Set("Authorization", "Bearer "+hermesKey)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("occupying run %d: HTTP %d", i, resp.StatusCode)
		}
	}
}

func TestHermesFailuresLeaveTheLaneUsable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    func(*agent.HermesConfig)
		break_ func(t *testing.T, fake *fakehermes.Server)
		says   string
		mend   func(t *testing.T, fake *fakehermes.Server)
	}{
		{name: "unreachable", says: "cannot reach Hermes at",
			break_: func(t *testing.T, fake *fakehermes.Server) { fake.Down() },
			mend:   func(t *testing.T, fake *fakehermes.Server) { fake.Up(t) }},
		{name: "wrong key", says: "Hermes refused irisgate's API key (HTTP 401: Invalid API key)",
			break_: func(t *testing.T, fake *fakehermes.Server) { fake.SetKey("rotated") },
			mend:   func(t *testing.T, fake *fakehermes.Server) { fake.SetKey(hermesKey) }},
		{name: "ten runs already", says: "Hermes is busy",
			break_: occupy,
			mend:   func(t *testing.T, fake *fakehermes.Server) { fake.Sweep() }},
		{name: "run failed", says: "Hermes could not finish the run: model provider unavailable",
			break_: func(t *testing.T, fake *fakehermes.Server) {
				fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Failed("model provider unavailable")}})
			}},
		{name: "over its time", says: "Hermes did not finish within 300ms",
			cfg: func(c *agent.HermesConfig) { c.Timeout = 300 * time.Millisecond },
			break_: func(t *testing.T, fake *fakehermes.Server) {
				hold := make(chan struct{})
				t.Cleanup(func() { close(hold) })
				fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Still going"), fakehermes.Hold(hold)}})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
			var edits []func(*agent.HermesConfig)
			if tc.cfg != nil {
				edits = append(edits, tc.cfg)
			}
			g := hermesGW(t, fake, t.TempDir(), edits...)
			a := g.Dial(t, "phone").In(t)
			tc.break_(t, fake)
			got := turnFrames(t, a, "hello?")
			if _, ok := findFrame(t, got, systemSays(t, "The agent failed: "+tc.says)); !ok {
				var texts []string
				for _, f := range got {
					if f.Type == "message" {
						texts = append(texts, testgw.Str(t, f, "text"))
					}
				}
				t.Fatalf("no system message saying %q; messages: %q", tc.says, texts)
			}
			if tc.mend != nil {
				tc.mend(t, fake)
			}
			fake.Push(fakehermes.Reply("Back.", 1))
			if txt := finalText(t, turnFrames(t, a, "again")); txt != "Back." {
				t.Fatalf("the lane did not recover: %q", txt)
			}
		})
	}
}

func TestHermesInStatusAndModelPicker(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	g := hermesGW(t, fake, t.TempDir())
	a := g.Dial(t, "phone")
	send(t, a, def, "/status")
	a.Expect("message", systemSays(t, "Model: hermes-agent (provider hermes)"))
	send(t, a, def, "/model")
	pk := a.Expect("picker.model", nil)
	p := testgw.P(t, pk)
	provs, _ := p["providers"].([]any)
	if len(provs) != 1 || p["current_provider"] != "hermes" || p["current_model"] != "hermes-agent" {
		t.Fatalf("model picker %s", pk.Raw)
	}
	if pr, _ := provs[0].(map[string]any); pr["id"] != "hermes" || !strings.Contains(fmt.Sprint(pr["label"]), "Hermes Agent at 127.0.0.1:") {
		t.Fatalf("provider %v", provs[0])
	}
	if n := len(fake.RunBodies()); n != 0 {
		t.Fatalf("slash commands reached Hermes: %d runs", n)
	}
}
