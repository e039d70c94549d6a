package postgres

import (
	"context"
	"time"

	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// EnqueuePush queues a push, merging it with one pending for the same
// device and collapse key, by package store's rules: the more urgent one's
// content is kept (the newer on a tie), the newer cursor, and a push still
// waiting out its hold keeps its time.
func (s *Store) EnqueuePush(ctx context.Context, j store.PushJob, now time.Time) error {
	if j.Priority == 0 {
		j.Priority = 3
	}
	_, err := s.exec(ctx, `INSERT INTO push_queue AS q (device_id, collapse, cursor, title, body, chat_id, thread_id, kind, priority, message_id, next_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)
		ON CONFLICT (device_id, collapse) DO UPDATE SET
		title = CASE WHEN excluded.priority >= q.priority THEN excluded.title ELSE q.title END,
		body = CASE WHEN excluded.priority >= q.priority THEN excluded.body ELSE q.body END,
		kind = CASE WHEN excluded.priority >= q.priority THEN excluded.kind ELSE q.kind END,
		message_id = CASE WHEN excluded.priority >= q.priority AND excluded.message_id != '' THEN excluded.message_id ELSE q.message_id END,
		priority = GREATEST(q.priority, excluded.priority),
		cursor = GREATEST(q.cursor, excluded.cursor),
		chat_id = excluded.chat_id, thread_id = excluded.thread_id,
		next_at = CASE WHEN q.attempts = 0 AND q.next_at > $12 THEN q.next_at ELSE excluded.next_at END,
		attempts = 0, last_err = '', gen = q.gen + 1`,
		j.DeviceID, j.Collapse, j.Cursor, j.Title, j.Body, j.ChatID, j.ThreadID, j.Kind, j.Priority, j.MessageID, j.NextAt.UnixMilli(),
		now.UnixMilli())
	return err
}

// DuePushes returns up to limit pushes due at now, oldest first.
func (s *Store) DuePushes(ctx context.Context, now time.Time, limit int) ([]store.PushJob, error) {
	rows, err := s.query(ctx, `SELECT id, device_id, collapse, cursor, title, body, chat_id, thread_id, kind, priority, message_id, attempts, next_at, last_err, gen
		FROM push_queue WHERE next_at <= $1 ORDER BY next_at, id LIMIT $2`, now.UnixMilli(), limit)
	if err != nil {
		return nil, err
	}
	return scanPushes(rows, false)
}

// scanPushes reads push_queue rows in its column order (id … gen, then
// claimed_until when claimed).
func scanPushes(rs rows, claimed bool) ([]store.PushJob, error) {
	defer rs.Close()
	var out []store.PushJob
	for rs.Next() {
		var j store.PushJob
		var next int64
		dest := []any{&j.ID, &j.DeviceID, &j.Collapse, &j.Cursor, &j.Title, &j.Body, &j.ChatID, &j.ThreadID, &j.Kind, &j.Priority, &j.MessageID, &j.Attempts, &next, &j.LastErr, &j.Gen}
		if claimed {
			dest = append(dest, &j.Claim)
		}
		if err := rs.Scan(dest...); err != nil {
			return nil, err
		}
		j.NextAt = time.UnixMilli(next)
		out = append(out, j)
	}
	return out, rs.Err()
}

// PendingPushes counts queued pushes (for tests and metrics).
func (s *Store) PendingPushes(ctx context.Context) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM push_queue`).Scan(&n)
	return n, err
}

// ClaimPushes hands out up to limit pushes due at now, oldest first, to
// one sender among several replicas: each is claimed until until (rows
// another replica is claiming are skipped, not waited for: FOR UPDATE
// SKIP LOCKED), so no other hands it out again before then. A claim
// outlives a sender that died mid-send, and the push goes out again once
// it expires: at least once after a crash, never twice otherwise. It
// takes the pushes of at most devices devices (those with the oldest due
// pushes: a sender claims what it has workers for), leaving out those in
// busy (this replica's senders have them).
func (s *Store) ClaimPushes(ctx context.Context, now, until time.Time, devices, limit int, busy []string) ([]store.PushJob, error) {
	if busy == nil {
		busy = []string{}
	}
	rows, err := s.query(ctx, `UPDATE push_queue q SET claimed_until = $2
		FROM (SELECT id FROM push_queue WHERE next_at <= $1 AND claimed_until <= $1 AND device_id IN (
				SELECT device_id FROM push_queue WHERE next_at <= $1 AND claimed_until <= $1 AND NOT (device_id = ANY($4))
				GROUP BY device_id ORDER BY min(next_at), min(id) LIMIT $5)
			ORDER BY next_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) due
		WHERE q.id = due.id
		RETURNING q.id, q.device_id, q.collapse, q.cursor, q.title, q.body, q.chat_id, q.thread_id, q.kind, q.priority,
			q.message_id, q.attempts, q.next_at, q.last_err, q.gen, q.claimed_until`,
		now.UnixMilli(), until.UnixMilli(), limit, busy, devices)
	if err != nil {
		return nil, err
	}
	out, err := scanPushes(rows, true)
	store.SortDue(out) // RETURNING keeps no order
	return out, err
}

// DonePush removes a sent (or abandoned) push, unless newer news replaced
// it meanwhile (its Gen moved on): that is still to be sent, and its
// claim is let go so it goes out next.
func (s *Store) DonePush(ctx context.Context, j store.PushJob) error {
	tag, err := s.exec(ctx, `DELETE FROM push_queue WHERE id = $1 AND gen = $2`, j.ID, j.Gen)
	if err == nil && tag.RowsAffected() == 0 {
		err = s.ReleasePush(ctx, j)
	}
	return err
}

// RetryPush schedules another attempt of the version of the push that was
// tried, unclaimed; one replaced meanwhile is left to go out as it is.
func (s *Store) RetryPush(ctx context.Context, j store.PushJob, next time.Time, lastErr string) error {
	tag, err := s.exec(ctx, `UPDATE push_queue SET attempts = attempts + 1, next_at = $1, last_err = $2, claimed_until = 0 WHERE id = $3 AND gen = $4`,
		next.UnixMilli(), lastErr, j.ID, j.Gen)
	if err == nil && tag.RowsAffected() == 0 {
		err = s.ReleasePush(ctx, j)
	}
	return err
}

// ReleasePush lets go of j's claim, unsent (a sender stopping), if it is
// still this claim: one that expired and was claimed again is the other
// sender's.
func (s *Store) ReleasePush(ctx context.Context, j store.PushJob) error {
	if j.Claim == 0 {
		return nil
	}
	_, err := s.exec(ctx, `UPDATE push_queue SET claimed_until = 0 WHERE id = $1 AND claimed_until = $2`, j.ID, j.Claim)
	return err
}

// SetLastPushed records the newest cursor that woke a device.
func (s *Store) SetLastPushed(ctx context.Context, deviceID string, cursor int64) error {
	_, err := s.exec(ctx, `UPDATE devices SET last_pushed_cursor = GREATEST(last_pushed_cursor, $1) WHERE device_id = $2`, cursor, deviceID)
	return err
}

// DropPushRegistration forgets a registration its backend called gone.
func (s *Store) DropPushRegistration(ctx context.Context, deviceID, backend string) error {
	col := map[string]string{"fcm": "fcm_token", "ntfy": "ntfy_topic", "webpush": "webpush"}[backend]
	if col == "" {
		return nil
	}
	_, err := s.exec(ctx, `UPDATE devices SET `+col+` = '' WHERE device_id = $1`, deviceID)
	return err
}

// SetWebPush stores a device's Web Push subscription.
func (s *Store) SetWebPush(ctx context.Context, deviceID string, sub record.WebPush) error {
	body, err := record.EncodeWebPush(sub)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO devices (device_id, webpush, last_seen) VALUES ($1,$2,$3)
		ON CONFLICT (device_id) DO UPDATE SET webpush = excluded.webpush`, deviceID, string(body), now())
	if err == nil {
		s.corruptSaid.Delete(deviceID) // a new registration: its failure is news again
	}
	return err
}

// PushDevices lists devices with any push registration and a token that
// was not revoked. A device whose registration does not decode is left
// out, with a warning (once per device and run): it gets no push until it
// registers again, and the others get theirs.
func (s *Store) PushDevices(ctx context.Context) ([]store.Device, error) {
	// A device whose token was revoked is not woken, even before its
	// registration is dropped (a token deleted by hand, or by a replica
	// that died before it dropped them).
	rows, err := s.query(ctx, `SELECT device_id, name, fcm_token, ntfy_topic, webpush, last_pushed_cursor FROM devices
		WHERE (fcm_token != '' OR ntfy_topic != '' OR webpush != '') AND `+tokenAlive)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Device
	for rows.Next() {
		var d store.Device
		var webPush string
		if err := rows.Scan(&d.ID, &d.Name, &d.FCMToken, &d.NtfyTopic, &webPush, &d.LastPushedCursor); err != nil {
			return nil, err
		}
		if d.WebPush, err = decodeWebPush(d.ID, webPush); err != nil {
			if _, said := s.corruptSaid.LoadOrStore(d.ID, true); !said {
				s.log.Warn("postgres: a device's push registration does not decode; it gets no push until it registers again", "device", d.ID, "err", err)
			}
			continue
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
