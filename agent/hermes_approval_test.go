package agent

// The approvals Hermes asks for: relayed to the person, answered naming
// the request, withdrawn when Hermes moves on, never applied to a command
// the person did not see.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakehermes"
)

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
	// The status is not checked meanwhile: its "running" would withdraw
	// the question first, before the event says who answered.
	h := newHermes(t, fake.URL, func(c *HermesConfig) { c.PollEvery = time.Hour })
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

// Issue 14 item 1: the person's answer is on its way to Hermes when the
// run is stopped. The device that answered is told it was not applied
// (its picker.select gets its reply), not left without one.
func TestHermesAnswerCutOffByAStopIsToldSo(t *testing.T) {
	noLeaks(t)
	fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
	fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
		fakehermes.ToolStarted("terminal", "rm -rf build"),
		fakehermes.Approval("rm -rf build", "recursive delete"),
		fakehermes.Completed("Done.", 1, 1),
	}})
	target, _ := url.Parse(fake.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	posted := make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/approval") {
			io.Copy(io.Discard, r.Body) // read, so a client that gives up is noticed
			close(posted)               // a proxy that holds the answer until then
			<-r.Context().Done()
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	asker := newDeferAsker()
	asker.answers <- "once"
	h := newHermes(t, proxy.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runTurn(ctx, h, Turn{Input: "clean", Asker: asker}, newHrec())
	<-posted
	cancel()
	if err := result(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	asker.wait(t, "word on the answer", func(a *deferAsker) bool { return len(a.said) == 1 })
	if _, _, said, applied := asker.snap(); applied[0] || !strings.Contains(said[0], "the run was stopped before your answer reached Hermes") {
		t.Fatalf("said %q applied %v", said, applied)
	}
	if got := fake.Runs()[0].Approvals; len(got) != 0 {
		t.Fatalf("Hermes took %v", got)
	}
}
