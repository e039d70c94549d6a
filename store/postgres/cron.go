package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/irisgate/irisgate/store"
	"github.com/jackc/pgx/v5"
)

const cronCols = `id, name, schedule, prompt, text, chat_id, thread_id, enabled, last_run, next_run, last_err, created`

func scanCron(r scanner) (store.CronJob, error) {
	var j store.CronJob
	var last, next, created int64
	err := r.Scan(&j.ID, &j.Name, &j.Schedule, &j.Prompt, &j.Text, &j.ChatID, &j.ThreadID, &j.Enabled, &last, &next, &j.LastErr, &created)
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
func (s *Store) PutCronJob(ctx context.Context, j store.CronJob) error {
	_, err := s.exec(ctx, `INSERT INTO cron_jobs (`+cronCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)
		ON CONFLICT (id) DO UPDATE SET name=excluded.name, schedule=excluded.schedule, prompt=excluded.prompt, text=excluded.text,
		chat_id=excluded.chat_id, thread_id=excluded.thread_id, enabled=excluded.enabled, last_run=excluded.last_run,
		next_run=excluded.next_run, last_err=excluded.last_err`,
		j.ID, j.Name, j.Schedule, j.Prompt, j.Text, j.ChatID, j.ThreadID, j.Enabled, timeMs(j.LastRun), timeMs(j.NextRun), j.LastErr, timeMs(j.Created))
	return err
}

// The scheduler, the CLI and the agent's tool change jobs at the same
// time; each of these writes only the columns it means to change, so none
// reverts another's.

// FireCronJob records that a job fired at lastRun and fires next at
// nextRun (enabled false: never again), provided it is still enabled and
// due at wasNext. false means it changed meanwhile (paused, rescheduled,
// removed, or fired by another replica) and must not run: the conditional
// UPDATE is what lets only one of several schedulers fire a run.
func (s *Store) FireCronJob(ctx context.Context, id string, wasNext, lastRun, nextRun time.Time, enabled bool) (bool, error) {
	tag, err := s.exec(ctx, `UPDATE cron_jobs SET last_run = $1, next_run = $2, enabled = $3 WHERE id = $4 AND enabled AND next_run = $5`,
		timeMs(lastRun), timeMs(nextRun), enabled, id, timeMs(wasNext))
	if errors.Is(err, ErrNotText) {
		return false, nil // no job has that id
	}
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// PauseCronJob disables a job, leaving when it last ran and would run
// next as they are.
func (s *Store) PauseCronJob(ctx context.Context, id string) error {
	return s.updateCron(ctx, `UPDATE cron_jobs SET enabled = false WHERE id = $1`, id)
}

// SetCronState enables or disables a job and sets its next run.
func (s *Store) SetCronState(ctx context.Context, id string, enabled bool, nextRun time.Time) error {
	return s.updateCron(ctx, `UPDATE cron_jobs SET enabled = $1, next_run = $2 WHERE id = $3`, enabled, timeMs(nextRun), id)
}

// SetCronErr keeps a run's outcome ("" for a run that went well).
func (s *Store) SetCronErr(ctx context.Context, id, lastErr string) error {
	return s.updateCron(ctx, `UPDATE cron_jobs SET last_err = $1 WHERE id = $2`, lastErr, id)
}

func (s *Store) updateCron(ctx context.Context, q string, args ...any) error {
	tag, err := s.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// CronJobs lists jobs by creation.
func (s *Store) CronJobs(ctx context.Context) ([]store.CronJob, error) {
	rows, err := s.query(ctx, `SELECT `+cronCols+` FROM cron_jobs ORDER BY created, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.CronJob
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
func (s *Store) CronJob(ctx context.Context, id string) (store.CronJob, error) {
	j, err := scanCron(s.queryRow(ctx, `SELECT `+cronCols+` FROM cron_jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return j, store.ErrNotFound
	}
	return j, err
}

// DeleteCronJob removes a job.
func (s *Store) DeleteCronJob(ctx context.Context, id string) error {
	if !isText(id) {
		return store.ErrNotFound
	}
	return s.updateCron(ctx, `DELETE FROM cron_jobs WHERE id = $1`, id)
}
