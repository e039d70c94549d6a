package server_test

// End-to-end tests of the agent runtime: a real gateway whose agent is the
// OpenAI-compatible model backend (agent.NewModel) talking over HTTP to a
// fake Chat Completions server (internal/fakeopenai) that streams real SSE
// chunks, and real WebSocket devices whose every frame is checked against
// the specification's schema.

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// agModel is the default model of the test gateways: the vendor prefix
// is dropped in runtime.model.
const agModel = "vendor/fake-model"

const agPrompt = "You are the test agent."

// rig is a gateway whose agent is the model backend pointed at a fake
// OpenAI-compatible server.
type agRig struct {
	t    *testing.T
	fake *fakeopenai.Server
	work string // the tools' working directory
	dir  string // the gateway's data directory
	g    *testgw.GW
	opts []agOpt
}

// agOpt edits the model backend's or the gateway's configuration (the
// other pointer is nil).
type agOpt func(*agent.ModelConfig, *server.AppConfig)

func agWithModel(f func(*agent.ModelConfig)) agOpt {
	return func(m *agent.ModelConfig, _ *server.AppConfig) {
		if m != nil {
			f(m)
		}
	}
}

func agWithApp(f func(*server.AppConfig)) agOpt {
	return func(_ *agent.ModelConfig, a *server.AppConfig) {
		if a != nil {
			f(a)
		}
	}
}

func agStart(t *testing.T, opts ...agOpt) *agRig {
	t.Helper()
	r := &agRig{t: t, fake: fakeopenai.New(t), work: t.TempDir(), dir: t.TempDir(), opts: opts}
	r.start()
	return r
}

// start runs a gateway on the rig's data directory with a fresh model
// backend (as a restarted process would have).
func (r *agRig) start() {
	r.t.Helper()
	tools := &agent.Tools{Sandbox: agSandbox(r.t, r.work, r.dir), Policy: &agent.Policy{Rules: agent.DefaultRules()}, Timeout: time.Minute, ProgressEvery: 50 * time.Millisecond}
	tools.List = agent.Builtin(tools)
	mc := agent.ModelConfig{
		Providers: []agent.Provider{
			{ID: "fake", Label: "Fake AI", BaseURL: r.fake.URL, APIKey: "sk-test", Models: []agent.ModelInfo{
				{ID: agModel, Label: "Fake Model", ContextLength: 1000, PriceIn: 2, PriceOut: 8},
				{ID: "vendor/other-model", Label: "Other", ContextLength: 1000},
			}},
			{ID: "second", Label: "Second AI", BaseURL: r.fake.URL, Models: []agent.ModelInfo{{ID: "big-model", ContextLength: 1000}}},
		},
		Tools: tools, SystemPrompt: agPrompt, MaxIterations: 8, MaxRetries: 3,
	}
	for _, o := range r.opts {
		o(&mc, nil)
	}
	m, err := agent.NewModel(mc)
	if err != nil {
		r.t.Fatal(err)
	}
	r.g = testgw.StartIn(r.t, r.dir, func(c *server.AppConfig) {
		c.Agent, c.Workdir = m, r.work
		for _, o := range r.opts {
			o(nil, c)
		}
	})
}

// restart stops the gateway gracefully and starts it again on the same
// data directory.
func (r *agRig) restart() {
	r.t.Helper()
	r.g.Close()
	r.start()
}

func (r *agRig) dial(id string) *testgw.Device {
	r.t.Helper()
	d := r.g.Dial(r.t, id)
	d.Expect("status", nil)
	return d
}

// requests waits until the fake has had n requests and returns them.
func (r *agRig) requests(n int) []map[string]any {
	r.t.Helper()
	reqs, ok := r.fake.WaitRequests(n, testgw.Wait)
	if !ok {
		r.t.Fatalf("the model got %d requests within %v, want %d", len(reqs), testgw.Wait, n)
	}
	return reqs
}

// noMoreRequests asserts the fake got exactly n requests (call it after a
// barrier: every model call of a finished turn has been made).
func (r *agRig) noMoreRequests(n int) {
	r.t.Helper()
	if got := len(r.fake.Requests()); got != n {
		r.t.Fatalf("the model got %d requests, want %d", got, n)
	}
}

// script queues responses of the fake.
func (r *agRig) script(s ...fakeopenai.Script) { r.fake.Push(s...) }

// reply queues a plain text reply.
func (r *agRig) reply(text string) { r.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text(text, 3)}) }

// turn sends text in lane and returns the frames d gets up to the turn's
// agent.idle.
func agTurn(t *testing.T, d *testgw.Device, lane client.Lane, text string) []client.Frame {
	t.Helper()
	send(t, d, lane, text)
	return until(t, d, is(t, "agent.idle"))
}

// only returns the frames of one type.
func agOnly(fs []client.Frame, typ string) []client.Frame {
	var out []client.Frame
	for _, f := range fs {
		if f.Type == typ {
			out = append(out, f)
		}
	}
	return out
}

// one returns the single frame of type typ among fs.
func agOne(t *testing.T, fs []client.Frame, typ string) client.Frame {
	t.Helper()
	got := agOnly(fs, typ)
	if len(got) != 1 {
		t.Fatalf("%d %s frames, want 1 (frames: %s)", len(got), typ, typesOf(fs))
	}
	return got[0]
}

// agSystemTexts returns the texts of the system messages among fs.
func agSystemTexts(t *testing.T, fs []client.Frame) []string {
	t.Helper()
	var out []string
	for _, f := range agOnly(fs, "message") {
		if testgw.Str(t, f, "role") == "system" {
			out = append(out, testgw.Str(t, f, "text"))
		}
	}
	return out
}

// agHasSystem asserts a system message containing substr is among fs.
func agHasSystem(t *testing.T, fs []client.Frame, substr string) string {
	t.Helper()
	for _, s := range agSystemTexts(t, fs) {
		if strings.Contains(s, substr) {
			return s
		}
	}
	t.Fatalf("no system message containing %q (got %q)", substr, agSystemTexts(t, fs))
	return ""
}

// agSystemReply waits for the system message a slash command posts and
// returns its text.
func agSystemReply(t *testing.T, d *testgw.Device, substr string) string {
	t.Helper()
	f := d.Expect("message", func(f client.Frame) bool {
		return testgw.Str(t, f, "role") == "system" && strings.Contains(testgw.Str(t, f, "text"), substr)
	})
	return testgw.Str(t, f, "text")
}

type agStopMsg struct {
	MessageID string `json:"message_id"`
	FinalText string `json:"final_text"`
	Reasoning string `json:"reasoning"`
	Model     string `json:"model"`
	Tokens    int    `json:"tokens"`
	Runtime   *struct {
		Model      string   `json:"model"`
		ContextPct *int     `json:"context_pct"`
		Cwd        string   `json:"cwd"`
		Latency    *float64 `json:"latency"`
		Cost       *float64 `json:"cost"`
	} `json:"runtime"`
}

func agStop(t *testing.T, fs []client.Frame) agStopMsg {
	t.Helper()
	var s agStopMsg
	if err := agOne(t, fs, "message.stop").Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.Runtime == nil {
		t.Fatalf("message.stop without runtime")
	}
	return s
}

type agToolFrame struct {
	Index    int            `json:"index"`
	Name     string         `json:"name"`
	Preview  string         `json:"preview"`
	Args     map[string]any `json:"args"`
	Emoji    string         `json:"emoji"`
	Note     string         `json:"note"`
	OK       *bool          `json:"ok"`
	Duration *float64       `json:"duration"`
	Output   string         `json:"output_preview"`
}

func agTool(t *testing.T, f client.Frame) agToolFrame {
	t.Helper()
	var tf agToolFrame
	if err := f.Decode(&tf); err != nil {
		t.Fatal(err)
	}
	return tf
}

// agMsgs returns a request's messages.
func agMsgs(t *testing.T, req map[string]any) []map[string]any {
	t.Helper()
	raw, _ := req["messages"].([]any)
	out := make([]map[string]any, len(raw))
	for i, m := range raw {
		out[i], _ = m.(map[string]any)
	}
	return out
}

// roles lists a request's message roles, comma-separated.
func agRoles(t *testing.T, req map[string]any) string {
	t.Helper()
	var rs []string
	for _, m := range agMsgs(t, req) {
		rs = append(rs, fmt.Sprint(m["role"]))
	}
	return strings.Join(rs, ",")
}

// said reports whether a message of role (any: "") in req contains substr.
func agSaid(t *testing.T, req map[string]any, role, substr string) bool {
	t.Helper()
	for _, m := range agMsgs(t, req) {
		if (role == "" || m["role"] == role) && strings.Contains(fmt.Sprint(m["content"]), substr) {
			return true
		}
	}
	return false
}

func agLast(t *testing.T, req map[string]any) map[string]any {
	t.Helper()
	ms := agMsgs(t, req)
	if len(ms) == 0 {
		t.Fatalf("request without messages: %v", req)
	}
	return ms[len(ms)-1]
}

// TestModelStreamsAReply: text deltas become message.update frames with
// the whole text so far, the final message.stop carries the reply, its
// reasoning, the model, the tokens and the runtime footer, and the request
// the model got is a proper streaming Chat Completions request.
func TestModelStreamsAReply(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	work := filepath.Join(home, "proj")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	r := agStart(t, agWithApp(func(c *server.AppConfig) { c.Workdir = work }))
	const answer = "Hello from the model, streamed in many small pieces."
	chunks := fakeopenai.Reasoning("reasoning_content", "The person greets me; ", 3)
	chunks = append(chunks, fakeopenai.Reasoning("reasoning", "I greet back.", 2)...)
	chunks = append(chunks, fakeopenai.WithUsage(fakeopenai.Text(answer, 9), 250, 40)...)
	r.script(fakeopenai.Script{Chunks: chunks})
	a := r.dial("phone")
	b := r.dial("tablet")

	send(t, a, def, "hi there")
	for _, d := range []*testgw.Device{a, b} {
		got := until(t, d, is(t, "agent.idle"))
		start := agOne(t, got, "message.start")
		id := testgw.Str(t, start, "message_id")
		ups := agOnly(got, "message.update")
		if len(ups) == 0 {
			t.Fatalf("%s: no message.update", d.ID)
		}
		last := ""
		for _, u := range ups {
			txt := testgw.Str(t, u, "text")
			if testgw.Str(t, u, "message_id") != id || !strings.HasPrefix(answer, txt) || len(txt) < len(last) {
				t.Fatalf("%s: update %q after %q is not the text so far", d.ID, txt, last)
			}
			last = txt
		}
		if last != answer {
			t.Fatalf("%s: last update %q", d.ID, last)
		}
		s := agStop(t, got)
		if s.MessageID != id || s.FinalText != answer {
			t.Fatalf("%s: stop %+v", d.ID, s)
		}
		if s.Reasoning != "The person greets me; I greet back." {
			t.Errorf("%s: reasoning %q", d.ID, s.Reasoning)
		}
		if s.Model != agModel || s.Tokens != 40 {
			t.Errorf("%s: model %q tokens %d", d.ID, s.Model, s.Tokens)
		}
		rt := s.Runtime
		if rt.Model != "fake-model" {
			t.Errorf("%s: runtime.model %q, want the bare id", d.ID, rt.Model)
		}
		if rt.ContextPct == nil || *rt.ContextPct != 25 { // 250 prompt tokens of 1000
			t.Errorf("%s: context_pct %v", d.ID, rt.ContextPct)
		}
		if rt.Cwd != "~/proj" {
			t.Errorf("%s: cwd %q, want home-relative", d.ID, rt.Cwd)
		}
		if rt.Latency == nil || *rt.Latency <= 0 {
			t.Errorf("%s: latency %v", d.ID, rt.Latency)
		}
		want := 250*2/1e6 + 40*8/1e6
		if rt.Cost == nil || math.Abs(*rt.Cost-want) > 1e-12 {
			t.Errorf("%s: cost %v, want %v", d.ID, rt.Cost, want)
		}
	}

	req := r.requests(1)[0]
	if req["model"] != agModel || req["stream"] != true {
		t.Fatalf("request: model %v stream %v", req["model"], req["stream"])
	}
	if so, _ := req["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v: usage not asked for", req["stream_options"])
	}
	if got := agRoles(t, req); got != "system,user" {
		t.Fatalf("roles %s", got)
	}
	if m := agMsgs(t, req); m[0]["content"] != agPrompt || m[1]["content"] != "hi there" {
		t.Fatalf("messages %v", m)
	}
	var tools []string
	for _, x := range req["tools"].([]any) {
		tools = append(tools, fmt.Sprint(x.(map[string]any)["function"].(map[string]any)["name"]))
	}
	if strings.Join(tools, ",") != "terminal,read_file,write_file,todo,clarify,send_file,cronjob" {
		t.Errorf("tools offered: %v", tools)
	}
	if _, ok := req["reasoning_effort"]; ok {
		t.Errorf("reasoning_effort sent without a lane setting: %v", req["reasoning_effort"])
	}
	// The reply is history, with its model.
	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.Messages); n != 2 || h.Messages[1].Text != answer || h.Messages[1].Model != agModel {
		t.Fatalf("history %+v", h.Messages)
	}
}

// TestModelReasoningFollowsTheLane: reasoning deltas reach message.stop
// only while the lane's show-reasoning setting is on; /reasoning hide and
// show switch it for the lane, over the gateway's default.
func TestModelReasoningFollowsTheLane(t *testing.T) {
	r := agStart(t, agWithApp(func(c *server.AppConfig) { c.ShowReasoning = false }))
	a := r.dial("phone")
	thinking := func(text string) {
		chunks := append(fakeopenai.Reasoning("reasoning_content", "thinking hard", 2), fakeopenai.Text(text, 2)...)
		r.script(fakeopenai.Script{Chunks: chunks})
	}
	thinking("one")
	if s := agStop(t, agTurn(t, a, def, "q1")); s.Reasoning != "" || s.FinalText != "one" {
		t.Fatalf("reasoning shown though the gateway hides it: %+v", s)
	}
	send(t, a, def, "/reasoning show")
	agSystemReply(t, a, "shown: true")
	thinking("two")
	if s := agStop(t, agTurn(t, a, def, "q2")); s.Reasoning != "thinking hard" {
		t.Fatalf("reasoning %q after /reasoning show", s.Reasoning)
	}
	send(t, a, def, "/reasoning hide")
	agSystemReply(t, a, "shown: false")
	thinking("three")
	if s := agStop(t, agTurn(t, a, def, "q3")); s.Reasoning != "" {
		t.Fatalf("reasoning %q after /reasoning hide", s.Reasoning)
	}
	// Another lane keeps the gateway's default.
	ch := createChannel(t, a, "Other", "")
	thinking("four")
	if s := agStop(t, agTurn(t, a, client.Lane{ChatID: ch.ChatID}, "q4")); s.Reasoning != "" {
		t.Fatalf("the setting leaked into another lane: %+v", s)
	}
	r.requests(4)
}

// TestModelRetriesRateLimitsAndServerErrors: a 429 and then a 500 are
// retried; the person sees one clean reply.
func TestModelRetriesRateLimitsAndServerErrors(t *testing.T) {
	r := agStart(t)
	r.script(fakeopenai.Script{Status: 429}, fakeopenai.Script{Status: 500}, fakeopenai.Script{Chunks: fakeopenai.Text("worth the wait", 3)})
	a := r.dial("phone")
	got := agTurn(t, a, def, "hello")
	if s := agStop(t, got); s.FinalText != "worth the wait" {
		t.Fatalf("final %q", s.FinalText)
	}
	if s := agSystemTexts(t, got); len(s) != 0 {
		t.Fatalf("system messages %q", s)
	}
	r.noMoreRequests(3)
}

// TestModelCutStream: a stream cut halfway keeps the text that arrived
// (a stopped reply), says clearly what happened, and the lane goes on.
func TestModelCutStream(t *testing.T) {
	r := agStart(t)
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("this reply will be cut off right in the middle of it", 10), CutAfter: 5})
	a := r.dial("phone")
	got := agTurn(t, a, def, "tell me")
	s := agStop(t, got)
	if s.FinalText == "" || !strings.HasPrefix("this reply will be cut off right in the middle of it", s.FinalText) || len(s.FinalText) > 30 {
		t.Fatalf("partial text %q", s.FinalText)
	}
	agHasSystem(t, got, "broke off")
	if m, err := r.g.App.Store.Message(context.Background(), s.MessageID); err != nil || !m.Stopped {
		t.Fatalf("the partial reply is not kept as stopped: %+v %v", m, err)
	}
	// The lane works after, and the model sees what the person saw.
	r.reply("all good now")
	if s := agStop(t, agTurn(t, a, def, "again")); s.FinalText != "all good now" {
		t.Fatalf("next turn: %q", s.FinalText)
	}
	req := r.requests(2)[1]
	if got := agRoles(t, req); got != "system,user,assistant,user" {
		t.Fatalf("roles after a cut: %s", got)
	}
	if !agSaid(t, req, "assistant", "this reply") {
		t.Fatalf("the partial reply is not in the conversation")
	}
}

// TestModelIterationCap: a turn that keeps calling tools ends at the cap
// with a clear message.
func TestModelIterationCap(t *testing.T) {
	r := agStart(t, agWithModel(func(m *agent.ModelConfig) { m.MaxIterations = 3 }))
	for i := range 5 {
		r.script(fakeopenai.Script{Chunks: fakeopenai.ToolCall("", fmt.Sprint("c", i), "todo", `{"todos":[{"id":"a","content":"loop"}]}`, 3)})
	}
	a := r.dial("phone")
	got := agTurn(t, a, def, "loop forever")
	agHasSystem(t, got, "iteration cap")
	if n := len(agOnly(got, "tool.end")); n != 3 {
		t.Fatalf("%d tool rounds, want 3", n)
	}
	r.noMoreRequests(3)
	if r.fake.Pending() != 2 {
		t.Fatalf("scripts left: %d", r.fake.Pending())
	}
}

// TestModelConversationSurvivesRestart: the lane's conversation is in the
// store; after a restart the next request carries the earlier exchange.
func TestModelConversationSurvivesRestart(t *testing.T) {
	r := agStart(t)
	r.reply("Your name is Ada.")
	a := r.dial("phone")
	agTurn(t, a, def, "My name is Ada.")
	r.restart()
	b := r.dial("phone-again")
	r.reply("Ada, as you said.")
	if s := agStop(t, agTurn(t, b, def, "What is my name?")); s.FinalText != "Ada, as you said." {
		t.Fatalf("final %q", s.FinalText)
	}
	req := r.requests(2)[1]
	if got := agRoles(t, req); got != "system,user,assistant,user" {
		t.Fatalf("roles %s", got)
	}
	if !agSaid(t, req, "user", "My name is Ada.") || !agSaid(t, req, "assistant", "Your name is Ada.") {
		t.Fatalf("the earlier exchange is missing: %v", agMsgs(t, req))
	}
}

// TestModelStaysInsideTheContextWindow: a fake that refuses requests over
// the model's context length (as OpenAI does) never refuses one, however
// long the conversation grows: the oldest exchanges are dropped, and
// within one long turn the oldest tool outputs are cut short.
func TestModelStaysInsideTheContextWindow(t *testing.T) {
	r := agStart(t)
	r.fake.ContextLimit = 1000 // the model's context length in the rig
	a := r.dial("phone")
	const turns = 12
	for i := range turns {
		r.script(fakeopenai.Script{Chunks: fakeopenai.WithUsage(fakeopenai.Text(fmt.Sprintf("reply %d %s", i, strings.Repeat("r", 300)), 3), 900, 80)})
		got := agTurn(t, a, def, fmt.Sprintf("question %d %s", i, strings.Repeat("q", 900)))
		if s := agSystemTexts(t, got); len(s) != 0 {
			t.Fatalf("turn %d: %q", i, s)
		}
		if s := agStop(t, got); !strings.HasPrefix(s.FinalText, fmt.Sprintf("reply %d ", i)) || *s.Runtime.ContextPct != 90 {
			t.Fatalf("turn %d: %+v", i, s)
		}
	}
	reqs := r.requests(turns)
	last := reqs[turns-1]
	if agSaid(t, last, "user", "question 0 ") {
		t.Fatalf("the oldest exchange was kept in a full window")
	}
	if !agSaid(t, last, "user", fmt.Sprintf("question %d ", turns-1)) {
		t.Fatalf("the current question is missing")
	}
	// One turn whose tool outputs alone outgrow the window.
	big := `{"command":"head -c 2000 /dev/zero | tr '\\0' x"}`
	for i := range 4 {
		r.script(fakeopenai.Script{Chunks: fakeopenai.ToolCall("", fmt.Sprint("big", i), "terminal", big, 3)})
	}
	r.reply("done with the big outputs")
	got := agTurn(t, a, def, "make a lot of output")
	if s := agSystemTexts(t, got); len(s) != 0 {
		t.Fatalf("big turn: %q", s)
	}
	if s := agStop(t, got); s.FinalText != "done with the big outputs" {
		t.Fatalf("big turn: %q", s.FinalText)
	}
	reqs = r.requests(turns + 5)
	if !agSaid(t, reqs[len(reqs)-1], "tool", "cut to fit") {
		t.Fatalf("the oldest outputs were not cut")
	}
}

// TestModelStopsAHeldModelRequest: agent.stop cancels the model request
// at once; the text that had arrived is kept, marked stopped, and the
// stop's own id is on the turn's agent.idle.
func TestModelStopsAHeldModelRequest(t *testing.T) {
	r := agStart(t)
	hold := make(chan struct{})
	defer close(hold)
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("partial words and then the rest that never comes", 8), Hold: hold, HoldAfter: 4})
	a := r.dial("phone")
	send(t, a, def, "talk")
	// Three of the eight pieces come before the hold.
	const partial = "partial words and "
	a.Expect("message.update", func(f client.Frame) bool { return testgw.Str(t, f, "text") == partial })
	began := time.Now()
	stop := a.MustDo("agent.stop", def, nil)
	if stop.Type != "agent.idle" {
		t.Fatalf("agent.stop answered %s", stop.Raw)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("stopping took %v", d)
	}
	got := until(t, a, reply(stop.ID))
	s := agStop(t, got)
	if s.FinalText != partial {
		t.Fatalf("kept %q, want the partial %q", s.FinalText, partial)
	}
	if m, err := r.g.App.Store.Message(context.Background(), s.MessageID); err != nil || !m.Stopped {
		t.Fatalf("not marked stopped: %+v %v", m, err)
	}
	if s := agSystemTexts(t, got); len(s) != 0 {
		t.Fatalf("a stop is not a failure: %q", s)
	}
	r.reply("fresh")
	if s := agStop(t, agTurn(t, a, def, "go on")); s.FinalText != "fresh" {
		t.Fatalf("next turn %q", s.FinalText)
	}
}

// TestModelStopsARunningTool: agent.stop kills a running command at once
// (not after its 30 s); every call of the round gets a result, so the
// lane's next request is one the providers accept.
func TestModelStopsARunningTool(t *testing.T) {
	r := agStart(t)
	r.script(fakeopenai.Script{Chunks: fakeopenai.ToolCalls("Running both.", 4,
		fakeopenai.Call{ID: "c_sleep", Name: "terminal", Args: `{"command":"sleep 30"}`},
		fakeopenai.Call{ID: "c_echo", Name: "terminal", Args: `{"command":"echo never"}`})})
	a := r.dial("phone")
	send(t, a, def, "wait a while")
	a.Expect("tool.start", func(f client.Frame) bool { return agTool(t, f).Preview == "sleep 30" })
	began := time.Now()
	stop := a.MustDo("agent.stop", def, nil)
	got := until(t, a, reply(stop.ID))
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the stop waited for the command: %v", d)
	}
	end := agTool(t, agOne(t, got, "tool.end"))
	if end.Name != "terminal" || end.OK == nil || *end.OK {
		t.Fatalf("tool.end %+v", end)
	}
	if len(agOnly(got, "tool.start")) != 0 {
		t.Fatalf("the second call ran after the stop")
	}
	r.reply("ok")
	agTurn(t, a, def, "next")
	req := r.requests(2)[1]
	if got := agRoles(t, req); got != "system,user,assistant,tool,tool,user" {
		t.Fatalf("roles %s", got)
	}
	ms := agMsgs(t, req)
	if ms[3]["tool_call_id"] != "c_sleep" || ms[4]["tool_call_id"] != "c_echo" || !strings.Contains(fmt.Sprint(ms[4]["content"]), "not run") {
		t.Fatalf("tool results %v / %v", ms[3], ms[4])
	}
}

// TestModelSteer: agent.steer and /steer reach the running turn before its
// next model call.
func TestModelSteer(t *testing.T) {
	r := agStart(t)
	hold1, hold2 := make(chan struct{}), make(chan struct{})
	r.script(
		fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c1", "terminal", `{"command":"echo step"}`, 3), Hold: hold1},
		fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c2", "terminal", `{"command":"echo step two"}`, 3), Hold: hold2},
		fakeopenai.Script{Chunks: fakeopenai.Text("steered", 2)},
	)
	a := r.dial("phone")
	b := r.dial("tablet")
	send(t, a, def, "do the thing")
	r.requests(1) // the turn waits on its first model call
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "use the blue one"})
	if echo.Type != "message" || testgw.Str(t, echo, "text") != "use the blue one" || testgw.Str(t, echo, "role") != "user" {
		t.Fatalf("agent.steer answered %s", echo.Raw)
	}
	barrier(t, a) // requests are handled in turn: the steer is with the turn
	close(hold1)
	r.requests(2)
	send(t, b, def, "/steer and be quick")
	barrier(t, b)
	close(hold2)
	if s := agStop(t, until(t, a, is(t, "agent.idle"))); s.FinalText != "steered" {
		t.Fatalf("final %q", s.FinalText)
	}
	reqs := r.requests(3)
	if last := agLast(t, reqs[1]); last["role"] != "user" || !strings.Contains(fmt.Sprint(last["content"]), "use the blue one") {
		t.Fatalf("agent.steer not before the second call: %v", last)
	}
	if agSaid(t, reqs[0], "", "blue") || agSaid(t, reqs[1], "", "quick") {
		t.Fatal("a steer reached a call made before it was sent")
	}
	if last := agLast(t, reqs[2]); last["role"] != "user" || !strings.Contains(fmt.Sprint(last["content"]), "and be quick") {
		t.Fatalf("/steer not before the third call: %v", last)
	}
	r.noMoreRequests(3)
}

// TestModelNoModelSaysEcho: without a model the echo agent answers and
// /status and /model say so.
func TestModelNoModelSaysEcho(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	send(t, a, def, "/status")
	if s := agSystemReply(t, a, "Backend"); !strings.Contains(s, "echo") || !strings.Contains(s, "OPENAI_BASE_URL") {
		t.Fatalf("status %q", s)
	}
	send(t, a, def, "/model")
	agSystemReply(t, a, "no model is configured")
}
