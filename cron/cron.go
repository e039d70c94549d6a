// Package cron runs scheduled jobs: a prompt through the agent (or a fixed
// text) posted into a channel at a 5-field cron time, every interval, or
// once. Jobs live in the store, so the CLI and the agent's tool manage them
// while the gateway runs, and a restart neither loses nor repeats them.
package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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

// Runner starts a run of job j; the gateway implements it. A run may go on
// after Runner returns (a prompt is a turn of its lane, queued behind what
// runs there), so the scheduler never waits for the agent: it is told the
// run's outcome through done, at most once, maybe before Runner returns.
// Runner's own error means the run did not happen, and done is not called.
// A run merged into one of the job already waiting is not reported apart.
type Runner func(ctx context.Context, j store.CronJob, done func(error)) error

// Scheduler fires due jobs.
type Scheduler struct {
	st  Store
	run Runner
	log *slog.Logger
	// Now is the clock; tests inject one.
	Now func() time.Time
	// Replica makes this scheduler one of several replicas' on one
	// database (issue 18); set before Run. Each due run is fired by one
	// of them (FireCronJob is conditional). A cron turn left queued is
	// not made due again at start-up (settleOwed): it stays in its
	// lane's queue, which the replica holding the lane runs, this start
	// or another replica that is still up.
	Replica bool
	// mu orders the scheduler's own read-modify-writes of a job: a run's
	// outcome arrives from the run's goroutine while a tick may be firing
	// the same job again, and one must not overwrite the other's change
	// with a stale copy.
	mu sync.Mutex
	// owed are the cron turns the last stop left queued, read when the
	// scheduler is made: a cron turn queued after that (by this run of
	// the gateway) is not owed, and taking it for one would run it twice.
	owed    []store.QueuedTurn
	owedErr error
}

// New makes a scheduler; Run drives it. Make it before the gateway queues
// any cron turn.
func New(st Store, run Runner, log *slog.Logger) *Scheduler {
	owed, err := st.OwedCronRuns(context.Background())
	return &Scheduler{st: st, run: run, log: log, Now: time.Now, owed: owed, owedErr: err}
}

// Add validates and stores a new job.
func (s *Scheduler) Add(ctx context.Context, j store.CronJob) (store.CronJob, error) {
	return Add(ctx, s.st, j, s.Now())
}

// Add validates and stores a new job (the CLI uses it without a scheduler).
func Add(ctx context.Context, st Store, j store.CronJob, now time.Time) (store.CronJob, error) {
	if strings.TrimSpace(j.Prompt) == "" && strings.TrimSpace(j.Text) == "" {
		return j, ErrJobEmpty.New()
	}
	next, _, err := Next(j.Schedule, now)
	if err != nil {
		return j, ErrSchedule.Wrap(err, err)
	}
	if err := checkTarget(ctx, st, &j); err != nil {
		return j, err
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

// checkTarget makes sure a job posts into a lane that exists (Target).
func checkTarget(ctx context.Context, st Directory, j *store.CronJob) error {
	lane, err := Target(ctx, st, core.Lane{ChatID: j.ChatID, ThreadID: j.ThreadID})
	j.ChatID, j.ThreadID = lane.ChatID, lane.ThreadID
	return err
}

// Target resolves a lane as a person (or the model) names it: the chat
// may be a channel's id or its name (absent: the default channel), and a
// chat naming a thread is taken as that thread of its parent. It says
// what was not found; the lane's channel and thread exist when it does
// not fail. Deliveries (irisgate send) name their target the same way.
func Target(ctx context.Context, st Directory, l core.Lane) (core.Lane, error) {
	if l.ChatID == "" {
		l.ChatID = core.DefaultChatID
	}
	ch, err := st.Channel(ctx, l.ChatID)
	if errors.Is(err, store.ErrNotFound) {
		ch, err = channelNamed(ctx, st, l.ChatID)
	}
	if err != nil {
		return l, lookupErr(err, ErrUnknownChannel, l.ChatID)
	}
	l.ChatID = ch.ChatID
	if ch.Kind == core.KindThread {
		if l.ThreadID != "" && l.ThreadID != ch.ChatID {
			return l, ErrTargetIsThread.New(l.ChatID, ch.ParentChatID)
		}
		l.ChatID, l.ThreadID = ch.ParentChatID, ch.ChatID
	}
	if l.ThreadID == "" {
		return l, nil
	}
	th, err := st.Channel(ctx, l.ThreadID)
	if err == nil && (th.Kind != core.KindThread || th.ParentChatID != l.ChatID) {
		err = store.ErrNotFound
	}
	if err != nil {
		return l, lookupErr(err, ErrUnknownThread, l.ThreadID, l.ChatID)
	}
	return l, nil
}

// channelNamed finds the one channel or thread called name.
func channelNamed(ctx context.Context, st Directory, name string) (core.Channel, error) {
	chs, err := st.Channels(ctx)
	if err != nil {
		return core.Channel{}, err
	}
	var found []core.Channel
	for _, c := range chs {
		if strings.EqualFold(strings.TrimSpace(c.Name), strings.TrimSpace(name)) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return core.Channel{}, store.ErrNotFound
	case 1:
		return found[0], nil
	}
	return core.Channel{}, ErrAmbiguousName.New(len(found), name)
}

// lookupErr says what was not found, or passes a failure of the store on.
func lookupErr(err error, k *core.Kind, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return k.New(args...)
	}
	return err
}

func firstWords(s string, n int) string {
	w := strings.Fields(s)
	if len(w) > n {
		return strings.Join(w[:n], " ") + "…"
	}
	return strings.Join(w, " ")
}

// Run ticks every second until ctx ends. Before the first tick it makes
// due the runs the last stop left owed (settleOwed); the first tick then
// runs those and the jobs missed while the gateway was down: once each,
// however many times they were due.
func (s *Scheduler) Run(ctx context.Context) {
	s.settleOwed(ctx)
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

// Tick starts every enabled job that is due, having scheduled its next run
// from now, so a backlog collapses into one run. It does not wait for the
// runs: a slow prompt must not hold back the other jobs due with it.
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
		if !due(j, now) {
			continue
		}
		j, ok := s.fire(ctx, j.ID, now)
		if !ok {
			continue
		}
		id := j.ID
		if err := s.run(ctx, j, func(err error) { s.record(id, err) }); err != nil {
			s.record(id, err)
		}
	}
}

func due(j store.CronJob, now time.Time) bool {
	return j.Enabled && !j.NextRun.IsZero() && !j.NextRun.After(now)
}

// fire reschedules a due job before it runs: a crash mid-run must not make
// it fire again at start-up. It reloads the job, so a change made since the
// listing (a pause, a run's outcome) is kept, and reports false when the
// job is no longer due.
func (s *Scheduler) fire(ctx context.Context, id string, now time.Time) (store.CronJob, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.st.CronJob(ctx, id)
	if err != nil || !due(j, now) {
		return j, false
	}
	was := j.NextRun
	next, repeat, err := Next(j.Schedule, now)
	j.LastRun = now
	if err != nil || !repeat {
		j.NextRun, j.Enabled = time.Time{}, false
	} else {
		j.NextRun = next
	}
	// Conditional: the CLI, in another process, may have paused or
	// rescheduled the job since it was read.
	ok, err := s.st.FireCronJob(ctx, j.ID, was, j.LastRun, j.NextRun, j.Enabled)
	if err != nil {
		s.log.Warn("cron: saving a job", "job", j.ID, "err", err)
	}
	return j, ok
}

// record keeps a run's outcome as the job's last error (cleared by a run
// that went well).
func (s *Scheduler) record(id string, runErr error) {
	msg := ""
	if runErr != nil {
		msg = runErr.Error()
		s.log.Warn("cron job failed", "job", id, "err", runErr)
	}
	// The run may end after the scheduler's context (a turn stopped at
	// shutdown): its outcome is kept all the same.
	ctx := context.Background()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.st.SetCronErr(ctx, id, msg); err != nil && !errors.Is(err, store.ErrNotFound) { // not found: removed meanwhile
		s.log.Warn("cron: saving a job", "job", id, "err", err)
	}
}

// settleOwed takes over the runs the last stop left owed: cron turns queued
// in their lane behind another turn that had not started when the gateway
// stopped (or crashed). Each job's schedule moved on when it fired, so
// without this the run would be lost, a one-shot's for good. The job is
// made due again rather than run here, so the first tick collapses it with
// a run missed while the gateway was down: one run, not two. A cron turn
// that was running when the gateway stopped is not owed: the gateway ends
// it like a person's turn, without running it again, since what it did so
// far (its tools' side effects) would be done twice.
func (s *Scheduler) settleOwed(ctx context.Context) {
	owed, err := s.owed, s.owedErr
	s.owed = nil
	if s.Replica {
		return
	}
	if err != nil {
		s.log.Warn("cron: listing owed runs", "err", err)
		return
	}
	settled := map[string]error{} // per job: one owed run is all a job owes
	for _, q := range owed {
		err, seen := settled[q.CronJob]
		if !seen {
			err = s.owe(ctx, q.CronJob)
			settled[q.CronJob] = err
		}
		if err != nil {
			// The row stays: the next start tries again.
			s.log.Warn("cron: an owed run", "job", q.CronJob, "err", err)
			continue
		}
		// Forgotten only once the job is due: a crash in between makes
		// the next start do it again, which changes nothing.
		if err := s.st.ForgetTurn(ctx, q.MessageID); err != nil {
			s.log.Warn("cron: forgetting an owed run", "job", q.CronJob, "err", err)
		}
	}
	if len(owed) > 0 {
		s.log.Info("cron: runs left queued at the last stop are due again", "runs", len(owed), "jobs", len(settled))
	}
}

// owe makes job id due at the time it last fired, when it owes that run.
func (s *Scheduler) owe(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.st.CronJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil // removed since: nothing is owed
	}
	if err != nil {
		return err
	}
	at := j.LastRun
	if at.IsZero() {
		at = s.Now()
	}
	switch {
	case j.Enabled:
		if !j.NextRun.IsZero() && !j.NextRun.After(at) {
			return nil // due already
		}
	case j.NextRun.IsZero():
		// A one-shot that fired (or a schedule that went bad): it runs
		// once more, and the tick ends it again.
		j.Enabled = true
	default:
		return nil // paused since it fired: the pause wins
	}
	j.NextRun = at
	return s.st.SetCronState(ctx, j.ID, j.Enabled, j.NextRun)
}

// Job actions, as the CLI, /cron and the agent's cronjob tool name them.
const (
	ActPause  = "pause"
	ActResume = "resume"
	ActRemove = "rm"
	ActRun    = "run"
)

// Act pauses, resumes, removes or runs a job (action is one of the Act
// constants; "remove" is taken for rm) and returns the job as it is after:
// as it was, for a removal. An unknown id is a CodeNotFound error.
func Act(ctx context.Context, st Store, action, id string, now time.Time) (store.CronJob, error) {
	if action == "remove" {
		action = ActRemove
	}
	switch action {
	case ActPause, ActResume, ActRemove, ActRun:
	default:
		return store.CronJob{}, ErrUnknownAction.New(action)
	}
	j, err := st.CronJob(ctx, id)
	if err != nil {
		return j, lookupErr(err, ErrUnknownJob, id)
	}
	switch action {
	case ActRemove:
		return j, lookupErr(st.DeleteCronJob(ctx, id), ErrUnknownJob, id)
	case ActPause:
		j.Enabled = false
	case ActResume:
		next, _, err := Next(j.Schedule, now)
		if err != nil {
			return j, ErrResume.New(j.ID, err)
		}
		j.Enabled, j.NextRun = true, next
	case ActRun:
		// Due now: the scheduler's next tick runs it. A paused job is
		// resumed by it; a finished one-shot runs once more.
		j.Enabled, j.NextRun = true, now
	}
	if action == ActPause {
		return j, lookupErr(st.PauseCronJob(ctx, j.ID), ErrUnknownJob, id)
	}
	return j, lookupErr(st.SetCronState(ctx, j.ID, j.Enabled, j.NextRun), ErrUnknownJob, id)
}

// RunNow makes a job due at once (irisgate cron run, /cron run).
func RunNow(ctx context.Context, st Store, id string, now time.Time) error {
	_, err := Act(ctx, st, ActRun, id, now)
	return err
}

// State is a job's state in a word: on, paused, or done (a one-shot that
// ran).
func State(j store.CronJob) string {
	switch {
	case j.Enabled:
		return "on"
	case j.NextRun.IsZero():
		return "done"
	}
	return "paused"
}

// When formats a job's time for people and the model alike: local time
// with its zone, "-" for none.
func When(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04 MST")
}

// Line describes a job in one line: id, name, schedule, target, state and
// the next run or last error (for /cron list and the agent's tool).
func Line(j store.CronJob) string {
	target := j.ChatID
	if j.ThreadID != "" {
		target += "/" + j.ThreadID
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %q  [%s]  in %s  %s", j.ID, j.Name, j.Schedule, target, State(j))
	if j.Enabled {
		b.WriteString(", next " + When(j.NextRun))
	}
	if j.LastErr != "" {
		b.WriteString(", last error: " + j.LastErr)
	}
	return b.String()
}
