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
}

// Device loads a device; a device never seen has zero fields but its ID.
func (s *Store) Device(ctx context.Context, id string) (Device, error) {
	d := Device{ID: id}
	var webPush []byte
	err := s.queryRow(ctx, `SELECT name, fcm_token, ntfy_topic, webpush, last_pushed_cursor FROM devices WHERE device_id = ?`, id).
		Scan(&d.Name, &d.FCMToken, &d.NtfyTopic, &webPush, &d.LastPushedCursor)
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
	err := s.queryRow(ctx, `SELECT last_pushed_cursor FROM devices WHERE device_id = ?`, id).Scan(&c)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return c, err
}

// DeviceName returns the name a device gave at hello ("" for none), read
// alone like LastPushed.
func (s *Store) DeviceName(ctx context.Context, id string) (string, error) {
	var name string
	err := s.queryRow(ctx, `SELECT name FROM devices WHERE device_id = ?`, id).Scan(&name)
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

// SeeDevice records a device's name (and push registration, when given) at hello.
func (s *Store) SeeDevice(ctx context.Context, d Device) error {
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, name, fcm_token, ntfy_topic, last_seen) VALUES (?,?,?,?,?)
		ON CONFLICT (device_id) DO UPDATE SET name = CASE WHEN excluded.name != '' THEN excluded.name ELSE name END,
		fcm_token = CASE WHEN excluded.fcm_token != '' THEN excluded.fcm_token ELSE fcm_token END,
		ntfy_topic = CASE WHEN excluded.ntfy_topic != '' THEN excluded.ntfy_topic ELSE ntfy_topic END,
		last_seen = excluded.last_seen`, d.ID, d.Name, d.FCMToken, d.NtfyTopic, now())
	return err
}

// LoadProofs returns the outbox cursors a device is proven to have (none
// for a device never seen); package hub keeps them while it is connected.
func (s *Store) LoadProofs(ctx context.Context, id string) ([]core.CursorRange, error) {
	var proven string
	err := s.queryRow(ctx, `SELECT proven FROM devices WHERE device_id = ?`, id).Scan(&proven)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return record.DecodeProven(proven), nil
}

// SaveProofs stores the device's proven cursors, replacing the old set.
func (s *Store) SaveProofs(ctx context.Context, id string, proven []core.CursorRange) error {
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, proven, last_seen) VALUES (?,?,?)
		ON CONFLICT (device_id) DO UPDATE SET proven = excluded.proven, last_seen = excluded.last_seen`, id, record.EncodeProven(proven), now())
	return err
}

// SetPushRegistration updates a device's push addresses (fcm.register).
func (s *Store) SetPushRegistration(ctx context.Context, id, fcmToken, ntfyTopic string) error {
	_, err := s.exec(ctx, `INSERT INTO devices (device_id, fcm_token, ntfy_topic, last_seen) VALUES (?,?,?,?)
		ON CONFLICT (device_id) DO UPDATE SET fcm_token = excluded.fcm_token, ntfy_topic = excluded.ntfy_topic`, id, fcmToken, ntfyTopic, now())
	return err
}
