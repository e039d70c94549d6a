package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

func TestNext(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 7, 30, 0, time.UTC)
	for _, tc := range []struct {
		in     string
		want   time.Time
		repeat bool
	}{
		{"*/15 * * * *", time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC), true},
		{"0 9 * * 1-5", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), true},
		{"every 30m", now.Add(30 * time.Minute), true},
		{"30m", now.Add(30 * time.Minute), false},
		{"2026-12-01T09:00", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), false},
		{"2026-12-01T09:00:00Z", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), false},
	} {
		got, repeat, err := Next(tc.in, now)
		if err != nil || !got.Equal(tc.want) || repeat != tc.repeat {
			t.Errorf("Next(%q) = %v %v %v; want %v %v", tc.in, got, repeat, err, tc.want, tc.repeat)
		}
	}
	for _, bad := range []string{"", "every 10s", "61 * * * *", "2020-01-01T00:00", "tomorrow", "-5m"} {
		if _, _, err := Next(bad, now); err == nil {
			t.Errorf("Next(%q) accepted", bad)
		}
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestSchedulerFiresOnTimeOnceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 30, 0, time.UTC)}
	var runs []time.Time
	run := func(ctx context.Context, j store.CronJob, done func(error)) error {
		runs = append(runs, clock.now())
		done(nil)
		return nil
	}
	s := New(st, run, slog.Default())
	s.Now = clock.now
	every5, err := s.Add(ctx, store.CronJob{Schedule: "*/5 * * * *", Text: "tick"})
	if err != nil {
		t.Fatal(err)
	}
	once, _ := s.Add(ctx, store.CronJob{Schedule: "12m", Text: "once"})

	for i := 0; i < 4*60; i++ { // four minutes, second by second
		clock.add(time.Second)
		s.Tick(ctx)
	}
	if len(runs) != 0 {
		t.Fatalf("ran at %v, before 10:05", runs)
	}
	clock.add(31 * time.Second) // 10:05:01
	s.Tick(ctx)
	s.Tick(ctx)
	if len(runs) != 1 || runs[0].Minute() != 5 {
		t.Fatalf("runs = %v, want one at 10:05", runs)
	}
	st.Close()

	// The gateway is down from 10:05 to 10:31: the */5 job missed five
	// runs and the one-shot its time. At start-up each runs once.
	clock.add(26 * time.Minute)
	st, err = store.Open(filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s = New(st, run, slog.Default())
	s.Now = clock.now
	s.Tick(ctx)
	s.Tick(ctx)
	if len(runs) != 3 {
		t.Fatalf("after the restart: %d runs in all, want 3 (each missed job once)", len(runs))
	}
	j, _ := st.CronJob(ctx, every5.ID)
	if want := time.Date(2026, 11, 30, 10, 35, 0, 0, time.UTC); !j.NextRun.Equal(want) {
		t.Fatalf("next run %v, want %v", j.NextRun, want)
	}
	o, _ := st.CronJob(ctx, once.ID)
	if o.Enabled || !o.NextRun.IsZero() {
		t.Fatalf("one-shot still scheduled: %+v", o)
	}
	// Paused jobs do not run; run-now runs (and resumes) them.
	j.Enabled = false
	st.PutCronJob(ctx, j)
	clock.add(10 * time.Minute)
	s.Tick(ctx)
	if len(runs) != 3 {
		t.Fatal("a paused job ran")
	}
	RunNow(ctx, st, j.ID, clock.now())
	s.Tick(ctx)
	if len(runs) != 4 {
		t.Fatal("run-now did not run the job")
	}
}

// TestTickDoesNotWaitForRuns: a tick starts every due job and returns;
// a run that goes on (a prompt queued as a turn) reports its outcome
// later, and the outcome is kept without undoing the job's rescheduling.
func TestTickDoesNotWaitForRuns(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 30, 0, time.UTC)}
	var (
		mu      sync.Mutex
		started []string
		dones   = map[string]func(error){}
	)
	run := func(ctx context.Context, j store.CronJob, done func(error)) error {
		mu.Lock()
		defer mu.Unlock()
		started = append(started, j.Name)
		if j.Name == "broken" {
			return errors.New("no such channel")
		}
		dones[j.Name] = done // finishes later, on another goroutine
		return nil
	}
	s := New(st, run, slog.Default())
	s.Now = clock.now
	slow, _ := s.Add(ctx, store.CronJob{Name: "slow", Schedule: "every 5m", Prompt: "think hard"})
	fast, _ := s.Add(ctx, store.CronJob{Name: "fast", Schedule: "every 5m", Prompt: "say hi"})
	broken, _ := s.Add(ctx, store.CronJob{Name: "broken", Schedule: "every 5m", Text: "x"})
	clock.add(5 * time.Minute)
	s.Tick(ctx)          // returns though no run has finished
	slices.Sort(started) // jobs made at the same instant list in any order
	if fmt.Sprint(started) != "[broken fast slow]" {
		t.Fatalf("started %v, want every due job", started)
	}
	if j, _ := st.CronJob(ctx, broken.ID); j.LastErr != "no such channel" {
		t.Fatalf("a run that did not start: %+v", j)
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		dones["slow"](errors.New("model unreachable"))
		dones["fast"](nil)
	}()
	<-finished
	next := clock.now().Add(5 * time.Minute)
	if j, _ := st.CronJob(ctx, slow.ID); j.LastErr != "model unreachable" || !j.NextRun.Equal(next) || !j.LastRun.Equal(clock.now()) {
		t.Fatalf("slow after its run: %+v", j)
	}
	if j, _ := st.CronJob(ctx, fast.ID); j.LastErr != "" || !j.NextRun.Equal(next) {
		t.Fatalf("fast after its run: %+v", j)
	}
	// The next good run clears the error.
	clock.add(5 * time.Minute)
	s.Tick(ctx)
	dones["slow"](nil)
	if j, _ := st.CronJob(ctx, slow.ID); j.LastErr != "" {
		t.Fatalf("slow after a good run: %+v", j)
	}
}

// TestOwedRunsRunOnceAtStart: runs queued as turns that never started
// when the gateway stopped (rows in the turn table) are run once at the
// next start, collapsing with runs missed while it was down; a paused or
// removed job owes nothing, and a turn that was running is left to the
// gateway, not run again.
func TestOwedRunsRunOnceAtStart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 30, 0, time.UTC)}
	var runs []string
	// As the gateway's runner: the run is owed in the turn table from the
	// moment it is queued; it never gets to start here.
	queue := func(ctx context.Context, j store.CronJob, done func(error)) error {
		runs = append(runs, j.Name)
		return st.Write(ctx, func(tx store.Tx) error {
			return tx.QueueTurn(core.Lane{ChatID: j.ChatID}, store.CronTurnID(j.ID))
		})
	}
	s := New(st, queue, slog.Default())
	s.Now = clock.now
	every5, _ := s.Add(ctx, store.CronJob{Name: "every5", Schedule: "*/5 * * * *", Prompt: "p"})
	hourly, _ := s.Add(ctx, store.CronJob{Name: "hourly", Schedule: "every 1h", Prompt: "p"})
	once, _ := s.Add(ctx, store.CronJob{Name: "once", Schedule: "4m", Prompt: "p"})
	paused, _ := s.Add(ctx, store.CronJob{Name: "paused", Schedule: "every 1h", Prompt: "p"})
	gone, _ := s.Add(ctx, store.CronJob{Name: "gone", Schedule: "every 1h", Prompt: "p"})
	running, _ := s.Add(ctx, store.CronJob{Name: "running", Schedule: "every 1h", Prompt: "p"})
	clock.add(time.Hour) // 11:00:30: all due
	s.Tick(ctx)
	if len(runs) != 6 {
		t.Fatalf("runs %v", runs)
	}
	// Meanwhile: one job is paused, one removed, one's turn started.
	if _, err := Act(ctx, st, ActPause, paused.ID, clock.now()); err != nil {
		t.Fatal(err)
	}
	if _, err := Act(ctx, st, ActRemove, gone.ID, clock.now()); err != nil {
		t.Fatal(err)
	}
	owed, _ := st.OwedCronRuns(ctx)
	for _, q := range owed {
		if q.CronJob == running.ID {
			st.Write(ctx, func(tx store.Tx) error { return tx.StartTurn(q.MessageID, "") })
		}
	}
	st.Close()

	// Down from 11:00 to 11:07: every5 also missed its 11:05 run.
	clock.add(7 * time.Minute)
	st, err = store.Open(filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs = nil
	s = New(st, queue, slog.Default())
	s.Now = clock.now
	s.settleOwed(ctx)
	s.Tick(ctx)
	s.Tick(ctx)
	slices.Sort(runs)
	if fmt.Sprint(runs) != "[every5 hourly once]" {
		t.Fatalf("runs at start-up %v, want every5, hourly and once, once each", runs)
	}
	if j, _ := st.CronJob(ctx, every5.ID); !j.NextRun.Equal(time.Date(2026, 11, 30, 11, 10, 0, 0, time.UTC)) {
		t.Fatalf("every5 next %v", j.NextRun)
	}
	if j, _ := st.CronJob(ctx, hourly.ID); !j.NextRun.Equal(clock.now().Add(time.Hour)) {
		t.Fatalf("hourly next %v", j.NextRun)
	}
	if j, _ := st.CronJob(ctx, once.ID); j.Enabled || !j.NextRun.IsZero() {
		t.Fatalf("the one-shot is scheduled again: %+v", j)
	}
	if j, _ := st.CronJob(ctx, paused.ID); j.Enabled {
		t.Fatalf("the paused job was resumed: %+v", j)
	}
	// The owed rows are gone except the new runs' (queued by the ticks
	// above); the running one is the gateway's to settle.
	owed, _ = st.OwedCronRuns(ctx)
	if len(owed) != 3 {
		t.Fatalf("owed after start-up: %+v", owed)
	}
	left, _ := st.Turns(ctx)
	if len(left) != 1 || left[0].CronJob != running.ID || !left[0].Running {
		t.Fatalf("turns for the gateway: %+v", left)
	}
}

// A cron turn queued after the scheduler was made is this run's, not one
// the last stop left owed: settling owed runs must not make its job due
// again, or the job would run twice.
func TestRunsQueuedByThisRunAreNotOwed(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 30, 0, time.UTC)}
	s := New(st, func(context.Context, store.CronJob, func(error)) error { return nil }, slog.Default())
	s.Now = clock.now
	j, err := s.Add(ctx, store.CronJob{Name: "hourly", Schedule: "every 1h", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	// Queued by this run of the gateway (say /cron run, or a test calling
	// the runner) before the scheduler's first tick.
	if err := st.Write(ctx, func(tx store.Tx) error {
		return tx.QueueTurn(core.Lane{ChatID: j.ChatID}, store.CronTurnID(j.ID))
	}); err != nil {
		t.Fatal(err)
	}
	s.settleOwed(ctx)
	if got, _ := st.CronJob(ctx, j.ID); !got.NextRun.Equal(j.NextRun) {
		t.Fatalf("next run moved from %v to %v: the job would run again", j.NextRun, got.NextRun)
	}
	if owed, _ := st.OwedCronRuns(ctx); len(owed) != 1 {
		t.Fatalf("this run's queued turn was taken over: %+v", owed)
	}
}
