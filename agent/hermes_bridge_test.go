package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakehermes"
	"go.uber.org/goleak"
)

// noLeaks checks, once the test and its fakes are done, that no goroutine
// it started is left (the questions that wait in their own).
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, opt, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"))
	})
}

// These tests hold the bridge to Hermes Agent's real run API (the fake
// copies it; see internal/fakehermes), item by item of issue 14.

// deferAsker answers approvals through agent.DeferredAsker, as the gateway
// does: each question takes the next answer the test gives, or ends with
// its ctx (withdrawn).
type deferAsker struct {
	answers chan string
	mu      sync.Mutex
	asked   []ApprovalQuestion
	ended   []error  // per question: nil answered, else why it ended
	said    []string // what Done was told
	applied []bool
	seen    chan struct{}
}

func newDeferAsker() *deferAsker {
	return &deferAsker{answers: make(chan string, 8), seen: make(chan struct{}, 64)}
}

func (a *deferAsker) AskApproval(ctx context.Context, q ApprovalQuestion) (ApprovalAnswer, error) {
	a.mu.Lock()
	a.asked = append(a.asked, q)
	a.mu.Unlock()
	a.seen <- struct{}{}
	select {
	case v := <-a.answers:
		a.mu.Lock()
		a.ended = append(a.ended, nil)
		a.mu.Unlock()
		return ApprovalAnswer{Choice: v, By: "phone", Done: func(applied bool, text string) {
			a.mu.Lock()
			a.said = append(a.said, text)
			a.applied = append(a.applied, applied)
			a.mu.Unlock()
			a.seen <- struct{}{}
		}}, nil
	case <-ctx.Done():
		a.mu.Lock()
		a.ended = append(a.ended, ctx.Err())
		a.mu.Unlock()
		a.seen <- struct{}{}
		return ApprovalAnswer{}, ctx.Err()
	}
}

func (a *deferAsker) Approve(context.Context, string, string) (string, error) {
	return "", errors.New("the bridge must use AskApproval")
}
func (a *deferAsker) Clarify(context.Context, string, []string) (string, error) { return "", nil }

// waitAsk waits until cond holds of what was asked and said.
func (a *deferAsker) wait(t *testing.T, what string, cond func(a *deferAsker) bool) {
	t.Helper()
	deadline := time.After(hermesWait)
	for {
		a.mu.Lock()
		ok := cond(a)
		a.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-a.seen:
		case <-deadline:
			t.Fatalf("%s did not happen: asked %+v ended %v said %q", what, a.asked, a.ended, a.said)
		}
	}
}

// snap copies what was asked and said.
func (a *deferAsker) snap() (asked []ApprovalQuestion, ended []error, said []string, applied []bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append(asked, a.asked...), append(ended, a.ended...), append(said, a.said...), append(applied, a.applied...)
}

func approvalBodies(fake *fakehermes.Server) []map[string]any {
	var out []map[string]any
	for _, r := range fake.Requests() {
		if strings.HasSuffix(r.Path, "/approval") {
			out = append(out, r.Body)
		}
	}
	return out
}

// Item 1: the answer names the request Hermes asked about, and the chat
// says which command was approved and by whom.
func TestHermesApprovalNamesTheRequest(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.ToolStarted("terminal", "rm -rf build"),
		fakehermes.Approval("rm -rf build", "recursive delete"),
		fakehermes.ToolCompleted("terminal", 0.2, false),
		fakehermes.Completed("Done.", 1, 1),
	}})
	asker := newDeferAsker()
	asker.answers <- "once"
	h := newHermes(t, fake.URL)
	rec := newHrec()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "clean", Asker: asker}, rec)); err != nil {
		t.Fatal(err)
	}
	bodies := approvalBodies(fake)
	if len(bodies) != 1 || bodies[0]["choice"] != "once" || len(bodies[0]["request_id"].(string)) != 32 {
		t.Fatalf("approval requests %v", bodies)
	}
	if got := fake.Runs()[0].Approvals; len(got) != 1 || got[0] != "once" {
		t.Fatalf("Hermes took %v", got)
	}
	if _, _, said, applied := asker.snap(); len(said) != 1 || said[0] != "✅ Allowed once: `rm -rf build` (by phone)" || !applied[0] {
		t.Fatalf("said %q applied %v", said, applied)
	}
}

// Item 1: Hermes's own approval timeout denies the first command while
// the person still looks at it; the person's late "once" for it must not
// be applied (Hermes takes only its own denial, and the person is told it
// came too late), nor reach the second command the agent asks about next,
// on either generation of Hermes.
func TestHermesExpiredApprovalIsNeverAnswered(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "current", true: "legacy"}[legacy], func(t *testing.T) {
			noLeaks(t)
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: legacy})
			hold := make(chan struct{})
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
				fakehermes.ToolStarted("terminal", "rm -rf build"),
				fakehermes.ApprovalWithin("rm -rf build", "recursive delete", 100*time.Millisecond),
				fakehermes.Hold(hold),                           // timed out; the tool has not finished yet
				fakehermes.ToolCompleted("terminal", 0.1, true), // blocked
				fakehermes.ToolStarted("terminal", "sudo rm -rf /srv/data"),
				fakehermes.Approval("sudo rm -rf /srv/data", "delete as root"),
				fakehermes.ToolCompleted("terminal", 0.1, true),
				fakehermes.Completed("I could not clean up.", 1, 1),
			}})
			asker := newDeferAsker()
			h := newHermes(t, fake.URL)
			rec := newHrec()
			done := runTurn(context.Background(), h, Turn{Input: "clean", Asker: asker}, rec)
			asker.wait(t, "the first question", func(a *deferAsker) bool { return len(a.asked) == 1 })
			waitRuns(t, fake, "Hermes's own timeout", func(rs []fakehermes.Run) bool { return len(rs[0].Approvals) == 1 })
			// Nothing on the stream says so: the prompt is still open, and
			// the person answers it now.
			asker.answers <- "once"
			asker.wait(t, "word on the late answer", func(a *deferAsker) bool { return len(a.said) == 1 })
			if _, _, said, applied := asker.snap(); applied[0] || !strings.HasPrefix(said[0], "⏱ Too late for `rm -rf build`") {
				t.Fatalf("said %q applied %v", said, applied)
			}
			if got := fake.Runs()[0].Decided; len(got) != 1 || got[0] != "timeout rm -rf build" {
				t.Fatalf("Hermes decided %v", got)
			}
			close(hold)
			asker.wait(t, "the second question", func(a *deferAsker) bool { return len(a.asked) == 2 })
			if asked, _, _, _ := asker.snap(); asked[1].Command != "sudo rm -rf /srv/data" {
				t.Fatalf("second question %+v", asked[1])
			}
			asker.answers <- "deny"
			if err := result(t, done); err != nil {
				t.Fatal(err)
			}
			if got := fake.Runs()[0].Decided; len(got) != 2 || got[0] != "timeout rm -rf build" || got[1] != "deny sudo rm -rf /srv/data" {
				t.Fatalf("Hermes decided %v", got)
			}
			if _, _, said, _ := asker.snap(); len(said) != 2 || !strings.HasPrefix(said[1], "⛔ Denied: `sudo rm -rf /srv/data` (by phone)") {
				t.Fatalf("said %q", said)
			}
		})
	}
}

// Item 1: the person never answers the first question: it is withdrawn
// once Hermes moves on (the tool that asked finishes), and its picker
// closes.
func TestHermesUnansweredExpiredApprovalIsWithdrawn(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "current", true: "legacy"}[legacy], func(t *testing.T) {
			noLeaks(t)
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: legacy})
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
				fakehermes.ToolStarted("terminal", "rm -rf build"),
				fakehermes.ApprovalWithin("rm -rf build", "recursive delete", 100*time.Millisecond),
				fakehermes.ToolCompleted("terminal", 0.1, true), // blocked
				fakehermes.ToolStarted("terminal", "sudo rm -rf /srv/data"),
				fakehermes.Approval("sudo rm -rf /srv/data", "delete as root"),
				fakehermes.ToolCompleted("terminal", 0.1, true),
				fakehermes.Completed("I could not clean up.", 1, 1),
			}})
			asker := newDeferAsker()
			h := newHermes(t, fake.URL)
			rec := newHrec()
			done := runTurn(context.Background(), h, Turn{Input: "clean", Asker: asker}, rec)
			asker.wait(t, "the first question withdrawn", func(a *deferAsker) bool { return len(a.ended) >= 1 })
			if asked, ended, _, _ := asker.snap(); ended[0] == nil || asked[0].Command != "rm -rf build" {
				t.Fatalf("first question %+v ended %v", asked, ended)
			}
			asker.wait(t, "the second question", func(a *deferAsker) bool { return len(a.asked) == 2 })
			asker.answers <- "deny"
			if err := result(t, done); err != nil {
				t.Fatal(err)
			}
			if got := fake.Runs()[0].Approvals; len(got) != 2 || got[0] != "timeout" || got[1] != "deny" {
				t.Fatalf("Hermes took %v", got)
			}
			for _, b := range approvalBodies(fake) {
				if b["choice"] != "deny" {
					t.Fatalf("an approval that was not the person's: %v", b)
				}
			}
			rec.waitFor(t, "word on the withdrawn question", commentary("no longer waits for an answer about `rm -rf build`"))
		})
	}
}

// Item 1: on a Hermes without request ids, an answer that arrives after
// Hermes moved on (its status shows something newer) is not sent: its
// bare choice would resolve whatever Hermes waits for now.
func TestHermesBareAnswerOnlyWhileTheStatusStillWaits(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: true})
	hold := make(chan struct{})
	defer close(hold)
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.ToolStarted("terminal", "rm -rf build"),
		fakehermes.ApprovalWithin("rm -rf build", "recursive delete", 50*time.Millisecond),
		fakehermes.Hold(hold),
	}})
	h := newHermes(t, fake.URL)
	r := &hermesRun{h: h, emit: func(Event) {}, record: func(Msg) {}}
	waitFake := func(cond func([]fakehermes.Run) bool) { waitRuns(t, fake, "the run", cond) }
	id := startRaw(t, fake)
	r.id = id
	waitFake(func(rs []fakehermes.Run) bool { return rs[0].Status == "waiting_for_approval" })
	st, _ := h.status(context.Background(), id)
	a := &hermesApproval{command: "rm -rf build", asked: float64(time.Now().UnixNano())/1e9 - 10} // asked long before the status
	if r.stillWaiting(context.Background(), a) {
		t.Fatalf("a status stamped 10 s after the request taken for it: %+v", st)
	}
	a.asked = st.UpdatedAt
	if !r.stillWaiting(context.Background(), a) {
		t.Fatalf("the request's own status refused: %+v", st)
	}
}

// startRaw starts a run without following it.
func startRaw(t *testing.T, fake *fakehermes.Server) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fake.URL+"/v1/runs", strings.NewReader(`{"input":"x"}`))
	req.Header.Set("Authorization", "Bearer "+hermesKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		RunID string `json:"run_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.RunID
}

// Item 1: another Hermes client answers first; the picker is withdrawn.
func TestHermesApprovalAnsweredElsewhereIsWithdrawn(t *testing.T) {
	noLeaks(t)
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Approval("rm -rf build", "recursive delete"),
		fakehermes.Completed("Done.", 1, 1),
	}})
	asker := newDeferAsker()
	h := newHermes(t, fake.URL)
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "clean", Asker: asker}, rec)
	asker.wait(t, "the question", func(a *deferAsker) bool { return len(a.asked) == 1 })
	req, _ := http.NewRequest(http.MethodPost, fake.URL+"/v1/runs/"+fake.Runs()[0].ID+"/approval", strings.NewReader(`{"choice":"session"}`))
	req.Header.Set("Authorization", "Bearer "+hermesKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if _, ended, _, _ := asker.snap(); len(ended) != 1 || ended[0] == nil {
		t.Fatalf("the question was not withdrawn: %v", ended)
	}
	rec.waitFor(t, "word on it", commentary("answered from another Hermes client: session"))
}

// Item 2: the legacy sweeper dropped the run's controls while it
// streamed; Hermes answers the stop with 404 and the run goes on. The
// person is told so, not that it stopped.
func TestHermesStopThatHermesCannotDo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool
		break_ func(fake *fakehermes.Server, id string)
		want   string
	}{
		{"swept", true, func(f *fakehermes.Server, _ string) { f.Sweep() }, "answered 404"},
		{"another process", false, func(f *fakehermes.Server, id string) { f.Detach(id) }, "run_not_active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: tc.legacy})
			hold := make(chan struct{})
			defer close(hold)
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Working"), fakehermes.Hold(hold)}})
			h := newHermes(t, fake.URL, func(c *HermesConfig) { c.StopWait = 50 * time.Millisecond })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rec := newHrec()
			done := runTurn(ctx, h, Turn{Input: "long"}, rec)
			rec.waitFor(t, "the text", func(e Event) bool { return e.Kind == Text })
			tc.break_(fake, fake.Runs()[0].ID)
			cancel()
			if err := result(t, done); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v", err)
			}
			rec.waitFor(t, "the truth about the stop", commentary(tc.want))
			rec.waitFor(t, "the run's real state", commentary("still running there"))
			if r := fake.Runs()[0]; r.Status != "running" {
				t.Fatalf("run %+v", r)
			}
		})
	}
}

// Item 2: a stop Hermes takes is confirmed through the status and says
// nothing more.
func TestHermesStopIsConfirmed(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	hold := make(chan struct{})
	defer close(hold)
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Working"), fakehermes.Hold(hold)}})
	h := newHermes(t, fake.URL)
	ctx, cancel := context.WithCancel(context.Background())
	rec := newHrec()
	done := runTurn(ctx, h, Turn{Input: "long"}, rec)
	rec.waitFor(t, "the text", func(e Event) bool { return e.Kind == Text })
	cancel()
	if err := result(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if r := fake.Runs()[0]; r.Status != "cancelled" {
		t.Fatalf("run %+v", r)
	}
	for _, e := range rec.of(Commentary) {
		if strings.Contains(e.Text, "stop") {
			t.Fatalf("a stop that worked was remarked on: %q", e.Text)
		}
	}
	var statusAfterStop bool
	for _, r := range fake.Requests() {
		statusAfterStop = statusAfterStop || r.Method == http.MethodGet && strings.HasSuffix(r.Path, fake.Runs()[0].ID)
	}
	if !statusAfterStop {
		t.Fatal("the stop was not checked against the run's status")
	}
}

// Item 3: a steer goes to the run, which reads it at its next step.
func TestHermesSteerReachesTheRun(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Delta("Reading"), fakehermes.AwaitSteer(),
		fakehermes.ToolStarted("read_file", "app.log"), fakehermes.ToolCompleted("read_file", 0.1, false),
		fakehermes.Completed("Reading. Three errors.", 1, 1),
	}})
	h := newHermes(t, fake.URL)
	steer := make(chan Steer, 1)
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "read the logs", Steer: steer}, rec)
	rec.waitFor(t, "the first delta", func(e Event) bool { return e.Kind == Text })
	steer <- Steer{Text: "only errors", MessageID: "m_steer"}
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if r := fake.Runs()[0]; len(r.Delivered) != 1 || r.Delivered[0] != "only errors" || r.PendingSteer != "" {
		t.Fatalf("run %+v", r)
	}
	rec.waitFor(t, "word on the steer", commentary("Hermes got your note"))
	var took bool
	for _, m := range rec.msgs {
		took = took || m.Role == hermesSteeredRole && m.MessageID == "m_steer" && m.Content == "only errors"
		if m.Role == hermesSteerRole {
			t.Fatalf("a steer Hermes took is kept for the next run: %+v", rec.msgs)
		}
	}
	if !took {
		t.Fatalf("the steer was not recorded: %+v", rec.msgs)
	}
}

// Item 3: refused (waiting for an approval: 409 run_not_accepting_steer)
// or never read (pending_steer at the end), the note goes with the next
// message.
func TestHermesSteerRefusedOrUnreadGoesNext(t *testing.T) {
	noLeaks(t)
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Approval("rm -rf build", "delete"),
		fakehermes.Delta("Done"), fakehermes.AwaitSteer(),
		fakehermes.Completed("Done.", 1, 1),
	}})
	asker := newDeferAsker()
	h := newHermes(t, fake.URL)
	steer := make(chan Steer, 2)
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "go", Steer: steer, Asker: asker}, rec)
	asker.wait(t, "the question", func(a *deferAsker) bool { return len(a.asked) == 1 })
	steer <- Steer{Text: "be careful", MessageID: "m_1"}
	rec.waitFor(t, "the refusal", commentary("go in front of your next message"))
	asker.answers <- "once"
	rec.waitFor(t, "the delta", func(e Event) bool { return e.Kind == Text })
	steer <- Steer{Text: "and quick", MessageID: "m_2"}
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the unread steer", commentary("finished before it read your note"))
	st := readLaneState(rec.msgs, 10000)
	if len(st.steers) != 2 || st.steers[0] != "be careful" || st.steers[1] != "and quick" {
		t.Fatalf("notes for the next run %q (%+v)", st.steers, rec.msgs)
	}
}

// Item 4: a proxy answers 502 for a run Hermes did start; the retry
// carries the same Idempotency-Key and Hermes replays the run instead of
// running it (and its tools) twice.
func TestHermesRetriedStartRunsOnce(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Reply("Once.", 1))
	target, _ := url.Parse(fake.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var failed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/runs" && failed.CompareAndSwap(false, true) {
			// nginx's answer when the upstream's reply is lost after the
			// request went through: the run exists, the client sees 502.
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			http.Error(w, "<html><body><h1>502 Bad Gateway</h1></body></html>", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	h := newHermes(t, proxy.URL)
	rec := newHrec()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "do it once"}, rec)); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range fake.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/runs" {
			keys = append(keys, r.Idempotency)
		}
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("run requests carried keys %q", keys)
	}
	if n := len(fake.Runs()); n != 1 {
		t.Fatalf("Hermes made %d runs", n)
	}
	if rec.text(Text) != "Once." {
		t.Fatalf("text %q", rec.text(Text))
	}
}

// Item 5: Hermes restarts mid-run; its status then reads interrupted. The
// restart took the stream with it: the open tool's result was not seen.
func TestHermesInterruptedRun(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	hold := make(chan struct{})
	defer close(hold)
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Delta("Working"), fakehermes.ToolStarted("terminal", "make"), fakehermes.Hold(hold)}})
	h := newHermes(t, fake.URL)
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "build"}, rec)
	rec.waitFor(t, "the tool", func(e Event) bool { return e.Kind == ToolStart })
	fake.Restart(t)
	err := result(t, done)
	if err == nil || !strings.Contains(err.Error(), "Hermes restarted before this run finished") {
		t.Fatalf("err = %v", err)
	}
	if ends := rec.of(ToolEnd); len(ends) != 1 || !strings.HasPrefix(ends[0].Tool.Output, "result not seen") {
		t.Fatalf("tool ends %+v", ends[0].Tool)
	}
}

// Item 5: tools that ran while the stream was down are marked neither
// done nor failed, whatever became of the run: their result was not seen.
// While the stream is live, a tool open when the run fails or is stopped
// did not finish.
func TestHermesToolsEndedWhileTheStreamWasDown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lost   bool
		end    []fakehermes.Step
		stop   bool
		ok     bool
		output string
	}{
		{"completed", true, []fakehermes.Step{fakehermes.ToolCompleted("terminal", 2, false), fakehermes.Completed("Built.", 1, 1)}, false, true, "result not seen (the live stream from Hermes broke off while it ran)"},
		{"failed", true, []fakehermes.Step{fakehermes.ToolCompleted("terminal", 2, false), fakehermes.Failed("the model went away")}, false, true, "result not seen (the live stream from Hermes broke off while it ran)"},
		{"stopped", true, []fakehermes.Step{fakehermes.ToolCompleted("terminal", 2, false), fakehermes.Hold(make(chan struct{}))}, true, true, "result not seen (the live stream from Hermes broke off while it ran)"},
		{"completed, its end never reported", false, []fakehermes.Step{fakehermes.Completed("Built.", 1, 1)}, false, true, "result not seen (Hermes did not report its end)"},
		{"failed, stream live", false, []fakehermes.Step{fakehermes.Failed("the model went away")}, false, false, "the run failed"},
		{"stopped, stream live", false, []fakehermes.Step{fakehermes.Hold(make(chan struct{}))}, true, false, "stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
			steps := []fakehermes.Step{fakehermes.ToolStarted("terminal", "make")}
			if tc.lost {
				steps = append(steps, fakehermes.Disconnect(), fakehermes.AwaitPolls(1))
			}
			fake.Push(fakehermes.Script{Steps: append(steps, tc.end...)})
			h := newHermes(t, fake.URL, func(c *HermesConfig) { c.StopWait = 50 * time.Millisecond })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rec := newHrec()
			done := runTurn(ctx, h, Turn{Input: "build"}, rec)
			if tc.stop {
				if tc.lost {
					waitRuns(t, fake, "the tool's end", func(rs []fakehermes.Run) bool { return len(rs) > 0 && rs[0].Polls >= 1 })
				} else {
					rec.waitFor(t, "the tool", func(e Event) bool { return e.Kind == ToolStart })
				}
				cancel()
			}
			result(t, done)
			ends := rec.of(ToolEnd)
			if len(ends) != 1 || ends[0].Tool.OK != tc.ok || ends[0].Tool.Output != tc.output {
				t.Fatalf("tool ends %+v", ends)
			}
		})
	}
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

// Item 5: with the stream down, a newer Hermes says in its status what it
// waits for: the person is asked, not denied unseen.
func TestHermesApprovalAskedFromTheStatus(t *testing.T) {
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Delta("Let me"), fakehermes.Disconnect(),
		fakehermes.Approval("rm -rf /tmp/x", "recursive delete"),
		fakehermes.Completed("Deleted.", 1, 1),
	}})
	asker := newDeferAsker()
	asker.answers <- "once"
	h := newHermes(t, fake.URL)
	rec := newHrec()
	if err := result(t, runTurn(context.Background(), h, Turn{Input: "go", Asker: asker}, rec)); err != nil {
		t.Fatal(err)
	}
	if got := fake.Runs()[0].Approvals; len(got) != 1 || got[0] != "once" {
		t.Fatalf("approvals %v", got)
	}
	if asked, _, _, _ := asker.snap(); len(asked) != 1 || asked[0].Command != "rm -rf /tmp/x" {
		t.Fatalf("asked %+v", asked)
	}
}

// Item 1: with the stream down, the approval shown from the status is
// withdrawn once the status no longer waits (another client answered).
func TestHermesApprovalWithdrawnWhenTheStatusMovesOn(t *testing.T) {
	noLeaks(t)
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	hold := make(chan struct{})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.Delta("Let me"), fakehermes.Disconnect(),
		fakehermes.Approval("rm -rf /tmp/x", "recursive delete"),
		fakehermes.Hold(hold),
		fakehermes.Completed("Deleted.", 1, 1),
	}})
	asker := newDeferAsker()
	h := newHermes(t, fake.URL)
	rec := newHrec()
	done := runTurn(context.Background(), h, Turn{Input: "go", Asker: asker}, rec)
	asker.wait(t, "the question", func(a *deferAsker) bool { return len(a.asked) == 1 })
	req, _ := http.NewRequest(http.MethodPost, fake.URL+"/v1/runs/"+fake.Runs()[0].ID+"/approval", strings.NewReader(`{"choice":"deny"}`))
	req.Header.Set("Authorization", "Bearer "+hermesKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	asker.wait(t, "the question withdrawn", func(a *deferAsker) bool { return len(a.ended) == 1 && a.ended[0] != nil })
	rec.waitFor(t, "word on it", commentary("its status is now running"))
	close(hold)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if got := fake.Runs()[0].Approvals; len(got) != 1 || got[0] != "deny" {
		t.Fatalf("approvals %v", got)
	}
}
