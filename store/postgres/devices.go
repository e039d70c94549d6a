package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
	"github.com/jackc/pgx/v5"
)

// tokenAlive is the condition, on a devices row, that its token was not
// revoked: a stored token (tok_…) must still be in tokens; a configured
// one (env, bindings, delivery tokens) cannot be revoked. Package store's
// rule, word for word.
const tokenAlive = `(token_id NOT LIKE 'tok\_%' ESCAPE '\' OR token_id IN (SELECT id FROM tokens))`

// Device loads a device; a device never seen has zero fields but its ID.
func (s *Store) Device(ctx context.Context, id string) (store.Device, error) {
	d := store.Device{ID: id}
	var webPush string
	err := s.queryRow(ctx, `SELECT name, fcm_token, ntfy_topic, webpush, last_pushed_cursor, token_id, NOT `+tokenAlive+`
		FROM devices WHERE device_id = $1`, id).
		Scan(&d.Name, &d.FCMToken, &d.NtfyTopic, &webPush, &d.LastPushedCursor, &d.TokenID, &d.Revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.WebPush, err = decodeWebPush(d.ID, webPush)
	return d, err
}

// LastPushed returns the newest cursor that woke a device (0 for a device
// never pushed), read alone, so a device whose push registration does not
// decode still connects.
func (s *Store) LastPushed(ctx context.Context, id string) (int64, error) {
	var c int64
	err := s.queryRow(ctx, `SELECT last_pushed_cursor FROM devices WHERE device_id = $1`, id).Scan(&c)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return c, err
}

// DeviceName returns the name a device gave at hello ("" for none).
func (s *Store) DeviceName(ctx context.Context, id string) (string, error) {
	var name string
	err := s.queryRow(ctx, `SELECT name FROM devices WHERE device_id = $1`, id).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return name, err
}

// decodeWebPush reads a devices.webpush column ("" for none).
func decodeWebPush(deviceID, b string) (*record.WebPush, error) {
	if b == "" {
		return nil, nil
	}
	w, err := record.DecodeWebPush([]byte(b))
	if err != nil {
		return nil, &store.CorruptError{Table: "devices", Key: deviceID + " webpush", Err: err}
	}
	return &w, nil
}

// seeDevice is SeeDevice's upsert.
const seeDevice = `INSERT INTO devices AS d (device_id, name, fcm_token, ntfy_topic, token_id, last_seen) VALUES ($1,$2,$3,$4,$5,$6)
		ON CONFLICT (device_id) DO UPDATE SET name = CASE WHEN excluded.name != '' THEN excluded.name ELSE d.name END,
		fcm_token = CASE WHEN excluded.fcm_token != '' THEN excluded.fcm_token ELSE d.fcm_token END,
		ntfy_topic = CASE WHEN excluded.ntfy_topic != '' THEN excluded.ntfy_topic ELSE d.ntfy_topic END,
		token_id = CASE WHEN excluded.token_id != '' THEN excluded.token_id ELSE d.token_id END,
		last_seen = excluded.last_seen`

// SeeDevice records a device's name and token (and push registration,
// when given) at hello.
func (s *Store) SeeDevice(ctx context.Context, d store.Device) error {
	_, err := s.exec(ctx, seeDevice, d.ID, d.Name, d.FCMToken, d.NtfyTopic, d.TokenID, now())
	return err
}

// SeeDevice is Store.SeeDevice inside the group commit; it returns the
// device's last_pushed_cursor.
func (t *Tx) SeeDevice(d store.Device) (lastPushed int64, err error) {
	args := []any{d.ID, d.Name, d.FCMToken, d.NtfyTopic, d.TokenID, now()}
	if !storable(args) {
		return 0, ErrNotText.New() // as exec says it: a query would find no row
	}
	err = t.queryRow(seeDevice+` RETURNING d.last_pushed_cursor`, args...).Scan(&lastPushed)
	return lastPushed, err
}

// DropPushOfRevoked ends the push registrations of the devices whose
// stored token is gone (tokenID: of that token only; "": of any), with
// the pushes queued for them, and returns how many devices had one. A
// revoked token's phone, stolen say, is woken no more.
func (s *Store) DropPushOfRevoked(ctx context.Context, tokenID string) (int, error) {
	if !isText(tokenID) {
		return 0, nil // no device can have said hello with it
	}
	var n int64
	err := s.write(ctx, func(tx *Tx) error {
		var err error
		n, err = tx.dropPushOf(tokenID)
		return err
	})
	return int(n), err
}

func (t *Tx) dropPushOf(tokenID string) (int64, error) {
	which := `token_id = $1 AND NOT ` + tokenAlive
	args := []any{tokenID}
	if tokenID == "" {
		which, args = `token_id != '' AND NOT `+tokenAlive, nil
	}
	if _, err := t.exec(`DELETE FROM push_queue WHERE device_id IN (SELECT device_id FROM devices WHERE `+which+`)`, args...); err != nil {
		return 0, err
	}
	tag, err := t.exec(`UPDATE devices SET fcm_token = '', ntfy_topic = '', webpush = ''
		WHERE `+which+` AND (fcm_token != '' OR ntfy_topic != '' OR webpush != '')`, args...)
	return tag.RowsAffected(), err
}

// StaleDevices lists up to limit devices without a push registration
// that are past the bounds: the rows beyond the keep most recently seen,
// and any last seen before before (Unix ms); the oldest first.
func (s *Store) StaleDevices(ctx context.Context, keep int, before int64, limit int) ([]string, error) {
	const unpushed = `fcm_token = '' AND ntfy_topic = '' AND webpush = ''`
	rows, err := s.query(ctx, `SELECT device_id FROM devices WHERE `+unpushed+`
		AND (last_seen < $1 OR device_id NOT IN (SELECT device_id FROM devices WHERE `+unpushed+`
			ORDER BY last_seen DESC, device_id LIMIT $2))
		ORDER BY last_seen, device_id LIMIT $3`, before, keep, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// DeleteDevices forgets devices (what they proved, their last pushed
// cursor); a device that comes back starts afresh. An id PostgreSQL's
// text cannot hold names no device, so there is nothing of it to forget.
func (s *Store) DeleteDevices(ctx context.Context, ids []string) error {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !isText(id) })
	if len(ids) == 0 {
		return nil
	}
	_, err := s.exec(ctx, `DELETE FROM devices WHERE device_id = ANY($1)`, ids)
	return err
}

// LoadProofs returns the outbox cursors a device is proven to have (none
// for a device never seen), stored as package store keeps them
// (record.EncodeProven).
func (s *Store) LoadProofs(ctx context.Context, id string) ([]core.CursorRange, error) {
	var proven string
	err := s.queryRow(ctx, `SELECT proven FROM devices WHERE device_id = $1`, id).Scan(&proven)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return record.DecodeProven(proven), nil
}

// SaveProofs stores the device's proven cursors, replacing the old set.
func (s *Store) SaveProofs(ctx context.Context, id string, proven []core.CursorRange) error {
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, proven, last_seen) VALUES ($1,$2,$3)
		ON CONFLICT (device_id) DO UPDATE SET proven = excluded.proven, last_seen = excluded.last_seen`, id, record.EncodeProven(proven), now())
	return err
}

// SetPushRegistration updates a device's push addresses (fcm.register).
func (s *Store) SetPushRegistration(ctx context.Context, id, fcmToken, ntfyTopic string) error {
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, fcm_token, ntfy_topic, last_seen) VALUES ($1,$2,$3,$4)
		ON CONFLICT (device_id) DO UPDATE SET fcm_token = excluded.fcm_token, ntfy_topic = excluded.ntfy_topic`, id, fcmToken, ntfyTopic, now())
	return err
}

// AddToken stores a token's hash.
func (s *Store) AddToken(ctx context.Context, t store.Token) error {
	_, err := s.exec(ctx, `INSERT INTO tokens (id, hash, name, device_id, created) VALUES ($1,$2,$3,$4,$5)`,
		t.ID, t.Hash, t.Name, t.DeviceID, t.Created.UnixMilli())
	return err
}

// Tokens lists all tokens, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]store.Token, error) {
	rows, err := s.query(ctx, `SELECT id, hash, name, device_id, created, last_used FROM tokens ORDER BY created, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		var t store.Token
		var created, used int64
		if err := rows.Scan(&t.ID, &t.Hash, &t.Name, &t.DeviceID, &created, &used); err != nil {
			return nil, err
		}
		t.Created = time.UnixMilli(created)
		if used > 0 {
			t.LastUsed = time.UnixMilli(used)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken deletes a token by id, and with it the push registrations
// of the devices that last said hello with it (DropPushOfRevoked), in one
// transaction; store.ErrNotFound when there is none.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	if !isText(id) {
		return store.ErrNotFound
	}
	return s.write(ctx, func(tx *Tx) error {
		tag, err := tx.exec(`DELETE FROM tokens WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		_, err = tx.dropPushOf(id)
		return err
	})
}

// TouchToken records a token's use.
func (s *Store) TouchToken(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `UPDATE tokens SET last_used = $1 WHERE id = $2`, now(), id)
	return err
}
