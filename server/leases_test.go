package server_test

// Lane leases, cron and stops across replicas on one PostgreSQL database
// (issue 18): several gateways in this test process, each with its own
// data directory and its own pool, share a database as replicas behind a
// load balancer do. No NATS here (replicas_test.go has it): each replica
// delivers only its own commits live, so what the lanes did is read from
// the store.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// replica makes a gateway one of several on the test's database, with
// leases of ttl and a quick sweep.
func replica(on func(*server.AppConfig), ttl time.Duration, ag agent.Agent) []func(*server.AppConfig) {
	return []func(*server.AppConfig){on, func(c *server.AppConfig) {
		c.Replica, c.LeaseTTL, c.LeaseSweep = true, ttl, 50*time.Millisecond
		c.Agent = ag
	}}
}

// laneWatch is an echo agent shared by the replicas of one test: it sees
// every turn any of them runs, so it tells whether two ran at once and in
// which order they ran.
type laneWatch struct {
	delay time.Duration
	ran   chan string // each turn's input once it ended
	// hold, when set, holds a turn whose input starts with "hold" until
	// it is sent to (or the turn is stopped).
	hold chan struct{}

	mu      sync.Mutex
	running int
	most    int
	inputs  []string
}

func newLaneWatch(delay time.Duration) *laneWatch {
	return &laneWatch{delay: delay, ran: make(chan string, 256)}
}

func (w *laneWatch) Name() string { return "lanewatch" }

func (w *laneWatch) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	w.mu.Lock()
	w.running++
	w.most = max(w.most, w.running)
	w.inputs = append(w.inputs, t.Input)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running--
		w.mu.Unlock()
		w.ran <- t.Input
	}()
	if w.hold != nil && strings.HasPrefix(t.Input, "hold") {
		emit(agent.Event{Kind: agent.Text, Text: "on " + t.Input})
		select {
		case <-w.hold:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return (&agent.Echo{Delay: w.delay}).Run(ctx, t, emit)
}

// waitRuns waits for n turns to have ended.
func (w *laneWatch) waitRuns(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(2 * testgw.Wait)
	for range n {
		select {
		case <-w.ran:
		case <-deadline:
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("turns ran: %q, want %d", w.inputs, n)
		}
	}
}

// waitFor checks cond every few milliseconds until it holds, or fails.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	deadline := time.After(2 * testgw.Wait)
	for !cond() {
		select {
		case <-tk.C:
		case <-deadline:
			t.Fatalf("%s did not happen within %v", what, 2*testgw.Wait)
		}
	}
}

// allTurnsEnded waits for the turns table to be empty: every turn queued
// has run and ended.
func allTurnsEnded(t *testing.T, st server.Store) {
	t.Helper()
	waitFor(t, "every turn ended", func() bool {
		owed, err := st.Turns(context.Background())
		crons, err2 := st.OwedCronRuns(context.Background())
		return err == nil && err2 == nil && len(owed)+len(crons) == 0
	})
}

// replies returns the texts of the lane's assistant replies, oldest first.
func replies(t *testing.T, st server.Store, lk core.Lane) (texts []string, stopped []bool) {
	t.Helper()
	ms, _, err := st.History(context.Background(), lk, "", 200)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(ms, func(a, b core.Message) int { return int(a.TS - b.TS) })
	for _, m := range ms {
		if m.Role == core.RoleAssistant {
			texts = append(texts, m.Text)
			stopped = append(stopped, m.Stopped)
		}
	}
	return texts, stopped
}

// Messages sent to one lane through three replicas are answered once
// each, in the order they were sent, and never two turns of the lane at
// once: the replica holding the lane's lease runs the store's queue.
func TestReplicasRunALaneOnceInOrder(t *testing.T) {
	on := testgw.OnPostgres(t)
	w := newLaneWatch(5 * time.Millisecond)
	var gws []*testgw.GW
	var devs []*testgw.Device
	for i := range 3 {
		g := testgw.Start(t, replica(on, 10*time.Second, w)...)
		gws = append(gws, g)
		devs = append(devs, g.Dial(t, fmt.Sprintf("dev%d", i)))
	}
	const n = 12
	var sent []string
	for i := range n {
		text := fmt.Sprintf("message %d of the lane", i)
		send(t, devs[i%3], def, text)
		sent = append(sent, text)
	}
	w.waitRuns(t, n)
	st := gws[0].App.Store
	allTurnsEnded(t, st)
	w.mu.Lock()
	inputs, most := slices.Clone(w.inputs), w.most
	w.mu.Unlock()
	if most != 1 {
		t.Fatalf("%d turns of the lane ran at once", most)
	}
	if !slices.Equal(inputs, sent) {
		t.Fatalf("turns ran as\n%q\nwant the order they were sent in\n%q", inputs, sent)
	}
	got, _ := replies(t, st, core.Lane{ChatID: "default"})
	if !slices.Equal(got, sent) {
		t.Fatalf("replies\n%q\nwant one per message, in order\n%q", got, sent)
	}
	// With nothing queued, the holder lets the lease go.
	waitFor(t, "the lease let go", func() bool {
		var held float64
		for _, g := range gws {
			held += metricValue(t, g.App.Metrics.LeasesHeld)
		}
		return held == 0
	})
}

// A replica that dies mid-turn (its database connections gone, no
// shutdown) stops renewing its lease: once the lease has expired another
// replica takes the lane over, ends the cut-off turn without running it
// again (its reply so far kept, stopped) and runs what was queued behind
// it, in order.
func TestReplicaDiesMidTurnAndTheLaneIsTakenOver(t *testing.T) {
	on := testgw.OnPostgres(t)
	const ttl = time.Second
	held := &gate{release: make(chan struct{})}
	g1 := testgw.Start(t, replica(on, ttl, held)...)
	w := newLaneWatch(0)
	g2 := testgw.Start(t, replica(on, ttl, w)...)
	a := g1.Dial(t, "phone")
	b := g2.Dial(t, "tablet")
	send(t, a, def, "first")
	a.Expect("message.update", nil) // the turn runs on g1, held by the gate
	send(t, b, def, "second")
	send(t, b, def, "third")

	// g1 dies: its pool goes, so it neither renews nor writes again.
	died := time.Now()
	g1.App.Store.Close()
	w.waitRuns(t, 2)
	took := time.Since(died)
	st := g2.App.Store
	allTurnsEnded(t, st)
	w.mu.Lock()
	inputs := slices.Clone(w.inputs)
	w.mu.Unlock()
	if !slices.Equal(inputs, []string{"second", "third"}) {
		t.Fatalf("the replica that took over ran %q: the cut-off turn must not run again", inputs)
	}
	texts, stopped := replies(t, st, core.Lane{ChatID: "default"})
	if len(texts) != 3 || !stopped[0] || texts[1] != "second" || texts[2] != "third" || stopped[1] || stopped[2] {
		t.Fatalf("replies %q (stopped %v): want the cut-off reply stopped, then second and third", texts, stopped)
	}
	if n := metricValue(t, g2.App.Metrics.Takeovers); n != 1 {
		t.Fatalf("takeovers %v, want 1", n)
	}
	t.Logf("lane taken over and its queue answered %v after the holder died (lease %v)", took.Round(time.Millisecond), ttl)
}

// The lease rows are durable: PostgreSQL restarting (cleanly, or after a
// crash) while a replica runs a lane's turn takes the lease from no one.
// The holder's turn goes on and ends (its renewals fail meanwhile; the
// restart is shorter than the lease), no replica takes the lane over, and
// the turn queued through the other replica runs after it.
func TestLeaseSurvivesAPostgresRestart(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Fast()...)
	if err != nil {
		pgtest.Skip(t, err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, c := range []struct {
		name string
		stop func() error
	}{{"Restart", srv.Stop}, {"Crash", srv.Crash}} {
		t.Run(c.name, func(t *testing.T) {
			_, dsn, err := srv.CreateDB(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			on := func(cfg *server.AppConfig) { cfg.Store = dsn }
			w := newLaneWatch(0)
			w.hold = make(chan struct{})
			g1 := testgw.Start(t, replica(on, 10*time.Second, w)...)
			g2 := testgw.Start(t, replica(on, 10*time.Second, w)...)
			a := g1.Dial(t, "phone")
			b := g2.Dial(t, "tablet")
			send(t, a, def, "hold first")
			a.Expect("message.update", nil)
			send(t, b, def, "second")
			if err := c.stop(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			// The pools' idle connections died with the server; each fails
			// once before it is replaced. Used up here, so that the turn's
			// reply does not meet one: what this test holds to is the
			// lease, not the commit path's retries.
			for _, g := range []*testgw.GW{g1, g2} {
				ok := 0
				waitFor(t, "the pool answering again", func() bool {
					if _, err := g.App.Store.OutboxHead(context.Background()); err != nil {
						ok = 0
						return false
					}
					ok++
					return ok >= 16
				})
			}
			w.hold <- struct{}{}
			w.waitRuns(t, 2)
			allTurnsEnded(t, g1.App.Store)
			w.mu.Lock()
			inputs, most := slices.Clone(w.inputs), w.most
			w.mu.Unlock()
			if most != 1 || !slices.Equal(inputs, []string{"hold first", "second"}) {
				t.Fatalf("turns ran %q, at most %d at once", inputs, most)
			}
			texts, stopped := replies(t, g1.App.Store, core.Lane{ChatID: "default"})
			if !slices.Equal(texts, []string{"on hold first", "second"}) || slices.Contains(stopped, true) {
				t.Fatalf("replies %q (stopped %v)", texts, stopped)
			}
			if n := metricValue(t, g1.App.Metrics.Takeovers) + metricValue(t, g2.App.Metrics.Takeovers); n != 0 {
				t.Fatalf("%v takeovers across a restart shorter than the lease", n)
			}
		})
	}
}

// A lane's queue is bounded across replicas: the replica a message comes
// through counts the queue in the store (it keeps none of it when another
// replica runs the lane), so senders spread over replicas meet the one
// bound. /stop all through that replica drops the queue in the store.
func TestLaneQueueBoundedAcrossReplicas(t *testing.T) {
	on := testgw.OnPostgres(t)
	w := newLaneWatch(0)
	w.hold = make(chan struct{})
	g1 := testgw.Start(t, replica(on, 10*time.Second, w)...)
	g2 := testgw.Start(t, replica(on, 10*time.Second, w)...)
	a := g1.Dial(t, "phone")
	b := g2.Dial(t, "tablet")
	send(t, a, def, "hold the lane")
	a.Expect("message.update", nil)
	accepted, refused := 0, 0
	for i := range gateway.MaxQueuedTurns + 3 {
		d := b
		if i%4 == 0 {
			d = a
		}
		if _, err := d.Do("message.send", def, map[string]any{"text": fmt.Sprintf("queued %d", i)}); err != nil {
			wantCode(t, err, "rate_limited")
			refused++
			continue
		}
		accepted++
	}
	if accepted != gateway.MaxQueuedTurns || refused != 3 {
		t.Fatalf("%d queued, %d refused; want %d and 3", accepted, refused, gateway.MaxQueuedTurns)
	}
	b.MustDo("message.send", def, map[string]any{"text": "/stop all"})
	allTurnsEnded(t, g2.App.Store)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Equal(w.inputs, []string{"hold the lane"}) {
		t.Fatalf("turns ran %q: /stop all through the other replica must drop the queue", w.inputs)
	}
}

// agent.stop sent through a replica that does not run the lane's turn
// reaches the replica that does (through the lease row): its turn stops,
// with its text kept, and the lane goes on with what is queued.
func TestStopThroughAnotherReplica(t *testing.T) {
	g1, _, a, b, _ := turnHeldOnA(t, 1500*time.Millisecond)
	if idle := b.MustDo("agent.stop", def, map[string]any{}); idle.Type != "agent.idle" {
		t.Fatalf("agent.stop answered %s", idle.Raw)
	}
	// The gate never lets the turn go: only the stop ends it.
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "on long task" {
		t.Fatalf("message.stop %s", stop.Raw)
	}
	a.Expect("agent.idle", nil)
	allTurnsEnded(t, g1.App.Store)
	if texts, stopped := replies(t, g1.App.Store, core.Lane{ChatID: "default"}); len(texts) != 1 || !stopped[0] {
		t.Fatalf("replies %q (stopped %v): want the one reply, stopped", texts, stopped)
	}
}

// Cron fires each due run once across replicas: three schedulers on one
// database see the same due jobs every second, and FireCronJob's
// conditional update lets one of them fire each run; the replica holding
// the lane runs its turn.
func TestCronFiresOnceAcrossReplicas(t *testing.T) {
	on := testgw.OnPostgres(t)
	w := newLaneWatch(0)
	var gws []*testgw.GW
	for range 3 {
		gws = append(gws, testgw.Start(t, replica(on, 10*time.Second, w)...))
	}
	ctx := context.Background()
	st := gws[0].App.Store
	const jobs = 6
	var ids []string
	for i := range jobs {
		j, err := cron.Add(ctx, st, store.CronJob{Name: fmt.Sprint("job ", i), Schedule: "every 1h", Prompt: fmt.Sprint("prompt ", i)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids { // due now, for every scheduler at its next tick
		if err := cron.RunNow(ctx, st, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	w.waitRuns(t, jobs)
	waitFor(t, "every job fired", func() bool {
		for _, id := range ids {
			if j, err := st.CronJob(ctx, id); err != nil || j.LastRun.IsZero() || time.Until(j.NextRun) < 50*time.Minute {
				return false
			}
		}
		return true
	})
	allTurnsEnded(t, st)
	w.mu.Lock()
	inputs := slices.Clone(w.inputs)
	w.mu.Unlock()
	slices.Sort(inputs)
	var want []string
	for i := range jobs {
		want = append(want, fmt.Sprint("prompt ", i))
	}
	if !slices.Equal(inputs, want) {
		t.Fatalf("cron turns ran %q, want each job once: %q", inputs, want)
	}
	ms, _, err := st.History(ctx, core.Lane{ChatID: "default"}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	posted := 0
	for _, m := range ms {
		if strings.HasPrefix(m.Model, "cron: ") {
			posted++
		}
	}
	if posted != jobs {
		t.Fatalf("%d cron messages posted, want %d", posted, jobs)
	}
}

// metricValue is a gauge's or a counter's value.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Gauge != nil {
		return d.GetGauge().GetValue()
	}
	return d.GetCounter().GetValue()
}

// mute is an agent whose turns say nothing until they are stopped.
type mute struct{}

func (mute) Name() string { return "mute" }

func (mute) Run(ctx context.Context, _ agent.Turn, _ func(agent.Event)) error {
	<-ctx.Done()
	return ctx.Err()
}

// A replica that dies before its turn said a word leaves no stopped reply
// to show the turn was cut off: the replica taking the lane over says so
// in the lane, and does not run it again.
func TestReplicaDiesBeforeItsTurnSpeaks(t *testing.T) {
	on := testgw.OnPostgres(t)
	const ttl = time.Second
	g1 := testgw.Start(t, replica(on, ttl, mute{})...)
	w := newLaneWatch(0)
	g2 := testgw.Start(t, replica(on, ttl, w)...)
	a := g1.Dial(t, "phone")
	b := g2.Dial(t, "tablet")
	send(t, a, def, "a question never answered")
	a.Expect("agent.busy", nil)
	g1.App.Store.Close()
	expectCutOff(t, b, g2, w, "a question never answered")
}

// expectCutOff checks what the replica g2 that took a lane over says of
// the turn answering question, cut off on the replica that died: b gets
// the note and agent.idle, no turn is owed, and w ran nothing again.
func expectCutOff(t *testing.T, b *testgw.Device, g2 *testgw.GW, w *laneWatch, question string) {
	t.Helper()
	b.Expect("message", func(f client.Frame) bool {
		return testgw.Str(t, f, "role") == "system" && strings.Contains(testgw.Str(t, f, "text"), "cut off before it answered “"+question+"”")
	})
	b.Expect("agent.idle", nil)
	allTurnsEnded(t, g2.App.Store)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.inputs) != 0 {
		t.Fatalf("the replica that took over ran %q: the cut-off turn must not run again", w.inputs)
	}
}

// speakLate is an agent whose turn says one piece when told to, then says
// nothing more until it is stopped.
type speakLate struct{ entered, speak chan struct{} }

func (speakLate) Name() string { return "speak-late" }

func (a speakLate) Run(ctx context.Context, _ agent.Turn, emit func(agent.Event)) error {
	close(a.entered)
	select {
	case <-a.speak:
		emit(agent.Event{Kind: agent.Text, Text: "half an answer"})
	case <-ctx.Done():
	}
	<-ctx.Done()
	return ctx.Err()
}

// A replica that dies after its reply's message.start went out and before
// the reply's row was stored (the start is published first: issue 17)
// leaves a bubble nothing in the store ends: the replica taking the lane
// over finds the reply's id on the turn's row, tells the devices to drop
// it, says the turn was cut off, and does not run it again.
func TestReplicaDiesBeforeItsReplyIsStored(t *testing.T) {
	on := testgw.OnPostgres(t)
	const ttl = time.Second
	ag := speakLate{entered: make(chan struct{}), speak: make(chan struct{})}
	g1 := testgw.Start(t, replica(on, ttl, ag)...)
	w := newLaneWatch(0)
	g2 := testgw.Start(t, replica(on, ttl, w)...)
	a := g1.Dial(t, "phone")
	b := g2.Dial(t, "tablet")
	send(t, a, def, "a question half answered")
	a.Expect("agent.busy", nil)
	select {
	case <-ag.entered:
	case <-time.After(testgw.Wait):
		t.Fatal("the turn never reached the agent")
	}
	g1.App.Store.Close() // the replica loses its database: the row never lands
	close(ag.speak)
	replyID := testgw.Str(t, a.Expect("message.start", nil), "message_id")
	a.Expect("message.update", nil)
	b.Expect("message.deleted", func(f client.Frame) bool {
		var p struct {
			IDs []string `json:"message_ids"`
		}
		f.Decode(&p)
		return slices.Equal(p.IDs, []string{replyID})
	})
	expectCutOff(t, b, g2, w, "a question half answered")
}

// /status through a replica that does not run the lane says what the
// holder runs: the store's queue, not this replica's empty memory.
func TestStatusThroughAnotherReplica(t *testing.T) {
	_, _, a, b, held := turnHeldOnA(t, 10*time.Second)
	send(t, a, def, "next task")
	send(t, b, def, "/status")
	b.Expect("message", func(f client.Frame) bool {
		return testgw.Str(t, f, "role") == "system" && strings.Contains(testgw.Str(t, f, "text"), "Turn running: true, queued: 1")
	})
	close(held.release)
}

// turnHeldOnA starts two replicas with lease ttl whose agent holds every
// turn until released, and runs "long task" on A (g1), sent by its phone;
// B's tablet is connected.
func turnHeldOnA(t *testing.T, ttl time.Duration) (g1, g2 *testgw.GW, a, b *testgw.Device, held *gate) {
	t.Helper()
	on := testgw.OnPostgres(t)
	held = &gate{release: make(chan struct{})}
	g1 = testgw.Start(t, replica(on, ttl, held)...)
	g2 = testgw.Start(t, replica(on, ttl, held)...)
	a, b = g1.Dial(t, "phone"), g2.Dial(t, "tablet")
	send(t, a, def, "long task")
	a.Expect("message.update", nil)
	return g1, g2, a, b, held
}
