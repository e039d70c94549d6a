package agent

// Notes a person sends while a run works: steered into it where Hermes
// takes them, else put in front of the next message.

import (
	"context"
	"testing"

	"github.com/irisgate/irisgate/internal/fakehermes"
)

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
