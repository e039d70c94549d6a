package server_test

// A cron job's prompt is a turn of its lane (a cron turn): queued behind
// the turn running there, announced by agent.busy (reason cron) and
// agent.idle like any turn, stopped by agent.stop and /stop, and the
// scheduler only queues it, so jobs due together start together. Real
// gateways over loopback WebSockets; the scheduler's clock is injected.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// cronClock is a scheduler over g's store and runner whose clock is at.
func cronClock(g *testgw.GW, at time.Time) *cron.Scheduler {
	s := cron.New(g.App.Store, g.App.GW.RunCron, slog.Default())
	s.Now = func() time.Time { return at }
	return s
}

// tick runs one scheduler tick and fails unless it returns within the
// wait: it must queue the due prompts, not wait for the agent.
func tick(t *testing.T, s *cron.Scheduler) {
	t.Helper()
	ticked := make(chan struct{})
	go func() { defer close(ticked); s.Tick(context.Background()) }()
	select {
	case <-ticked:
	case <-time.After(testgw.Wait):
		t.Fatalf("the scheduler's tick did not return within %v: it waits for the agent", testgw.Wait)
	}
}

// beats lists, in order, the turn lifecycle of a lane among fs:
// agent.busy with its reason, agent.idle, a reply's message.stop, a cron
// message with its text and a notification with its kind.
func beats(t *testing.T, fs []client.Frame, lane client.Lane) []string {
	t.Helper()
	var out []string
	for _, f := range fs {
		if f.ChatID != lane.ChatID || f.ThreadID != lane.ThreadID {
			continue
		}
		switch f.Type {
		case "agent.busy":
			out = append(out, "busy:"+testgw.Str(t, f, "reason"))
		case "agent.idle", "message.stop":
			out = append(out, f.Type)
		case "message":
			if testgw.Str(t, f, "role") == "cron" {
				out = append(out, "cron:"+testgw.Str(t, f, "text"))
			}
		case "notification":
			out = append(out, "notification:"+testgw.Str(t, f, "kind"))
		}
	}
	return out
}

// waitJob waits until the store's copy of a job satisfies ok.
func waitJob(t *testing.T, g *testgw.GW, id string, ok func(store.CronJob) bool) store.CronJob {
	t.Helper()
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	deadline := time.After(testgw.Wait)
	for {
		j, err := g.App.Store.CronJob(context.Background(), id)
		if err == nil && ok(j) {
			return j
		}
		select {
		case <-tk.C:
		case <-deadline:
			t.Fatalf("job %s is still %+v (%v)", id, j, err)
		}
	}
}

// TestCronTurnWaitsForTheRunningTurn: a job fires while a person's reply
// streams in its channel. Its turn waits for that one to end, then runs
// (the model calls the cronjob tool from inside it), and the channel sees
// one agent.busy … agent.idle per turn, in order, never interleaved: the
// cron message and its notification inside the cron turn's.
func TestCronTurnWaitsForTheRunningTurn(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	ops := createChannel(t, a, "ops", "")
	lane := client.Lane{ChatID: ops.ChatID}
	ctx := context.Background()
	j, err := cron.Add(ctx, r.g.App.Store, store.CronJob{Name: "alerts", Schedule: "every 1h", Prompt: "Summarize the alerts", ChatID: ops.ChatID}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	hold := make(chan struct{})
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("Working on the long thing.", 4), Hold: hold, HoldAfter: 3})
	send(t, a, lane, "do the long thing")
	a.Expect("message.update", nil) // the person's reply is streaming, and held

	r.fake.Push(cronCalls(fakeopenai.Call{ID: "c1", Args: `{"action":"list"}`}))
	r.reply("All quiet overnight.")
	tick(t, cronClock(r.g, j.NextRun.Add(time.Second)))
	// Queued, not started: nothing of it shows, and the model has had
	// only the person's request.
	got := barrier(t, a)
	none(t, "phone", got, func(f client.Frame) bool {
		return f.Type == "agent.busy" && testgw.Str(t, f, "reason") == "cron" || f.Type == "message" && testgw.Str(t, f, "role") == "cron"
	})
	r.noMoreRequests(1)

	close(hold)
	a.Expect("notification", nil)
	a.Expect("agent.idle", nil)
	want := []string{"busy:processing", "message.stop", "agent.idle",
		"busy:cron", "cron:All quiet overnight.", "notification:cron", "agent.idle"}
	if b := beats(t, a.Seen, lane); fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("the channel saw %q, want %q", b, want)
	}

	// The cron turn ran the job's prompt alone (not the person's
	// conversation), and its cronjob tool worked inside it.
	reqs := r.requests(3)
	if last := agLast(t, reqs[1]); last["content"] != "Summarize the alerts" || agSaid(t, reqs[1], "user", "do the long thing") {
		t.Fatalf("the cron turn asked the model %s", agRoles(t, reqs[1]))
	}
	if res := agToolResult(t, reqs[2], "c1"); !strings.Contains(res, j.ID) {
		t.Fatalf("cronjob list inside the cron turn answered %q", res)
	}
	// No user message is stored for it: history holds the person's
	// exchange and the cron message.
	h, _ := history(t, a, lane, nil)
	if len(h.Messages) != 3 || h.Messages[2].Text != "All quiet overnight." {
		t.Fatalf("history %+v", h.Messages)
	}
	for _, m := range h.Messages {
		if m.Text == "Summarize the alerts" {
			t.Fatalf("the cron prompt was stored as a message: %+v", m)
		}
	}
	waitJob(t, r.g, j.ID, func(j store.CronJob) bool { return j.LastErr == "" })
}

// TestCronTurnStops: agent.stop ends a cron turn held in the model: the
// stop is answered by its agent.idle, nothing is posted, the job records
// why, and the lane is free: a person's steering sent during the cron
// turn (which takes none) runs next as a turn of its own. /stop stops the
// next run the same way.
func TestCronTurnStops(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	ctx := context.Background()
	j, err := cron.Add(ctx, r.g.App.Store, store.CronJob{Name: "report", Schedule: "every 1h", Prompt: "Write the report"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("never said", 2), Hold: make(chan struct{})})
	r.reply("Here I am.")
	at := j.NextRun.Add(time.Second)
	tick(t, cronClock(r.g, at))
	a.Expect("agent.busy", is(t, "agent.busy", "reason", "cron"))
	r.requests(1) // the prompt is with the model, which holds it

	steer := a.MustDo("agent.steer", def, map[string]any{"text": "are you there?"})
	idle := a.MustDo("agent.stop", def, nil)
	if idle.Type != "agent.idle" || idle.ChatID != "default" {
		t.Fatalf("agent.stop answered with %s", idle.Raw)
	}
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "Here I am." {
		t.Fatalf("the steered turn: %s", stop.Raw)
	}
	a.Expect("agent.idle", nil)
	want := []string{"busy:cron", "agent.idle", "busy:processing", "message.stop", "agent.idle"}
	if b := beats(t, a.Seen, def); fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("the channel saw %q, want %q", b, want)
	}
	if last := agLast(t, r.requests(2)[1]); last["content"] != "are you there?" {
		t.Fatalf("the steering ran as %v", last)
	}
	h, _ := history(t, a, def, nil)
	if len(h.Messages) != 2 || h.Messages[0].MessageID != testgw.Str(t, steer, "message_id") {
		t.Fatalf("history %+v: the stopped cron turn must post nothing", h.Messages)
	}
	waitJob(t, r.g, j.ID, func(j store.CronJob) bool { return strings.Contains(j.LastErr, "stopped") })

	// The next run, stopped with /stop.
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("never said either", 2), Hold: make(chan struct{})})
	tick(t, cronClock(r.g, at.Add(time.Hour+time.Second)))
	a.Expect("agent.busy", is(t, "agent.busy", "reason", "cron"))
	r.requests(3)
	send(t, a, def, "/stop")
	a.Expect("agent.idle", nil)
	got := barrier(t, a)
	none(t, "phone", got, func(f client.Frame) bool {
		return f.Type == "notification" || f.Type == "message" && testgw.Str(t, f, "role") == "cron"
	})
	r.noMoreRequests(3)
}

// TestCronDueJobsStartTogether: two jobs due at the same tick in two
// channels both start at once, though the first one's prompt is slow: the
// second's output arrives while the first still runs.
func TestCronDueJobsStartTogether(t *testing.T) {
	g := testgw.Start(t, slowEcho(20*time.Millisecond))
	a := g.Dial(t, "phone")
	slowCh, quickCh := createChannel(t, a, "slow", ""), createChannel(t, a, "quick", "")
	slowLane, quickLane := client.Lane{ChatID: slowCh.ChatID}, client.Lane{ChatID: quickCh.ChatID}
	ctx := context.Background()
	now := time.Now()
	// The slow job is made first, so the tick comes to it first.
	slow, err := cron.Add(ctx, g.App.Store, store.CronJob{Name: "slow", Schedule: "every 1h", Prompt: words(1000), ChatID: slowCh.ChatID}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cron.Add(ctx, g.App.Store, store.CronJob{Name: "quick", Schedule: "every 1h", Prompt: "quick check", ChatID: quickCh.ChatID}, now.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}

	tick(t, cronClock(g, slow.NextRun.Add(time.Minute)))
	got := until(t, a, func(f client.Frame) bool { return f.Type == "agent.idle" && f.ChatID == quickCh.ChatID })
	if b := beats(t, got, quickLane); fmt.Sprint(b) != "[busy:cron cron:quick check notification:cron agent.idle]" {
		t.Fatalf("the quick channel saw %q", b)
	}
	// Twenty seconds of words: the slow one has not ended (its agent.busy
	// has most likely come too, but nothing orders the two lanes).
	if b := beats(t, got, slowLane); len(b) > 1 || len(b) == 1 && b[0] != "busy:cron" {
		t.Fatalf("the slow channel saw %q by the time the quick job was done", b)
	}
	if len(beats(t, got, slowLane)) == 0 {
		a.Expect("agent.busy", func(f client.Frame) bool { return f.ChatID == slowCh.ChatID })
	}
	a.MustDo("agent.stop", slowLane, nil)
	got = barrier(t, a)
	none(t, "phone", got, func(f client.Frame) bool { return f.Type == "message" && testgw.Str(t, f, "role") == "cron" })
}

// TestCronTurnQueuedAtStopRunsOnceAfterRestart: a cron turn still queued
// behind a person's turn when the gateway stops is owed: the next start
// runs the job once (the job's schedule had moved on when it fired), and
// not again.
func TestCronTurnQueuedAtStopRunsOnceAfterRestart(t *testing.T) {
	testCronTurnQueuedAtStopRunsOnceAfterRestart(t)
}

func testCronTurnQueuedAtStopRunsOnceAfterRestart(t *testing.T, on ...func(*server.AppConfig)) {
	dir := t.TempDir()
	ag := &gate{release: make(chan struct{})}
	g := testgw.StartIn(t, dir, with(on, func(c *server.AppConfig) { c.Agent = ag })...)
	a := g.Dial(t, "phone")
	ctx := context.Background()
	j, err := cron.Add(ctx, g.App.Store, store.CronJob{Name: "digest", Schedule: "every 1h", Prompt: "Daily digest please"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	send(t, a, def, "hold on")
	a.Expect("message.update", nil) // held by the gate
	// The gateway's own scheduler (the real clock) fires it; it queues.
	if err := cron.RunNow(ctx, g.App.Store, j.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	fired := waitJob(t, g, j.ID, func(j store.CronJob) bool { return !j.LastRun.IsZero() })
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	for deadline := time.After(testgw.Wait); ; {
		if owed, _ := g.App.Store.OwedCronRuns(ctx); len(owed) == 1 {
			break
		}
		select {
		case <-tk.C:
		case <-deadline:
			t.Fatal("the cron turn was never queued")
		}
	}
	g.Close() // the held turn is stopped; the cron turn never started

	// At the next start the job runs at once: the gate holds its turn
	// until a device is there to see it end.
	ag = &gate{release: make(chan struct{})}
	g = testgw.StartIn(t, dir, with(on, func(c *server.AppConfig) { c.Agent = ag })...)
	b := g.Dial(t, "tablet")
	ag.release <- struct{}{}
	m := b.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "cron" })
	if testgw.Str(t, m, "text") != "on Daily digest please" {
		t.Fatalf("cron message %s", m.Raw)
	}
	b.Expect("agent.idle", nil)
	after := waitJob(t, g, j.ID, func(j store.CronJob) bool { return j.LastRun.After(fired.LastRun) })
	if time.Until(after.NextRun) < 50*time.Minute {
		t.Fatalf("after the start-up run: %+v", after)
	}
	h, err := history(t, b, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	var crons int
	for _, m := range h.Messages {
		if strings.HasPrefix(m.Model, "cron: ") {
			crons++
		}
	}
	if crons != 1 {
		t.Fatalf("history %+v: want the job's run once", h.Messages)
	}
	if owed, _ := g.App.Store.OwedCronRuns(ctx); len(owed) != 0 {
		t.Fatalf("still owed: %+v", owed)
	}
	if turns, _ := g.App.Store.Turns(ctx); len(turns) != 0 {
		t.Fatalf("turns left: %+v", turns)
	}
}
