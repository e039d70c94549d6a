package store

import (
	"context"
	"time"
)

// PushJob is a push waiting to be sent (or retried).
type PushJob struct {
	ID       int64
	DeviceID string
	Collapse string
	Cursor   int64
	Title    string
	Body     string
	ChatID   string
	ThreadID string
	Kind     string
	Attempts int
	NextAt   time.Time
	LastErr  string
}

const pushSchema = `
CREATE TABLE push_queue (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	device_id TEXT NOT NULL,
	collapse  TEXT NOT NULL DEFAULT '',
	cursor    INTEGER NOT NULL DEFAULT 0,
	title     TEXT NOT NULL DEFAULT '',
	body      TEXT NOT NULL DEFAULT '',
	chat_id   TEXT NOT NULL DEFAULT '',
	thread_id TEXT NOT NULL DEFAULT '',
	kind      TEXT NOT NULL DEFAULT '',
	attempts  INTEGER NOT NULL DEFAULT 0,
	next_at   INTEGER NOT NULL,
	last_err  TEXT NOT NULL DEFAULT '',
	UNIQUE (device_id, collapse)
);
CREATE INDEX push_due ON push_queue (next_at);
ALTER TABLE devices ADD COLUMN webpush TEXT NOT NULL DEFAULT '';
`

// EnqueuePush queues a push, replacing one pending for the same device and
// collapse key (it restarts its retries: the news is newer).
func (s *Store) EnqueuePush(ctx context.Context, j PushJob) error {
	_, err := s.exec(ctx, `INSERT INTO push_queue (device_id, collapse, cursor, title, body, chat_id, thread_id, kind, next_at)
		VALUES (?,?,?,?,?,?,?,?,?)
		ON CONFLICT (device_id, collapse) DO UPDATE SET cursor = excluded.cursor, title = excluded.title, body = excluded.body,
		chat_id = excluded.chat_id, thread_id = excluded.thread_id, kind = excluded.kind, attempts = 0, next_at = excluded.next_at, last_err = ''`,
		j.DeviceID, j.Collapse, j.Cursor, j.Title, j.Body, j.ChatID, j.ThreadID, j.Kind, j.NextAt.UnixMilli())
	return err
}

// DuePushes returns up to limit pushes due at now, oldest first.
func (s *Store) DuePushes(ctx context.Context, now time.Time, limit int) ([]PushJob, error) {
	rows, err := s.query(ctx, `SELECT id, device_id, collapse, cursor, title, body, chat_id, thread_id, kind, attempts, next_at, last_err
		FROM push_queue WHERE next_at <= ? ORDER BY next_at, id LIMIT ?`, now.UnixMilli(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PushJob
	for rows.Next() {
		var j PushJob
		var next int64
		if err := rows.Scan(&j.ID, &j.DeviceID, &j.Collapse, &j.Cursor, &j.Title, &j.Body, &j.ChatID, &j.ThreadID, &j.Kind, &j.Attempts, &next, &j.LastErr); err != nil {
			return nil, err
		}
		j.NextAt = time.UnixMilli(next)
		out = append(out, j)
	}
	return out, rows.Err()
}

// PendingPushes counts queued pushes (for tests and metrics).
func (s *Store) PendingPushes(ctx context.Context) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM push_queue`).Scan(&n)
	return n, err
}

// DonePush removes a sent (or abandoned) push.
func (s *Store) DonePush(ctx context.Context, id int64) error {
	_, err := s.exec(ctx, `DELETE FROM push_queue WHERE id = ?`, id)
	return err
}

// RetryPush schedules another attempt.
func (s *Store) RetryPush(ctx context.Context, id int64, next time.Time, lastErr string) error {
	_, err := s.exec(ctx, `UPDATE push_queue SET attempts = attempts + 1, next_at = ?, last_err = ? WHERE id = ?`, next.UnixMilli(), lastErr, id)
	return err
}

// SetLastPushed records the newest cursor that woke a device.
func (s *Store) SetLastPushed(ctx context.Context, deviceID string, cursor int64) error {
	_, err := s.exec(ctx, `UPDATE devices SET last_pushed_cursor = MAX(last_pushed_cursor, ?) WHERE device_id = ?`, cursor, deviceID)
	return err
}

// DropPushRegistration forgets a registration its backend called gone.
func (s *Store) DropPushRegistration(ctx context.Context, deviceID, backend string) error {
	col := map[string]string{"fcm": "fcm_token", "ntfy": "ntfy_topic", "webpush": "webpush"}[backend]
	if col == "" {
		return nil
	}
	_, err := s.exec(ctx, `UPDATE devices SET `+col+` = '' WHERE device_id = ?`, deviceID)
	return err
}

// SetWebPush stores a device's Web Push subscription (JSON).
func (s *Store) SetWebPush(ctx context.Context, deviceID, subscription string) error {
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, webpush, last_seen) VALUES (?,?,?)
		ON CONFLICT (device_id) DO UPDATE SET webpush = excluded.webpush`, deviceID, subscription, now())
	return err
}

// PushDevices lists devices with any push registration.
func (s *Store) PushDevices(ctx context.Context) ([]Device, error) {
	rows, err := s.query(ctx, `SELECT device_id, name, fcm_token, ntfy_topic, webpush, last_pushed_cursor FROM devices
		WHERE fcm_token != '' OR ntfy_topic != '' OR webpush != ''`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Device
	for rows.Next() {
		var d Device
		if err := rows.Scan(&d.ID, &d.Name, &d.FCMToken, &d.NtfyTopic, &d.WebPush, &d.LastPushedCursor); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
