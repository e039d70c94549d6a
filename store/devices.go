package store

import (
	"context"
	"database/sql"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// Device is what the gateway remembers of a device between connections.
type Device struct {
	ID               string
	Name             string
	FCMToken         string
	NtfyTopic        string
	WebPush          *record.WebPush // nil: none
	LastPushedCursor int64
	// TokenID is the token the device last said hello with (a stored
	// token's id, or the gateway's name for a configured one): revoking
	// it ends the device's push registration. Empty for devices last
	// seen before irisgate kept it.
	TokenID string
	// Revoked says that TokenID was a stored token that is gone (read by
	// Device only).
	Revoked bool
}

// devicesTokenSchema remembers each device's token.
const devicesTokenSchema = `
ALTER TABLE devices ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
CREATE INDEX devices_token ON devices (token_id) WHERE token_id != '';
`

// tokenAlive is the condition, on a devices row, that its token has not
// been revoked: stored tokens (tok_…) must still be in the tokens table;
// configured ones (env, bindings, delivery tokens) cannot be revoked.
const tokenAlive = `(token_id NOT LIKE 'tok\_%' ESCAPE '\' OR token_id IN (SELECT id FROM tokens))`

// Device loads a device; a device never seen has zero fields but its ID.
func (s *Store) Device(ctx context.Context, id string) (Device, error) {
	d := Device{ID: id}
	var webPush []byte
	err := s.pointRow(ctx, `SELECT name, fcm_token, ntfy_topic, webpush, last_pushed_cursor, token_id, NOT `+tokenAlive+`
		FROM devices WHERE device_id = ?`, id).
		Scan(&d.Name, &d.FCMToken, &d.NtfyTopic, &webPush, &d.LastPushedCursor, &d.TokenID, &d.Revoked)
	if err == sql.ErrNoRows {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.WebPush, err = decodeWebPush(d.ID, webPush)
	return d, err
}

// LastPushed returns the newest cursor that woke a device (0 for a device
// never pushed): what hello reports. It reads that column alone, so a
// device whose push registration does not decode still connects.
func (s *Store) LastPushed(ctx context.Context, id string) (int64, error) {
	var c int64
	err := s.pointRow(ctx, `SELECT last_pushed_cursor FROM devices WHERE device_id = ?`, id).Scan(&c)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return c, err
}

// DeviceName returns the name a device gave at hello ("" for none), read
// alone like LastPushed.
func (s *Store) DeviceName(ctx context.Context, id string) (string, error) {
	var name string
	err := s.pointRow(ctx, `SELECT name FROM devices WHERE device_id = ?`, id).Scan(&name)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return name, err
}

// decodeWebPush reads a devices.webpush column ("" for none).
func decodeWebPush(deviceID string, b []byte) (*record.WebPush, error) {
	if len(b) == 0 {
		return nil, nil
	}
	w, err := record.DecodeWebPush(b)
	if err != nil {
		return nil, &CorruptError{Table: "devices", Key: deviceID + " webpush", Err: err}
	}
	return &w, nil
}

// seeDevice is SeeDevice's upsert.
const seeDevice = `INSERT INTO devices (device_id, name, fcm_token, ntfy_topic, token_id, last_seen) VALUES (?,?,?,?,?,?)
		ON CONFLICT (device_id) DO UPDATE SET name = CASE WHEN excluded.name != '' THEN excluded.name ELSE name END,
		fcm_token = CASE WHEN excluded.fcm_token != '' THEN excluded.fcm_token ELSE fcm_token END,
		ntfy_topic = CASE WHEN excluded.ntfy_topic != '' THEN excluded.ntfy_topic ELSE ntfy_topic END,
		token_id = CASE WHEN excluded.token_id != '' THEN excluded.token_id ELSE token_id END,
		last_seen = excluded.last_seen`

// SeeDevice records a device's name and token (and push registration,
// when given) at hello.
func (s *Store) SeeDevice(ctx context.Context, d Device) error {
	defer s.inserting(d.ID)()
	_, err := s.exec(ctx, seeDevice, d.ID, d.Name, d.FCMToken, d.NtfyTopic, d.TokenID, now())
	return err
}

// SeeDevice is Store.SeeDevice inside the group commit, where many
// hellos share one transaction; it returns the newest cursor that woke
// the device (0 for one never pushed), as LastPushed does.
func (t *sqliteTx) SeeDevice(d Device) (lastPushed int64, err error) {
	defer t.s.inserting(d.ID)()
	err = t.queryRow(seeDevice+` RETURNING last_pushed_cursor`, d.ID, d.Name, d.FCMToken, d.NtfyTopic, d.TokenID, now()).Scan(&lastPushed)
	return lastPushed, err
}

// SeeDeviceProofs is SeeDevice that also returns the device's proven
// cursors (LoadProofs's answer), read by the same statement: a hello
// then makes one statement of the store instead of two.
func (t *sqliteTx) SeeDeviceProofs(d Device) (lastPushed int64, proven []core.CursorRange, err error) {
	defer t.s.inserting(d.ID)()
	var enc string
	err = t.queryRow(seeDevice+` RETURNING last_pushed_cursor, proven`, d.ID, d.Name, d.FCMToken, d.NtfyTopic, d.TokenID, now()).Scan(&lastPushed, &enc)
	if err != nil {
		return 0, nil, err
	}
	if enc != "" {
		proven = record.DecodeProven(enc)
	}
	return lastPushed, proven, nil
}

// DropPushOfRevoked ends the push registrations of the devices whose
// stored token is gone (tokenID: of that token only; "": of any), with
// the pushes queued for them, and returns how many devices had one. A
// revoked token's phone, stolen say, is woken no more.
func (s *Store) DropPushOfRevoked(ctx context.Context, tokenID string) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sqliteTx) error {
		var err error
		n, err = dropPushOf(tx, tokenID)
		return err
	})
	return int(n), err
}

func dropPushOf(tx *sqliteTx, tokenID string) (int64, error) {
	which := `token_id = ? AND NOT ` + tokenAlive
	args := []any{tokenID}
	if tokenID == "" {
		which, args = `token_id != '' AND NOT `+tokenAlive, nil
	}
	if _, err := tx.exec(`DELETE FROM push_queue WHERE device_id IN (SELECT device_id FROM devices WHERE `+which+`)`, args...); err != nil {
		return 0, err
	}
	res, err := tx.exec(`UPDATE devices SET fcm_token = '', ntfy_topic = '', webpush = ''
		WHERE `+which+` AND (fcm_token != '' OR ntfy_topic != '' OR webpush != '')`, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// StaleDevices lists up to limit devices without a push registration
// that are past the bounds: the rows beyond the keep most recently seen,
// and any last seen before before (Unix ms). Devices seen in the same
// millisecond are told apart by their rows' age, the newest kept: a burst
// of invented device ids must not keep its first ones by chance.
func (s *Store) StaleDevices(ctx context.Context, keep int, before int64, limit int) ([]string, error) {
	rows, err := s.query(ctx, `SELECT device_id FROM devices WHERE fcm_token = '' AND ntfy_topic = '' AND webpush = ''
		AND (last_seen < ? OR device_id NOT IN (SELECT device_id FROM devices WHERE fcm_token = '' AND ntfy_topic = '' AND webpush = ''
			ORDER BY last_seen DESC, rowid DESC LIMIT ?)) LIMIT ?`, before, keep, limit)
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
// cursor); a device that comes back starts afresh.
func (s *Store) DeleteDevices(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	in, args := inList(ids)
	_, err := s.exec(ctx, `DELETE FROM devices WHERE device_id IN `+in, args...)
	if err == nil {
		s.devs.drop(ids)
	}
	return err
}

// LoadProofs returns the outbox cursors a device is proven to have (none
// for a device never seen); package hub keeps them while it is connected.
func (s *Store) LoadProofs(ctx context.Context, id string) ([]core.CursorRange, error) {
	var proven string
	err := s.pointRow(ctx, `SELECT proven FROM devices WHERE device_id = ?`, id).Scan(&proven)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return record.DecodeProven(proven), nil
}

// HelloState reads what a hello tells a known device, in one statement:
// the newest cursor that woke it (as LastPushed) and its proven cursors
// (as LoadProofs); zero values for a device never seen, which the set of
// known devices answers without the table.
func (s *Store) HelloState(ctx context.Context, id string) (lastPushed int64, proven []core.CursorRange, err error) {
	if s.devs.absent(id) {
		return 0, nil, ctx.Err()
	}
	var enc string
	err = s.pointRow(ctx, `SELECT last_pushed_cursor, proven FROM devices WHERE device_id = ?`, id).Scan(&lastPushed, &enc)
	if err == sql.ErrNoRows {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	if enc != "" {
		proven = record.DecodeProven(enc)
	}
	return lastPushed, proven, nil
}

// SaveProofs stores the device's proven cursors, replacing the old set.
func (s *Store) SaveProofs(ctx context.Context, id string, proven []core.CursorRange) error {
	defer s.inserting(id)()
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, proven, last_seen) VALUES (?,?,?)
		ON CONFLICT (device_id) DO UPDATE SET proven = excluded.proven, last_seen = excluded.last_seen`, id, record.EncodeProven(proven), now())
	return err
}

// SetPushRegistration updates a device's push addresses (fcm.register).
func (s *Store) SetPushRegistration(ctx context.Context, id, fcmToken, ntfyTopic string) error {
	defer s.inserting(id)()
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, fcm_token, ntfy_topic, last_seen) VALUES (?,?,?,?)
		ON CONFLICT (device_id) DO UPDATE SET fcm_token = excluded.fcm_token, ntfy_topic = excluded.ntfy_topic`, id, fcmToken, ntfyTopic, now())
	return err
}
