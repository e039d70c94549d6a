package cron

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
	run := func(ctx context.Context, j store.CronJob) error { runs = append(runs, clock.now()); return nil }
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
