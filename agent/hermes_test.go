package agent

// Tests of the Hermes bridge against the fake Hermes API server
// (internal/fakehermes, which copies Hermes Agent's run API and says from
// which version), by topic: here the helpers and how a run streams; its
// approvals, steers, failures and the backend switch in files of their
// own. "Item N" names the item of issue 14 a test holds the bridge to.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/fakehermes"
	"go.uber.org/goleak"
)

const hermesKey = "sk-hermes-test"

// hermesWait bounds every wait of these tests.
const hermesWait = 10 * time.Second

func newHermes(t *testing.T, url string, edit ...func(*HermesConfig)) *Hermes {
	t.Helper()
	cfg := HermesConfig{URL: url, Key: hermesKey, PollEvery: 5 * time.Millisecond, RetryBackoff: time.Millisecond, MaxRetries: 2}
	for _, e := range edit {
		e(&cfg)
	}
	h, err := NewHermes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// hrec records a run's events and conversation entries; seen signals
// every event.
type hrec struct {
	mu   sync.Mutex
	evs  []Event
	msgs []Msg
	seen chan struct{}
}

func newHrec() *hrec { return &hrec{seen: make(chan struct{}, 1024)} }

func (r *hrec) emit(e Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
	r.seen <- struct{}{}
}

func (r *hrec) record(m Msg) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *hrec) events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.evs...)
}

func (r *hrec) text(k EventKind) string {
	var b strings.Builder
	for _, e := range r.events() {
		if e.Kind == k {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

func (r *hrec) of(k EventKind) []Event {
	var out []Event
	for _, e := range r.events() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits until an event matching f was emitted.
func (r *hrec) waitFor(t *testing.T, what string, f func(Event) bool) {
	t.Helper()
	deadline := time.NewTimer(hermesWait)
	defer deadline.Stop()
	for {
		for _, e := range r.events() {
			if f(e) {
				return
			}
		}
		select {
		case <-r.seen:
		case <-deadline.C:
			t.Fatalf("no %s within %v", what, hermesWait)
		}
	}
}

func sameMsg(a, b Msg) bool {
	return a.Role == b.Role && a.Content == b.Content && a.MessageID == b.MessageID && a.ToolCallID == b.ToolCallID && len(a.ToolCalls) == len(b.ToolCalls)
}

func commentary(substr string) func(Event) bool {
	return func(e Event) bool { return e.Kind == Commentary && strings.Contains(e.Text, substr) }
}

// runTurn runs a turn in the background; the result arrives on the channel.
func runTurn(ctx context.Context, h *Hermes, turn Turn, rec *hrec) <-chan error {
	turn.Record = rec.record
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx, turn, rec.emit) }()
	return done
}

func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(hermesWait):
		t.Fatal("the turn did not end")
		return nil
	}
}

func waitRuns(t *testing.T, fake *fakehermes.Server, what string, cond func([]fakehermes.Run) bool) []fakehermes.Run {
	t.Helper()
	if !fake.Wait(hermesWait, cond) {
		t.Fatalf("fake Hermes: %s did not happen; runs %+v", what, fake.Runs())
	}
	return fake.Runs()
}

func TestHermesStreamsAReply(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Reasoning("The person wants a listing."),
		fakehermes.Split(fakehermes.Delta("Héllo — "), 9), // cut inside multi-byte characters
		fakehermes.Keepalive(),
		fakehermes.Delta("let me look."),
		fakehermes.ToolStarted("terminal", "ls -la"),
		fakehermes.Keepalive(),
		fakehermes.ToolCompleted("terminal", 0.25, false),
		fakehermes.ToolStarted("some_new_tool", nil),
		fakehermes.ToolCompleted("some_new_tool", 0.5, true),
		fakehermes.Reasoning("Now answer."),
		fakehermes.Split(fakehermes.Delta("Two files: a "), 4),
		fakehermes.Delta("and b."),
		fakehermes.Completed("Two files: a and b.", 120, 30),
	}})
	h := newHermes(t, fake.URL+"/v1/")
	rec := newHrec()
	err := result(t, runTurn(context.Background(), h, Turn{Input: "list it", InputID: "m_1"}, rec))
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.text(Reasoning); got != "The person wants a listing.\n\nNow answer." {
		t.Errorf("reasoning = %q", got)
	}
	if got := rec.text(Text); got != "Héllo — let me look.Two files: a and b." {
		t.Errorf("text = %q", got)
	}
	beats := rec.of(TextIsCommentary)
	if len(beats) != 1 || beats[0].Text != "Héllo — let me look." {
		t.Errorf("the text before the tools was not made commentary: %+v", beats)
	}
	starts, ends := rec.of(ToolStart), rec.of(ToolEnd)
	if len(starts) != 2 || len(ends) != 2 {
		t.Fatalf("%d tool starts, %d ends", len(starts), len(ends))
	}
	if s := starts[0].Tool; s.Name != "terminal" || s.Emoji != "💻" || s.Preview != "ls -la" || s.Index != 1 {
		t.Errorf("tool start %+v", s)
	}
	if e := ends[0].Tool; e.Index != 1 || !e.OK || e.Duration != 0.25 {
		t.Errorf("tool end %+v", e)
	}
	if s, e := starts[1].Tool, ends[1].Tool; s.Emoji != "" || s.Index != 2 || e.Index != 2 || e.OK {
		t.Errorf("unknown tool: start %+v end %+v", s, e)
	}
	var usage *Event
	for _, e := range rec.of(Usage) {
		usage = &e
	}
	if usage == nil || usage.Tokens != 30 || usage.Model != HermesModelID {
		t.Errorf("usage = %+v", usage)
	}
	runs := fake.Runs()
	if len(rec.msgs) != 3 || !sameMsg(rec.msgs[0], Msg{Role: "user", Content: "list it", MessageID: "m_1"}) ||
		!sameMsg(rec.msgs[1], Msg{Role: hermesSessionRole, Content: runs[0].ID, MessageID: "m_1"}) ||
		!sameMsg(rec.msgs[2], Msg{Role: "assistant", Content: "Two files: a and b."}) {
		t.Errorf("recorded %+v", rec.msgs)
	}
	body := fake.RunBodies()[0]
	if body["input"] != "list it" || body["session_id"] != nil || body["conversation_history"] != nil || body["instructions"] != nil {
		t.Errorf("run request %v", body)
	}
	for _, r := range fake.Requests() {
		if r.Auth != "Bearer "+hermesKey {
			t.Errorf("%s %s sent %q", r.Method, r.Path, r.Auth)
		}
		if r.Method == http.MethodGet && !strings.HasSuffix(r.Path, "/events") {
			t.Errorf("polled %s though the stream was fine", r.Path)
		}
	}
}

func TestHermesContinuesTheSession(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	h := newHermes(t, fake.URL, func(c *HermesConfig) { c.Instructions = "Be brief." })
	history := []Msg{
		{Role: "user", Content: "remember 7431"},
		{Role: hermesSessionRole, Content: "sess_old"},
		{Role: "assistant", Content: "OK"},
		{Role: "tool", Content: "ignored", ToolCallID: "c"},
		{Role: "assistant", Content: ""},
		{Role: "user", Content: "and 12"},
		{Role: hermesSessionRole, Content: "sess_lane"},
		{Role: "assistant", Content: "Noted."},
		{Role: hermesSteerRole, Content: "use words"},
		{Role: hermesSteerRole, Content: "be quick"},
	}
	rec := newHrec()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "what numbers?", History: history}, rec)); err != nil {
		t.Fatal(err)
	}
	body := fake.RunBodies()[0]
	if body["session_id"] != "sess_lane" || body["instructions"] != "Be brief." {
		t.Fatalf("run request %v", body)
	}
	input := fmt.Sprint(body["input"])
	if !strings.HasPrefix(input, "[Added while you were working on my previous message:] use words\n\n[Added while you were working on my previous message:] be quick\n\n") ||
		!strings.HasSuffix(input, "what numbers?") {
		t.Errorf("input %q does not carry the notes first", input)
	}
	conv := fmt.Sprint(body["conversation_history"])
	want := "[map[content:remember 7431 role:user] map[content:OK role:assistant] map[content:and 12 role:user] map[content:Noted. role:assistant]]"
	if conv != want {
		t.Errorf("conversation_history = %s", conv)
	}
	if !sameMsg(rec.msgs[1], Msg{Role: hermesSessionRole, Content: "sess_lane"}) || rec.msgs[0].Content != input {
		t.Errorf("recorded %+v", rec.msgs)
	}
	// The notes went with this run: the next starts without them.
	st := readLaneState(append(history, rec.msgs...), 1000)
	if len(st.steers) != 0 || st.session != "sess_lane" {
		t.Errorf("after the run: %+v", st)
	}
	// The budget keeps the newest exchanges, starting with the person.
	st = readLaneState(history, len("and 12")+len("Noted.")+3)
	if len(st.history) != 2 || st.history[0].Content != "and 12" {
		t.Errorf("trimmed history %+v", st.history)
	}
}

func TestHermesTakesTextOnly(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	h := newHermes(t, fake.URL)
	rec := newHrec()
	media := []core.Media{{Kind: "image", Filename: "photo.jpg"}, {Kind: "voice"}}
	if err := result(t, runTurn(context.Background(), h, Turn{Media: media}, rec)); err != nil {
		t.Fatal(err)
	}
	if in := fmt.Sprint(fake.RunBodies()[0]["input"]); !strings.Contains(in, "photo.jpg, voice") {
		t.Fatalf("input %q", in)
	}
	rec.waitFor(t, "word on the attachments", commentary("text only"))
}

func TestHermesOutputIsAuthoritative(t *testing.T) {
	for _, tc := range []struct {
		name, streamed, output, text string
		beat                         bool
	}{
		{"missing tail", "Hello", "Hello world", "Hello world", false},
		{"leading blank", "\n\nHello", "Hello world", "\n\nHello world", false},
		{"same", "Hello world ", "Hello world", "Hello world ", false},
		{"diverged", "Hello wrld", "Hello world!", "Hello wrldHello world!", true},
		{"no deltas", "", "Hello", "Hello", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
			var steps []fakehermes.Step
			if tc.streamed != "" {
				steps = append(steps, fakehermes.Delta(tc.streamed))
			}
			fake.Push(fakehermes.Script{Steps: append(steps, fakehermes.Completed(tc.output, 1, 1))})
			h := newHermes(t, fake.URL)
			rec := newHrec()
			if err := result(t, runTurn(context.Background(), h, Turn{Input: "x"}, rec)); err != nil {
				t.Fatal(err)
			}
			if got := rec.text(Text); got != tc.text {
				t.Errorf("text %q, want %q", got, tc.text)
			}
			if beat := len(rec.of(TextIsCommentary)) > 0; beat != tc.beat {
				t.Errorf("commentary beat %v", beat)
			}
			if last := rec.msgs[len(rec.msgs)-1]; last.Role != "assistant" || strings.TrimSpace(last.Content) != strings.TrimSpace(tc.output) {
				t.Errorf("recorded %+v", last)
			}
		})
	}
}

func TestReadSSE(t *testing.T) {
	stream := ": keepalive\r\n\r\n" +
		"data: {\"a\":1}\n\n" +
		"event: ignored\ndata:{\"b\":\ndata: 2}\n\n" +
		": stream closed\n\n" +
		"data: {\"cut\":true}\n" // no blank line: never dispatched
	items := make(chan sseItem)
	go readSSE(iotest.OneByteReader(strings.NewReader(stream)), items, make(chan struct{}))
	var got []string
	for it := range items {
		switch {
		case it.err != nil:
			got = append(got, "err:"+it.err.Error())
		case it.comment:
			got = append(got, "comment:"+it.data)
		default:
			got = append(got, "data:"+it.data)
		}
	}
	want := []string{"comment:keepalive", `data:{"a":1}`, "data:{\"b\":\n2}", "comment:stream closed", "err:EOF"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestHermesConfig(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8642":      "http://127.0.0.1:8642",
		"http://127.0.0.1:8642/":     "http://127.0.0.1:8642",
		"http://127.0.0.1:8642/v1":   "http://127.0.0.1:8642",
		" https://h.example/hermes/": "https://h.example/hermes",
	} {
		h, err := NewHermes(HermesConfig{URL: in})
		if err != nil || h.URL() != want {
			t.Errorf("%q → %q, %v; want %q", in, h.URL(), err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:8642", "ftp://x", "http://"} {
		if _, err := NewHermes(HermesConfig{URL: bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	h, _ := NewHermes(HermesConfig{URL: "http://127.0.0.1:8642"})
	p, m := h.Resolve(Settings{Provider: "hermes", Model: "whatever"})
	if p.ID != HermesProviderID || m.ID != HermesModelID || h.Name() != HermesModelID {
		t.Errorf("resolve %+v %+v", p, m)
	}
	if HermesToolEmoji("write_file") != "✍️" || HermesToolEmoji("browser_click") != "🌐" || HermesToolEmoji("frobnicate") != "" {
		t.Error("tool emoji")
	}
}

// noLeaks checks, once the test and its fakes are done, that no goroutine
// it started is left (the questions that wait in their own).
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, opt, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"))
	})
}

// Item 5: reasoning.available carries the message's content (at most 500
// characters): the reply is not shown a second time as reasoning, what
// else it holds is, marked when cut.
func TestHermesReasoningPreview(t *testing.T) {
	long := strings.Repeat("Weighing the options. ", 30)[:500]
	for _, tc := range []struct {
		name  string
		steps []fakehermes.Step
		want  string
	}{
		{"echo of the reply", []fakehermes.Step{fakehermes.Delta("The answer is 42."), fakehermes.Reasoning("The answer is 42."), fakehermes.Completed("The answer is 42.", 1, 1)}, ""},
		{"echo cut at 500", []fakehermes.Step{fakehermes.Delta(long + " And so on."), fakehermes.Reasoning(long), fakehermes.Completed(long+" And so on.", 1, 1)}, ""},
		{"inline thinking", []fakehermes.Step{fakehermes.Delta("Answer."), fakehermes.Reasoning("Let me think.Answer."), fakehermes.Completed("Answer.", 1, 1)}, "Let me think."},
		{"no deltas", []fakehermes.Step{fakehermes.Reasoning("Only the output."), fakehermes.Completed("Only the output.", 1, 1)}, ""},
		{"real preview", []fakehermes.Step{fakehermes.Reasoning(long), fakehermes.ToolStarted("terminal", "ls"), fakehermes.ToolCompleted("terminal", 1, false), fakehermes.Completed("Listed.", 1, 1)}, long + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
			fake.Push(fakehermes.Script{Steps: tc.steps})
			h := newHermes(t, fake.URL)
			rec := newHrec()
			if err := result(t, runTurn(context.Background(), h, Turn{Input: "x"}, rec)); err != nil {
				t.Fatal(err)
			}
			if got := rec.text(Reasoning); got != tc.want {
				t.Fatalf("reasoning %q, want %q", got, tc.want)
			}
		})
	}
}
