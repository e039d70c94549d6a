package store

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/irisgate/irisgate/store/record"
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
	// Priority ranks the pushes of one collapse group (ntfy's scale: 3
	// default, 4 high): the most urgent one is what the device is shown.
	Priority  int
	MessageID string
	Attempts  int
	NextAt    time.Time
	LastErr   string
	// Gen counts the changes to the row: a send finishes (DonePush,
	// RetryPush) only the version it sent, never news that replaced it
	// while the request was under way.
	Gen int64
	// Claim is when this sender's claim on it ends (ms; ClaimPushes): 0
	// for a push read without one (DuePushes).
	Claim int64
}

// SortDue orders pushes as they fall due: by time, then by age.
func SortDue(js []PushJob) {
	slices.SortFunc(js, func(a, b PushJob) int {
		return cmp.Or(a.NextAt.Compare(b.NextAt), cmp.Compare(a.ID, b.ID))
	})
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

// pushSchema2 ranks and versions queued pushes and names their message.
const pushSchema2 = `
ALTER TABLE push_queue ADD COLUMN priority INTEGER NOT NULL DEFAULT 3;
ALTER TABLE push_queue ADD COLUMN message_id TEXT NOT NULL DEFAULT '';
ALTER TABLE push_queue ADD COLUMN gen INTEGER NOT NULL DEFAULT 0;
`

// pushClaimSchema lets several senders work one queue (replicas on
// PostgreSQL; SQLite's one gateway claims too, so both stores keep one
// contract): a push being sent is claimed until claimed_until (ms).
const pushClaimSchema = `
ALTER TABLE push_queue ADD COLUMN claimed_until INTEGER NOT NULL DEFAULT 0;
`

// EnqueuePush queues a push, merging it with one pending for the same
// device and collapse key. Of the two, the more urgent one's content is
// kept (the newer on a tie): an approval's push is never turned into the
// ordinary message that followed it. The cursor is the newer one's, so
// last_pushed_cursor covers everything the group announced.
//
// A push still waiting out its hold (not yet due, never tried) keeps its
// time, so a burst of news goes out as one push when the first one's hold
// ends; any other (due, being sent, or waiting to be retried) restarts at
// j.NextAt with fresh retries: the news is newer.
func (s *Store) EnqueuePush(ctx context.Context, j PushJob, now time.Time) error {
	if j.Priority == 0 {
		j.Priority = 3
	}
	_, err := s.exec(ctx, `INSERT INTO push_queue (device_id, collapse, cursor, title, body, chat_id, thread_id, kind, priority, message_id, next_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (device_id, collapse) DO UPDATE SET
		title = CASE WHEN excluded.priority >= priority THEN excluded.title ELSE title END,
		body = CASE WHEN excluded.priority >= priority THEN excluded.body ELSE body END,
		kind = CASE WHEN excluded.priority >= priority THEN excluded.kind ELSE kind END,
		message_id = CASE WHEN excluded.priority >= priority AND excluded.message_id != '' THEN excluded.message_id ELSE message_id END,
		priority = MAX(priority, excluded.priority),
		cursor = MAX(cursor, excluded.cursor),
		chat_id = excluded.chat_id, thread_id = excluded.thread_id,
		next_at = CASE WHEN attempts = 0 AND next_at > ? THEN next_at ELSE excluded.next_at END,
		attempts = 0, last_err = '', gen = gen + 1`,
		j.DeviceID, j.Collapse, j.Cursor, j.Title, j.Body, j.ChatID, j.ThreadID, j.Kind, j.Priority, j.MessageID, j.NextAt.UnixMilli(),
		now.UnixMilli())
	return err
}

// DuePushes returns up to limit pushes due at now, oldest first.
func (s *Store) DuePushes(ctx context.Context, now time.Time, limit int) ([]PushJob, error) {
	rows, err := s.query(ctx, `SELECT id, device_id, collapse, cursor, title, body, chat_id, thread_id, kind, priority, message_id, attempts, next_at, last_err, gen
		FROM push_queue WHERE next_at <= ? ORDER BY next_at, id LIMIT ?`, now.UnixMilli(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PushJob
	for rows.Next() {
		var j PushJob
		var next int64
		if err := rows.Scan(&j.ID, &j.DeviceID, &j.Collapse, &j.Cursor, &j.Title, &j.Body, &j.ChatID, &j.ThreadID, &j.Kind, &j.Priority, &j.MessageID, &j.Attempts, &next, &j.LastErr, &j.Gen); err != nil {
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

// ClaimPushes hands out up to limit pushes due at now, oldest first,
// each claimed until until so that no sender hands it out again before
// then: those of at most devices devices (the oldest due first), leaving
// out the devices in busy (being sent to already). A claim
// outlives a sender that died mid-send: the push goes out again once it
// expires.
func (s *Store) ClaimPushes(ctx context.Context, now, until time.Time, devices, limit int, busy []string) ([]PushJob, error) {
	skip, err := json.Marshal(append([]string{}, busy...))
	if err != nil {
		return nil, err
	}
	// Looked for on a reader first: a quiet queue costs the writer, which
	// the group commit needs, nothing.
	var ids []int64
	found, err := s.query(ctx, `SELECT id FROM push_queue WHERE next_at <= ?1 AND claimed_until <= ?1 AND device_id IN (
			SELECT device_id FROM push_queue WHERE next_at <= ?1 AND claimed_until <= ?1
			AND device_id NOT IN (SELECT value FROM json_each(?2)) GROUP BY device_id ORDER BY min(next_at), min(id) LIMIT ?3)
		ORDER BY next_at, id LIMIT ?4`, now.UnixMilli(), string(skip), devices, limit)
	if err != nil {
		return nil, err
	}
	for found.Next() {
		var id int64
		if err := found.Scan(&id); err != nil {
			found.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	found.Close()
	if err := found.Err(); err != nil || len(ids) == 0 {
		return nil, err
	}
	want, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	// The conditions again: a push finished or claimed since is not taken.
	rows, err := s.queryWrite(ctx, `UPDATE push_queue SET claimed_until = ?3
		WHERE id IN (SELECT value FROM json_each(?1)) AND next_at <= ?2 AND claimed_until <= ?2
		RETURNING id, device_id, collapse, cursor, title, body, chat_id, thread_id, kind, priority, message_id, attempts, next_at, last_err, gen, claimed_until`,
		string(want), now.UnixMilli(), until.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PushJob
	for rows.Next() {
		var j PushJob
		var next int64
		if err := rows.Scan(&j.ID, &j.DeviceID, &j.Collapse, &j.Cursor, &j.Title, &j.Body, &j.ChatID, &j.ThreadID, &j.Kind, &j.Priority, &j.MessageID, &j.Attempts, &next, &j.LastErr, &j.Gen, &j.Claim); err != nil {
			return nil, err
		}
		j.NextAt = time.UnixMilli(next)
		out = append(out, j)
	}
	SortDue(out)
	return out, rows.Err()
}

// DonePush removes a sent (or abandoned) push, unless newer news replaced
// it meanwhile (its Gen moved on): that is still to be sent, and its
// claim is let go so it goes out next.
func (s *Store) DonePush(ctx context.Context, j PushJob) error {
	res, err := s.exec(ctx, `DELETE FROM push_queue WHERE id = ? AND gen = ?`, j.ID, j.Gen)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = s.ReleasePush(ctx, j)
		}
	}
	return err
}

// RetryPush schedules another attempt of the version of the push that was
// tried, unclaimed; one replaced meanwhile is left to go out as it is.
func (s *Store) RetryPush(ctx context.Context, j PushJob, next time.Time, lastErr string) error {
	res, err := s.exec(ctx, `UPDATE push_queue SET attempts = attempts + 1, next_at = ?, last_err = ?, claimed_until = 0 WHERE id = ? AND gen = ?`,
		next.UnixMilli(), lastErr, j.ID, j.Gen)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = s.ReleasePush(ctx, j)
		}
	}
	return err
}

// ReleasePush lets go of j's claim, unsent (a sender stopping), if it is
// still this claim.
func (s *Store) ReleasePush(ctx context.Context, j PushJob) error {
	if j.Claim == 0 {
		return nil
	}
	_, err := s.exec(ctx, `UPDATE push_queue SET claimed_until = 0 WHERE id = ? AND claimed_until = ?`, j.ID, j.Claim)
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

// SetWebPush stores a device's Web Push subscription.
func (s *Store) SetWebPush(ctx context.Context, deviceID string, sub record.WebPush) error {
	body, err := record.EncodeWebPush(sub)
	if err != nil {
		return err
	}
	defer s.inserting(deviceID)()
	_, err = s.exec(ctx, `INSERT INTO devices (device_id, webpush, last_seen) VALUES (?,?,?)
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
func (s *Store) PushDevices(ctx context.Context) ([]Device, error) {
	// A device whose token was revoked is not woken, even before its
	// registration is dropped (a token deleted by hand while the gateway
	// was down).
	rows, err := s.query(ctx, pushDevices)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Device
	for rows.Next() {
		var d Device
		var webPush []byte
		if err := rows.Scan(&d.ID, &d.Name, &d.FCMToken, &d.NtfyTopic, &webPush, &d.LastPushedCursor); err != nil {
			return nil, err
		}
		if d.WebPush, err = decodeWebPush(d.ID, webPush); err != nil {
			if _, said := s.corruptSaid.LoadOrStore(d.ID, true); !said {
				s.log.Warn("store: a device's push registration does not decode; it gets no push until it registers again", "device", d.ID, "err", err)
			}
			continue
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// devicesPushSchema indexes the devices that have a push registration.
// PushDevices runs for every event that wakes someone, and it scanned
// every device row (up to 10,000 without a registration are kept): about
// 1 ms an event at that bound, for the few rows it wants.
const devicesPushSchema = `
CREATE INDEX devices_push ON devices (device_id) WHERE fcm_token != '' OR ntfy_topic != '' OR webpush != '';
`

// pushDevices is PushDevices' query: its first term is devices_push's
// condition as written there, which is what lets SQLite use that index.
const pushDevices = `SELECT device_id, name, fcm_token, ntfy_topic, webpush, last_pushed_cursor FROM devices
	WHERE (fcm_token != '' OR ntfy_topic != '' OR webpush != '') AND ` + tokenAlive
