package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/fakehermes"
)

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
