package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/jackc/pgx/v5"
)

// Media rows: blobs (the content store's files, counted by the rows that
// use them), media (files in messages) and uploads (a device's
// acknowledged uploads waiting for a message). Triggers keep the counts
// (migrations/00001_schema.sql), as in SQLite.

// PutBlob records that the content store holds a file with this sha256
// (nothing happens when it is known already). Its count starts at zero:
// the rows that use it count themselves.
func (t *Tx) PutBlob(sha256 string, size int64) error {
	_, err := t.exec(`INSERT INTO blobs (sha256, size, created) VALUES ($1,$2,$3) ON CONFLICT (sha256) DO NOTHING`, sha256, size, now())
	return err
}

// PutUpload records a device's acknowledged upload under its ref,
// replacing an earlier upload of the same ref. The blob must be put first.
func (t *Tx) PutUpload(deviceID, ref string, m core.Media) error {
	// Delete, then insert, so the old row's trigger releases its blob.
	if _, err := t.exec(`DELETE FROM uploads WHERE device_id = $1 AND ref = $2`, deviceID, ref); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO uploads (device_id, ref, sha256, kind, mime, size, filename, created) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`,
		deviceID, ref, m.SHA256, m.Kind, m.Mime, m.Size, m.Filename, now())
	return err
}

// Upload returns a device's acknowledged upload (store.ErrNotFound when the
// ref is unknown, was used or has expired).
func (s *Store) Upload(ctx context.Context, deviceID, ref string) (core.Media, error) {
	var m core.Media
	err := s.queryRow(ctx, `SELECT sha256, kind, mime, size, filename FROM uploads WHERE device_id = $1 AND ref = $2`, deviceID, ref).
		Scan(&m.SHA256, &m.Kind, &m.Mime, &m.Size, &m.Filename)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, store.ErrNotFound
	}
	return m, err
}

// AttachUpload turns a device's acknowledged upload into an attachment of
// a message: a media row with a fresh md_ id, and the upload is used up.
// store.ErrNotFound when the ref is unknown, used or expired.
func (t *Tx) AttachUpload(deviceID, ref string, lane core.Lane, messageID string) (core.Media, error) {
	m := core.Media{ID: core.NewID("md_"), MessageID: messageID}
	err := t.queryRow(`SELECT sha256, kind, mime, size, filename FROM uploads WHERE device_id = $1 AND ref = $2`, deviceID, ref).
		Scan(&m.SHA256, &m.Kind, &m.Mime, &m.Size, &m.Filename)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, store.ErrNotFound
	}
	if err != nil {
		return m, err
	}
	// The media row counts the blob before the upload row stops counting
	// it, so it never reads as unused.
	if err := t.insertMedia(m, lane); err != nil {
		return m, err
	}
	_, err = t.exec(`DELETE FROM uploads WHERE device_id = $1 AND ref = $2`, deviceID, ref)
	m.MessageID = "" // a message's own media list does not repeat its id
	return m, err
}

// InsertMedia adds a file to a message that exists; it reports false (and
// adds nothing) when the message is gone, deleted while its turn ran.
// The blob must be put first.
func (t *Tx) InsertMedia(m core.Media, lane core.Lane) (bool, error) {
	var ok bool
	err := t.queryRow(`SELECT EXISTS (SELECT 1 FROM messages WHERE id = $1)`, m.MessageID).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil || !ok {
		return false, err
	}
	return true, t.insertMedia(m, lane)
}

func (t *Tx) insertMedia(m core.Media, lane core.Lane) error {
	_, err := t.exec(`INSERT INTO media (id, sha256, kind, mime, size, filename, chat_id, thread_id, message_id, created) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
		m.ID, m.SHA256, m.Kind, m.Mime, m.Size, m.Filename, lane.ChatID, lane.ThreadID, m.MessageID, now())
	return err
}

// Media returns a stored file by its md_ id.
func (s *Store) Media(ctx context.Context, id string) (core.Media, error) {
	m := core.Media{ID: id}
	err := s.queryRow(ctx, `SELECT sha256, kind, mime, size, filename, message_id FROM media WHERE id = $1`, id).
		Scan(&m.SHA256, &m.Kind, &m.Mime, &m.Size, &m.Filename, &m.MessageID)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, store.ErrNotFound
	}
	return m, err
}

// ExpireUploads forgets acknowledged uploads made before the given time
// (epoch ms) that no message used, and returns how many.
func (s *Store) ExpireUploads(ctx context.Context, before int64) (int64, error) {
	tag, err := s.exec(ctx, `DELETE FROM uploads WHERE created < $1`, before)
	return tag.RowsAffected(), err
}

// ClaimGrace is how long a claim on a blob (an install under way on some
// replica) keeps its file from every replica's sweep. Installs end in
// seconds (a batch of a delivery's files in minutes at worst); a claim
// older than this is a replica that crashed mid-install.
const ClaimGrace = time.Hour

// unclaimed is the condition of a blob row no live install claims.
const unclaimed = `(claims <= 0 OR claimed < clock_timestamp() - $2 * interval '1 millisecond')`

// UnusedBlobs lists up to limit blobs that nothing uses any more and no
// install under way claims.
func (s *Store) UnusedBlobs(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.query(ctx, `SELECT sha256 FROM blobs WHERE refs <= 0 AND `+unclaimed+` LIMIT $1`, limit, ClaimGrace.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			return nil, err
		}
		out = append(out, sha)
	}
	return out, rows.Err()
}

// ForgetBlob removes a blob's row if nothing uses it and no live install
// claims it, and reports whether it did. Package media uses DropBlob,
// which removes the file inside the same transaction.
func (s *Store) ForgetBlob(ctx context.Context, sha256 string) (bool, error) {
	if !isText(sha256) {
		return false, nil
	}
	tag, err := s.exec(ctx, `DELETE FROM blobs WHERE sha256 = $1 AND refs <= 0 AND `+unclaimed, sha256, ClaimGrace.Milliseconds())
	return tag.RowsAffected() > 0, err
}

// ClaimBlob records an install of the file with this sha256 under way
// (package media's Index): the row is made if need be, its claims counted
// up and dated by the database's clock. A replica's DropBlob or DropOrphan
// of the same sha256 in progress is waited for.
func (s *Store) ClaimBlob(ctx context.Context, sha256 string, size int64) error {
	if !isText(sha256) {
		return store.ErrNotFound
	}
	_, err := s.exec(ctx, `INSERT INTO blobs (sha256, size, created, claims, claimed) VALUES ($1,$2,$3,1,clock_timestamp())
		ON CONFLICT (sha256) DO UPDATE SET claims = GREATEST(blobs.claims, 0) + 1, claimed = clock_timestamp()`, sha256, size, now())
	return err
}

// DropBlob releases a claim (released), then with remove deletes the row
// of a blob nothing uses and no live install claims, running remove before
// the deletion commits (package media's Index). The deleted row stays
// locked until then: a ClaimBlob of the same sha256 waits, and finds the
// file gone after.
func (s *Store) DropBlob(ctx context.Context, sha256 string, released bool, remove func() error) (bool, error) {
	if !isText(sha256) {
		return false, nil
	}
	if released {
		// Committed on its own: a failing remove keeps the row, not the claim.
		if _, err := s.exec(ctx, `UPDATE blobs SET claims = GREATEST(claims - 1, 0) WHERE sha256 = $1`, sha256); err != nil {
			return false, err
		}
	}
	if remove == nil {
		return false, nil
	}
	gone := false
	err := s.write(ctx, func(t *Tx) error {
		tag, err := t.exec(`DELETE FROM blobs WHERE sha256 = $1 AND refs <= 0 AND `+unclaimed, sha256, ClaimGrace.Milliseconds())
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		gone = true
		return remove()
	})
	if err != nil {
		gone = false
	}
	return gone, err
}

// DropOrphan runs remove for a file no blob row names, holding its sha256
// against claims meanwhile: a row is inserted (uncommitted, so a
// ClaimBlob waits on it) and deleted again once remove has run.
func (s *Store) DropOrphan(ctx context.Context, sha256 string, remove func() error) (bool, error) {
	if !isText(sha256) {
		return false, nil
	}
	gone := false
	err := s.write(ctx, func(t *Tx) error {
		tag, err := t.exec(`INSERT INTO blobs (sha256, size, created) VALUES ($1, 0, $2) ON CONFLICT (sha256) DO NOTHING`, sha256, now())
		if err != nil || tag.RowsAffected() == 0 {
			return err // a row names it
		}
		if err := remove(); err != nil {
			return err
		}
		if _, err := t.exec(`DELETE FROM blobs WHERE sha256 = $1`, sha256); err != nil {
			return err
		}
		gone = true
		return nil
	})
	if err != nil {
		gone = false
	}
	return gone, err
}

// HasBlob reports whether the content store is meant to hold sha256.
func (s *Store) HasBlob(ctx context.Context, sha256 string) (bool, error) {
	var ok bool
	err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE sha256 = $1)`, sha256).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}
