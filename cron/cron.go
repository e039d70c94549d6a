// Package cron runs scheduled jobs: a prompt through the agent (or a fixed
// text) posted into a channel at a 5-field cron time, every interval, or
// once. Jobs live in the store, so the CLI and the agent's tool manage them
// while the gateway runs, and a restart neither loses nor repeats them.
package cron

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/adhocore/gronx"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Next computes when a schedule fires after now. repeat is false for
// one-shots ("30m", an ISO time).
func Next(schedule string, now time.Time) (next time.Time, repeat bool, err error) {
	s := strings.TrimSpace(schedule)
	if rest, ok := strings.CutPrefix(s, "every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < time.Minute {
			return time.Time{}, false, fmt.Errorf("%q: use \"every\" with a duration of at least 1m, like \"every 30m\"", schedule)
		}
		return now.Add(d), true, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, false, fmt.Errorf("%q: the delay must be positive", schedule)
		}
		return now.Add(d), false, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			if !t.After(now) {
				return time.Time{}, false, fmt.Errorf("%q is in the past", schedule)
			}
			return t, false, nil
		}
	}
	if len(strings.Fields(s)) == 5 && gronx.IsValid(s) {
		t, err := gronx.NextTickAfter(s, now, false)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("%q: %v", schedule, err)
		}
		return t, true, nil
	}
	return time.Time{}, false, fmt.Errorf("%q is not a schedule: use a 5-field cron expression (\"0 9 * * 1-5\"), \"every 30m\", a delay (\"30m\") or a time (\"2026-12-01T09:00\")", schedule)
}

// Runner delivers a job's output; the gateway implements it.
type Runner func(ctx context.Context, j store.CronJob) error

// Scheduler fires due jobs.
type Scheduler struct {
	st  *store.Store
	run Runner
	log *slog.Logger
	// Now is the clock; tests inject one.
	Now func() time.Time
}

// New makes a scheduler; Run drives it.
func New(st *store.Store, run Runner, log *slog.Logger) *Scheduler {
	return &Scheduler{st: st, run: run, log: log, Now: time.Now}
}

// Add validates and stores a new job.
func (s *Scheduler) Add(ctx context.Context, j store.CronJob) (store.CronJob, error) {
	return Add(ctx, s.st, j, s.Now())
}

// Add validates and stores a new job (the CLI uses it without a scheduler).
func Add(ctx context.Context, st *store.Store, j store.CronJob, now time.Time) (store.CronJob, error) {
	if strings.TrimSpace(j.Prompt) == "" && strings.TrimSpace(j.Text) == "" {
		return j, core.Errorf(core.CodeUnsupported, "a job needs a prompt or a text")
	}
	next, _, err := Next(j.Schedule, now)
	if err != nil {
		return j, core.Errorf(core.CodeUnsupported, "%v", err)
	}
	if j.ChatID == "" {
		j.ChatID = core.DefaultChatID
	}
	if _, err := st.Channel(ctx, j.ChatID); err != nil {
		return j, core.Errorf(core.CodeNotFound, "unknown channel %q", j.ChatID)
	}
	if j.ID == "" {
		j.ID = core.NewID("cron_")
	}
	if j.Name == "" {
		j.Name = firstWords(j.Prompt+j.Text, 6)
	}
	j.Enabled, j.NextRun, j.Created = true, next, now
	return j, st.PutCronJob(ctx, j)
}

func firstWords(s string, n int) string {
	w := strings.Fields(s)
	if len(w) > n {
		return strings.Join(w[:n], " ") + "…"
	}
	return strings.Join(w, " ")
}

// Run ticks every second until ctx ends. The first tick runs jobs missed
// while the gateway was down: once each, however many times they were due.
func (s *Scheduler) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick runs every enabled job that is due, then schedules its next run
// from now, so a backlog collapses into one run.
func (s *Scheduler) Tick(ctx context.Context) {
	jobs, err := s.st.CronJobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("cron: listing jobs", "err", err)
		}
		return
	}
	now := s.Now()
	for _, j := range jobs {
		if !j.Enabled || j.NextRun.IsZero() || j.NextRun.After(now) {
			continue
		}
		// Reschedule before running: a crash mid-run must not make the job
		// fire again at start-up.
		next, repeat, err := Next(j.Schedule, now)
		j.LastRun = now
		if err != nil || !repeat {
			j.NextRun, j.Enabled = time.Time{}, false
		} else {
			j.NextRun = next
		}
		if err := s.st.PutCronJob(ctx, j); err != nil {
			s.log.Warn("cron: saving a job", "job", j.ID, "err", err)
			continue
		}
		if err := s.run(ctx, j); err != nil {
			s.log.Warn("cron job failed", "job", j.ID, "err", err)
			j.LastErr = err.Error()
		} else {
			j.LastErr = ""
		}
		s.st.PutCronJob(ctx, j)
	}
}

// RunNow makes a job due at once (irisgate cron run, /cron run). A paused
// job is resumed by it; a finished one-shot runs once more.
func RunNow(ctx context.Context, st *store.Store, id string, now time.Time) error {
	j, err := st.CronJob(ctx, id)
	if err != nil {
		return err
	}
	j.NextRun, j.Enabled = now, true
	return st.PutCronJob(ctx, j)
}
