package agent

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakehermes"
)

// answerElsewhere answers a run's approval as another Hermes client does.
func answerElsewhere(t *testing.T, fake *fakehermes.Server, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fake.URL+"/v1/runs/"+fake.Runs()[0].ID+"/approval", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+hermesKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answering from elsewhere: HTTP %d", resp.StatusCode)
	}
}

func decided(fake *fakehermes.Server) string { return strings.Join(fake.Runs()[0].Decided, ", ") }

// Issue 14 item 1, on a Hermes without request ids: two approvals pending
// at once (parallel tools), the bridge shows the newer; a bare "once" for
// it would approve the older, whose prompt was closed as not approved. It
// is not sent, and the person is told; a denial denies both.
func TestHermesBareApprovalWithAnOlderOnePending(t *testing.T) {
	for _, tc := range []struct {
		choice, said, decided string
	}{
		{"once", "⚠️ Not applied: this Hermes (a version that puts no id on its approvals) still has an older approval waiting before `sudo rm -rf /srv/data`", "deny rm -rf build, deny sudo rm -rf /srv/data"},
		{"deny", "⛔ Denied: `sudo rm -rf /srv/data` (by phone)", "deny rm -rf build, deny sudo rm -rf /srv/data"},
	} {
		t.Run(tc.choice, func(t *testing.T) {
			noLeaks(t)
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: true})
			fake.Push(fakehermes.Script{Steps: []fakehermes.Step{
				fakehermes.ToolStarted("delegate_task", "two jobs"),
				fakehermes.Together(fakehermes.Approval("rm -rf build", "recursive delete"), fakehermes.Approval("sudo rm -rf /srv/data", "delete as root")),
				fakehermes.ToolCompleted("delegate_task", 1, false),
				fakehermes.Completed("Done.", 1, 1),
			}})
			asker := newDeferAsker()
			h := newHermes(t, fake.URL)
			rec := newHrec()
			done := runTurn(context.Background(), h, Turn{Input: "clean", Asker: asker}, rec)
			asker.wait(t, "the second question", func(a *deferAsker) bool { return len(a.asked) == 2 })
			asker.answers <- tc.choice
			asker.wait(t, "word on the answer", func(a *deferAsker) bool { return len(a.said) == 1 })
			_, _, said, applied := asker.snap()
			if !strings.HasPrefix(said[0], tc.said) || applied[0] != (tc.choice == "deny") {
				t.Fatalf("said %q applied %v", said, applied)
			}
			for _, b := range approvalBodies(fake) {
				if b["choice"] != "deny" {
					t.Fatalf("a bare %v was sent with an older approval pending", b)
				}
			}
			if tc.choice == "once" {
				if d := decided(fake); d != "" {
					t.Fatalf("Hermes decided %s", d)
				}
				answerElsewhere(t, fake, `{"choice":"deny","all":true}`)
			}
			if err := result(t, done); err != nil {
				t.Fatal(err)
			}
			if d := decided(fake); d != tc.decided {
				t.Fatalf("Hermes decided %s", d)
			}
		})
	}
}

// Issue 14 item 1: the rule holds only while an older request may be
// pending. Once the older one is settled, by the tool that asked
// finishing (Hermes's timeout denied it silently) or by an answer from
// elsewhere (approval.responded), the newer one's "once" goes.
func TestHermesBareApprovalOnceTheOlderIsSettled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		steps   []fakehermes.Step
		settle  func(t *testing.T, fake *fakehermes.Server)
		decided string
	}{
		{"the tool finished", []fakehermes.Step{
			fakehermes.ToolStarted("terminal", "rm -rf build"),
			fakehermes.ApprovalWithin("rm -rf build", "recursive delete", 50*time.Millisecond),
			fakehermes.ToolCompleted("terminal", 0.1, true),
			fakehermes.ToolStarted("terminal", "make clean"),
			fakehermes.Approval("make clean", "delete"),
			fakehermes.ToolCompleted("terminal", 0.1, false),
			fakehermes.Completed("Cleaned.", 1, 1),
		}, nil, "timeout rm -rf build, once make clean"},
		{"answered elsewhere", []fakehermes.Step{
			fakehermes.Approval("rm -rf build", "recursive delete"),
			fakehermes.Approval("make clean", "delete"),
			fakehermes.Completed("Cleaned.", 1, 1),
		}, func(t *testing.T, fake *fakehermes.Server) { answerElsewhere(t, fake, `{"choice":"deny"}`) }, "deny rm -rf build, once make clean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			fake := fakehermes.New(t, fakehermes.Config{Key: hermesKey, Legacy: true})
			fake.Push(fakehermes.Script{Steps: tc.steps})
			asker := newDeferAsker()
			h := newHermes(t, fake.URL)
			rec := newHrec()
			done := runTurn(context.Background(), h, Turn{Input: "clean", Asker: asker}, rec)
			asker.wait(t, "the first question", func(a *deferAsker) bool { return len(a.asked) == 1 })
			if tc.settle != nil {
				tc.settle(t, fake)
			}
			asker.wait(t, "the second question", func(a *deferAsker) bool { return len(a.asked) == 2 })
			asker.answers <- "once"
			if err := result(t, done); err != nil {
				t.Fatal(err)
			}
			if d := decided(fake); d != tc.decided {
				t.Fatalf("Hermes decided %s", d)
			}
			if _, _, said, _ := asker.snap(); len(said) != 1 || said[0] != "✅ Allowed once: `make clean` (by phone)" {
				t.Fatalf("said %q", said)
			}
		})
	}
}
