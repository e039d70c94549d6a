package agent

// What goes wrong on the way to Hermes: a stream lost or silent, Hermes
// down, refusing, restarting, a stop it cannot do, a start retried behind
// a proxy.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakehermes"
)

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
