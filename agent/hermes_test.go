package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/fakehermes"
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

// An API server without the steer route (the legacy one) gets the note
// with the next message.
func TestHermesSteerWaitsForTheNextRunOnOlderHermes(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: true})
	hold := make(chan struct{})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Working"), fakehermes.Hold(hold), fakehermes.Completed("Working.", 1, 1)}})
	h := newHermes(t, fake.URL)
	steer := make(chan Steer, 1)
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "go", Steer: steer}, rec)
	rec.waitFor(t, "the first delta", func(e Event) bool { return e.Kind == Text })
	steer <- Steer{Text: "focus on errors", MessageID: "m_steer"}
	rec.waitFor(t, "the steer commentary", commentary("next message"))
	close(hold)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	var steers []Msg
	for _, m := range rec.msgs {
		if m.Role == hermesSteerRole {
			steers = append(steers, m)
		}
	}
	if len(steers) != 1 || steers[0].Content != "focus on errors" || steers[0].MessageID != "m_steer" {
		t.Fatalf("steers recorded %+v", rec.msgs)
	}
	if st := readLaneState(rec.msgs, 1000); len(st.steers) != 1 {
		t.Fatalf("the note is not pending for the next run: %+v", st)
	}
}

type fixedAsker struct {
	mu      sync.Mutex
	answer  string
	asked   []string
	descs   []string
	waitFor chan struct{} // when set, Approve waits on it or ctx
}

func (a *fixedAsker) Approve(ctx context.Context, command, description string) (string, error) {
	a.mu.Lock()
	a.asked = append(a.asked, command)
	a.descs = append(a.descs, description)
	a.mu.Unlock()
	if a.waitFor != nil {
		select {
		case <-a.waitFor:
		case <-ctx.Done():
			return "deny", ctx.Err()
		}
	}
	return a.answer, nil
}

func (a *fixedAsker) Clarify(context.Context, string, []string) (string, error) { return "", nil }

func TestHermesRelaysApprovals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		asker Asker
		yolo  bool
		want  string
	}{
		{"session", &fixedAsker{answer: "session"}, false, "session"},
		{"deny", &fixedAsker{answer: "deny"}, false, "deny"},
		{"no asker", nil, false, "deny"},
		{"yolo", &fixedAsker{answer: "deny"}, true, "once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
				fakehermes.Delta("Cleaning up."),
				fakehermes.ToolStarted("terminal", "rm -rf build"),
				fakehermes.Approval("rm -rf build", "recursive delete"),
				fakehermes.ToolCompleted("terminal", 1, false),
				fakehermes.Completed("Done.", 1, 1),
			}})
			h := newHermes(t, fake.URL)
			rec := newHrec()
			err := result(t, runTurn(context.Background(), h, Turn{Input: "clean", Asker: tc.asker, Settings: Settings{Yolo: tc.yolo}}, rec))
			if err != nil {
				t.Fatal(err)
			}
			if got := fake.Runs()[0].Approvals; len(got) != 1 || got[0] != tc.want {
				t.Fatalf("Hermes got %v, want %s", got, tc.want)
			}
			if a, ok := tc.asker.(*fixedAsker); ok {
				wantAsked := 1
				if tc.yolo {
					wantAsked = 0
				}
				if len(a.asked) != wantAsked || wantAsked == 1 && (a.asked[0] != "rm -rf build" || a.descs[0] != "recursive delete") {
					t.Fatalf("asked %v %v", a.asked, a.descs)
				}
			}
			if rec.text(Text) != "Cleaning up.Done." {
				t.Fatalf("text %q", rec.text(Text))
			}
		})
	}
}

func TestHermesStopStopsTheRun(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	hold := make(chan struct{})
	defer close(hold)
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.ToolStarted("web_search", "go 1.26"), fakehermes.Delta("Thinking about it"), fakehermes.Hold(hold)}})
	h := newHermes(t, fake.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newHrec()
	done := runTurn(ctx, h, Turn{Input: "search"}, rec)
	rec.waitFor(t, "the tool start", func(e Event) bool { return e.Kind == ToolStart && e.Tool.Emoji == "🔎" })
	rec.waitFor(t, "the text", func(e Event) bool { return e.Kind == Text })
	cancel()
	if err := result(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	run := fake.Runs()[0]
	if !run.StopRequested || run.Status != "cancelled" {
		t.Fatalf("run %+v was not stopped", run)
	}
	if ends := rec.of(ToolEnd); len(ends) != 1 || ends[0].Tool.OK {
		t.Fatalf("the running tool was not ended: %+v", ends)
	}
	if last := rec.msgs[len(rec.msgs)-1]; last.Role != "assistant" || last.Content != "Thinking about it" {
		t.Fatalf("the partial reply was not kept: %+v", rec.msgs)
	}
}

func TestHermesDroppedStreamIsFollowedByPolling(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	const full = "The first half, and the second half."
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Delta("The first "), fakehermes.Delta("half, "),
		fakehermes.ToolStarted("read_file", "notes.md"),
		fakehermes.Disconnect(),
		fakehermes.AwaitPolls(2), // the bridge follows the run by polling meanwhile
		fakehermes.Delta("and the second half."),
		fakehermes.Completed(full, 50, 9),
	}})
	h := newHermes(t, fake.URL)
	rec := newHrec()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "go"}, rec)); err != nil {
		t.Fatal(err)
	}
	if got := rec.text(Text); got != "The first half, "+full {
		t.Errorf("text = %q", got)
	}
	var lost bool
	for _, e := range rec.events() {
		lost = lost || commentary("broke off")(e)
	}
	if !lost {
		t.Error("the person was not told the live stream broke off")
	}
	if ends := rec.of(ToolEnd); len(ends) != 1 || ends[0].Tool.Name != "read_file" {
		t.Errorf("the tool in flight was not ended: %+v", ends)
	}
	if last := rec.msgs[len(rec.msgs)-1]; last.Content != full {
		t.Errorf("recorded %+v", rec.msgs)
	}
	if run := fake.Runs()[0]; run.Polls < 2 || run.Stream != "gone" {
		t.Errorf("run %+v", run)
	}
}

func TestHermesSilentStreamIsTakenForDead(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey}) // keepalives only after 30 s
	hold := make(chan struct{})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Hm"), fakehermes.Hold(hold), fakehermes.Completed("Hm, yes.", 1, 1)}})
	h := newHermes(t, fake.URL, func(c *HermesConfig) { c.StallTimeout = 100 * time.Millisecond })
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "go"}, rec)
	waitRuns(t, fake, "a status poll", func(rs []fakehermes.Run) bool { return len(rs) == 1 && rs[0].Polls > 0 })
	close(hold)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if rec.text(Text) != "Hm, yes." {
		t.Fatalf("text %q", rec.text(Text))
	}
}

func TestHermesKeepalivesKeepTheStream(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, KeepaliveEvery: 10 * time.Millisecond})
	hold := make(chan struct{})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Hm"), fakehermes.Hold(hold), fakehermes.Completed("Hm, yes.", 1, 1)}})
	h := newHermes(t, fake.URL, func(c *HermesConfig) { c.StallTimeout = 400 * time.Millisecond })
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "go"}, rec)
	rec.waitFor(t, "the first delta", func(e Event) bool { return e.Kind == Text })
	// Quiet for several stall timeouts, but for the keepalives.
	time.AfterFunc(1200*time.Millisecond, func() { close(hold) })
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if run := fake.Runs()[0]; run.Polls != 0 {
		t.Fatalf("the bridge gave up on a stream that sent keepalives (%d polls)", run.Polls)
	}
	if rec.text(Text) != "Hm, yes." {
		t.Fatalf("text %q", rec.text(Text))
	}
}

// The legacy status does not say what an approval waits for: one asked
// while the stream was down is denied unseen.
func TestHermesApprovalLostWithTheStreamIsDenied(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: true})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Delta("Let me"), fakehermes.Disconnect(),
		fakehermes.Approval("rm -rf /tmp/x", "recursive delete"),
		fakehermes.Completed("I could not delete it.", 1, 1),
	}})
	asker := &fixedAsker{answer: "once"}
	h := newHermes(t, fake.URL)
	rec := newHrec()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "go", Asker: asker}, rec)); err != nil {
		t.Fatal(err)
	}
	if got := fake.Runs()[0].Approvals; len(got) != 1 || got[0] != "deny" {
		t.Fatalf("approvals %v", got)
	}
	if len(asker.asked) != 0 {
		t.Fatal("the person was asked about a command nobody knows")
	}
	var told bool
	for _, e := range rec.events() {
		told = told || commentary("denied")(e)
	}
	if !told {
		t.Fatal("the person was not told")
	}
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

func TestHermesFailures(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, fake *fakehermes.Server) (url string, edit func(*HermesConfig))
		want  []string
		check func(t *testing.T, fake *fakehermes.Server)
	}{
		{"unreachable", func(*testing.T, *fakehermes.Server) (string, func(*HermesConfig)) { return deadURL, nil },
			[]string{"cannot reach Hermes at " + deadURL, "connection refused", "API_SERVER_ENABLED=true"}, nil},
		{"wrong key", func(*testing.T, *fakehermes.Server) (string, func(*HermesConfig)) {
			return "", func(c *HermesConfig) { c.Key = "wrong" }
		}, []string{"refused irisgate's API key", "HTTP 401: Invalid API key", "--hermes-key"}, func(t *testing.T, fake *fakehermes.Server) {
			if n := len(fake.Requests()); n != 1 {
				t.Errorf("%d requests: a 401 is not retried", n)
			}
		}},
		{"ten runs already", func(t *testing.T, fake *fakehermes.Server) (string, func(*HermesConfig)) {
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) })
			for i := 0; i < 10; i++ {
				fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Hold(hold)}})
				req, _ := http.NewRequest(http.MethodPost, fake.URL+"/v1/runs", strings.NewReader(`{"input":"busy"}`))
				req.Header.Set("Authorization", "Bearer "+hermesKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("occupying run %d: HTTP %d", i, resp.StatusCode)
				}
			}
			http.DefaultClient.CloseIdleConnections()
			return "", nil
		}, []string{"Hermes is busy", "HTTP 429: Too many concurrent runs (max 10)"}, func(t *testing.T, fake *fakehermes.Server) {
			n := 0
			for _, r := range fake.Requests() {
				if r.Auth == "Bearer "+hermesKey && r.Body["input"] == "x" {
					n++
				}
			}
			if n != 3 {
				t.Errorf("%d attempts, want 3 (two retries)", n)
			}
		}},
		{"run failed", func(t *testing.T, fake *fakehermes.Server) (string, func(*HermesConfig)) {
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Trying"), fakehermes.Failed("provider returned 500")}})
			return "", nil
		}, []string{"Hermes could not finish the run: provider returned 500"}, nil},
		{"over its time", func(t *testing.T, fake *fakehermes.Server) (string, func(*HermesConfig)) {
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) })
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Long job"), fakehermes.Hold(hold)}})
			return "", func(c *HermesConfig) { c.Timeout = 300 * time.Millisecond }
		}, []string{"did not finish within 300ms", "--hermes-timeout"}, func(t *testing.T, fake *fakehermes.Server) {
			if r := fake.Runs()[0]; !r.StopRequested || r.Status != "cancelled" {
				t.Errorf("the run over its time was not stopped: %+v", r)
			}
		}},
		{"cancelled elsewhere", func(t *testing.T, fake *fakehermes.Server) (string, func(*HermesConfig)) {
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) })
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Working"), fakehermes.Hold(hold)}})
			go func() {
				if !fake.Wait(hermesWait, func(rs []fakehermes.Run) bool { return len(rs) == 1 && rs[0].Stream == "open" }) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, fake.URL+"/v1/runs/"+fake.Runs()[0].ID+"/stop", nil)
				req.Header.Set("Authorization", "Bearer "+hermesKey)
				req.Close = true
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			return "", nil
		}, []string{"Hermes cancelled the run"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
			url, edit := tc.setup(t, fake)
			if url == "" {
				url = fake.URL
			}
			var edits []func(*HermesConfig)
			if edit != nil {
				edits = append(edits, edit)
			}
			h := newHermes(t, url, edits...)
			rec := newHrec()
			err := result(t, runTurn(context.Background(), h, Turn{Input: "x"}, rec))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.check != nil {
				tc.check(t, fake)
			}
		})
	}
}

func TestHermesRecoversWhenItComesBack(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	h := newHermes(t, fake.URL, func(c *HermesConfig) { c.MaxRetries = -1 })
	rec := newHrec()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "x"}, rec)); err != nil {
		t.Fatal(err)
	}
	fake.Down()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "x"}, rec)); err == nil || !strings.Contains(err.Error(), "cannot reach Hermes") {
		t.Fatalf("err = %v", err)
	}
	fake.Up(t)
	fake.Push(fakehermes.Reply("Back again.", 2))
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "x"}, rec)); err != nil {
		t.Fatal(err)
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

// stubBackend is a backend with one provider that records its turns.
type stubBackend struct {
	id  string
	ran []string
}

func (s *stubBackend) Name() string { return s.id + "-model" }
func (s *stubBackend) Providers() []Provider {
	return []Provider{{ID: s.id, Models: []ModelInfo{{ID: s.id + "-model"}}}}
}
func (s *stubBackend) Resolve(Settings) (Provider, ModelInfo) {
	return s.Providers()[0], s.Providers()[0].Models[0]
}
func (s *stubBackend) Run(_ context.Context, t Turn, _ func(Event)) error {
	s.ran = append(s.ran, t.Input)
	return nil
}

func TestSwitchRoutesLanesByProvider(t *testing.T) {
	a, b := &stubBackend{id: "hermes"}, &stubBackend{id: "openai"}
	s, err := NewSwitch(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "hermes-model" || len(s.Providers()) != 2 || s.Providers()[1].ID != "openai" {
		t.Fatalf("switch %s %+v", s.Name(), s.Providers())
	}
	for _, tc := range []struct{ provider, want string }{{"", "hermes"}, {"openai", "openai"}, {"hermes", "hermes"}, {"gone", "hermes"}} {
		s.Run(context.Background(), Turn{Input: tc.provider, Settings: Settings{Provider: tc.provider}}, nil)
		if p, _ := s.Resolve(Settings{Provider: tc.provider}); p.ID != tc.want {
			t.Errorf("provider %q resolves to %s", tc.provider, p.ID)
		}
	}
	if fmt.Sprint(a.ran) != "[ hermes gone]" || fmt.Sprint(b.ran) != "[openai]" {
		t.Fatalf("ran a=%q b=%q", a.ran, b.ran)
	}
}
