package cron

import (
	"context"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Directory is the channel lookup Target needs.
type Directory interface {
	Channel(ctx context.Context, chatID string) (core.Channel, error)
	Channels(ctx context.Context) ([]core.Channel, error)
}

// Store is what the scheduler and the job actions need of the database:
// the jobs, the cron turns the last stop left owed, and the channels jobs
// post into. The CLI, the gateway and the scheduler write jobs at once,
// each touching only its own columns (see the store's methods).
type Store interface {
	Directory
	CronJobs(ctx context.Context) ([]store.CronJob, error)
	CronJob(ctx context.Context, id string) (store.CronJob, error)
	PutCronJob(ctx context.Context, j store.CronJob) error
	// FireCronJob reschedules a job only if its next run is still wasNext.
	FireCronJob(ctx context.Context, id string, wasNext, lastRun, nextRun time.Time, enabled bool) (bool, error)
	SetCronState(ctx context.Context, id string, enabled bool, nextRun time.Time) error
	SetCronErr(ctx context.Context, id, lastErr string) error
	PauseCronJob(ctx context.Context, id string) error
	DeleteCronJob(ctx context.Context, id string) error
	OwedCronRuns(ctx context.Context) ([]store.QueuedTurn, error)
	ForgetTurn(ctx context.Context, messageID string) error
}
