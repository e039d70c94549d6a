package push

import (
	"context"
	"time"

	"github.com/irisgate/irisgate/store"
)

// Store is what the pusher needs of the database: the queue of pushes and
// the devices' push registrations. The queue's rules (merging a burst per
// device and collapse key, versions a send finishes) are the store's; see
// store.EnqueuePush. Several replicas work one queue: each push is claimed
// by one sender at a time (store.ClaimPushes).
type Store interface {
	Device(ctx context.Context, id string) (store.Device, error)
	EnqueuePush(ctx context.Context, j store.PushJob, now time.Time) error
	// ClaimPushes hands out due pushes to this sender alone until until,
	// leaving out the devices in busy; ReleasePush gives one back unsent.
	ClaimPushes(ctx context.Context, now, until time.Time, devices, limit int, busy []string) ([]store.PushJob, error)
	ReleasePush(ctx context.Context, j store.PushJob) error
	DonePush(ctx context.Context, j store.PushJob) error
	RetryPush(ctx context.Context, j store.PushJob, next time.Time, lastErr string) error
	SetLastPushed(ctx context.Context, deviceID string, cursor int64) error
	DropPushRegistration(ctx context.Context, deviceID, backend string) error
}
