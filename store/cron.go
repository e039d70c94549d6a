package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// CronJob is a scheduled prompt (or fixed text) that posts into a channel.
type CronJob struct {
	ID       string
	Name     string
	Schedule string // as the person wrote it: "*/5 * * * *", "every 30m", "30m", an ISO time
	Prompt   string // run through the agent…
	Text     string // …or posted as is
	ChatID   string
	ThreadID string
	Enabled  bool
	LastRun  time.Time
	NextRun  time.Time // zero: never again (a finished one-shot)
	LastErr  string
	Created  time.Time
}

const cronSchema = `
CREATE TABLE cron_jobs (
	id        TEXT PRIMARY KEY,
	name      TEXT NOT NULL DEFAULT '',
	schedule  TEXT NOT NULL,
	prompt    TEXT NOT NULL DEFAULT '',
	text      TEXT NOT NULL DEFAULT '',
	chat_id   TEXT NOT NULL,
	thread_id TEXT NOT NULL DEFAULT '',
	enabled   INTEGER NOT NULL DEFAULT 1,
	last_run  INTEGER NOT NULL DEFAULT 0,
	next_run  INTEGER NOT NULL DEFAULT 0,
	last_err  TEXT NOT NULL DEFAULT '',
	created   INTEGER NOT NULL
);
`

const cronCols = `id, name, schedule, prompt, text, chat_id, thread_id, enabled, last_run, next_run, last_err, created`

func scanCron(r scanner) (CronJob, error) {
	var j CronJob
	var enabled int
	var last, next, created int64
	err := r.Scan(&j.ID, &j.Name, &j.Schedule, &j.Prompt, &j.Text, &j.ChatID, &j.ThreadID, &enabled, &last, &next, &j.LastErr, &created)
	j.Enabled = enabled == 1
	j.LastRun, j.NextRun, j.Created = msTime(last), msTime(next), msTime(created)
	return j, err
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func timeMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// PutCronJob inserts or replaces a job.
func (s *Store) PutCronJob(ctx context.Context, j CronJob) error {
	_, err := s.exec(ctx, `INSERT INTO cron_jobs (`+cronCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (id) DO UPDATE SET name=excluded.name, schedule=excluded.schedule, prompt=excluded.prompt, text=excluded.text,
		chat_id=excluded.chat_id, thread_id=excluded.thread_id, enabled=excluded.enabled, last_run=excluded.last_run,
		next_run=excluded.next_run, last_err=excluded.last_err`,
		j.ID, j.Name, j.Schedule, j.Prompt, j.Text, j.ChatID, j.ThreadID, b2i(j.Enabled), timeMs(j.LastRun), timeMs(j.NextRun), j.LastErr, timeMs(j.Created))
	return err
}

// The scheduler, the CLI (another process) and the agent's tool change
// jobs at the same time; each of these writes only the columns it means to
// change, so none reverts another's.

// FireCronJob records that a job fired at lastRun and fires next at
// nextRun (enabled false: never again), provided it is still enabled and
// due at wasNext. false means it changed meanwhile (paused, rescheduled,
// removed) and must not run.
func (s *Store) FireCronJob(ctx context.Context, id string, wasNext, lastRun, nextRun time.Time, enabled bool) (bool, error) {
	res, err := s.exec(ctx, `UPDATE cron_jobs SET last_run = ?, next_run = ?, enabled = ? WHERE id = ? AND enabled = 1 AND next_run = ?`,
		timeMs(lastRun), timeMs(nextRun), b2i(enabled), id, timeMs(wasNext))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// PauseCronJob disables a job, leaving when it last ran and would run
// next as they are.
func (s *Store) PauseCronJob(ctx context.Context, id string) error {
	return s.updateCron(ctx, `UPDATE cron_jobs SET enabled = 0 WHERE id = ?`, id)
}

// SetCronState enables or disables a job and sets its next run.
func (s *Store) SetCronState(ctx context.Context, id string, enabled bool, nextRun time.Time) error {
	return s.updateCron(ctx, `UPDATE cron_jobs SET enabled = ?, next_run = ? WHERE id = ?`, b2i(enabled), timeMs(nextRun), id)
}

// SetCronErr keeps a run's outcome ("" for a run that went well).
func (s *Store) SetCronErr(ctx context.Context, id, lastErr string) error {
	return s.updateCron(ctx, `UPDATE cron_jobs SET last_err = ? WHERE id = ?`, lastErr, id)
}

func (s *Store) updateCron(ctx context.Context, q string, args ...any) error {
	res, err := s.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// CronJobs lists jobs by creation.
func (s *Store) CronJobs(ctx context.Context) ([]CronJob, error) {
	rows, err := s.query(ctx, `SELECT `+cronCols+` FROM cron_jobs ORDER BY created, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []CronJob
	for rows.Next() {
		j, err := scanCron(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// CronJob loads one job.
func (s *Store) CronJob(ctx context.Context, id string) (CronJob, error) {
	j, err := scanCron(s.pointRow(ctx, `SELECT `+cronCols+` FROM cron_jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, ErrNotFound
	}
	return j, err
}

// DeleteCronJob removes a job.
func (s *Store) DeleteCronJob(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `DELETE FROM cron_jobs WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}
