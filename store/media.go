package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/irisgate/irisgate/core"
)

// mediaSchema is the migration of search and media (one migration: they
// came together).
//
// Search: message text in an FTS5 index over the messages table (external
// content: the text is not stored twice). Triggers kept it in step inside
// the very transaction that inserts, finishes or deletes a message, so a
// deleted message can never match (schema 9 moved indexing after the
// commit and kept deletes in it: index.go). Replies still streaming stay out until
// they finish: their text changes every second. lane_key is one token
// naming the lane, so "scope: chat" is an index lookup, not a filter over
// every hit of a common word.
//
// Media: blobs are the files of the content store, one per sha256, with
// the number of rows (media, uploads) that use them; a blob nobody uses
// is collected and its file removed. media are files in messages (md_
// ids); uploads are a device's acknowledged uploads waiting for a
// message.send to attach them. The counting is done by triggers, so every
// path that deletes a message (message.delete, channel.delete, /undo…)
// releases its files without knowing about them.
const mediaSchema = `
ALTER TABLE messages ADD COLUMN lane_key TEXT GENERATED ALWAYS AS ('l' || hex(chat_id) || 'x' || hex(thread_id)) VIRTUAL;
CREATE VIRTUAL TABLE messages_fts USING fts5(text, lane_key, content='messages', content_rowid='seq',
	tokenize='unicode61 remove_diacritics 2', prefix='2 3');
-- A delete removes a message's entries from the index pages at once
-- instead of leaving them under a tombstone until a merge.
INSERT INTO messages_fts (messages_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO messages_fts (rowid, text, lane_key) SELECT seq, text, lane_key FROM messages WHERE state != 1;
` + ftsInsertTrigger + `;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN old.state != 1 BEGIN
	INSERT INTO messages_fts (messages_fts, rowid, text, lane_key) VALUES ('delete', old.seq, old.text, old.lane_key);
END;
-- One trigger, so the old entry always goes before the new one comes.
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text, state, chat_id, thread_id ON messages BEGIN
	INSERT INTO messages_fts (messages_fts, rowid, text, lane_key) SELECT 'delete', old.seq, old.text, old.lane_key WHERE old.state != 1;
	INSERT INTO messages_fts (rowid, text, lane_key) SELECT new.seq, new.text, new.lane_key WHERE new.state != 1;
END;

CREATE TABLE blobs (
	sha256  TEXT PRIMARY KEY,
	size    INTEGER NOT NULL,
	refs    INTEGER NOT NULL DEFAULT 0,
	created INTEGER NOT NULL
);
CREATE INDEX blobs_unused ON blobs (refs) WHERE refs <= 0;

CREATE TABLE media (
	id         TEXT PRIMARY KEY,
	sha256     TEXT NOT NULL,
	kind       TEXT NOT NULL,
	mime       TEXT NOT NULL,
	size       INTEGER NOT NULL,
	filename   TEXT NOT NULL,
	chat_id    TEXT NOT NULL,
	thread_id  TEXT NOT NULL DEFAULT '',
	message_id TEXT NOT NULL,
	created    INTEGER NOT NULL
);
CREATE INDEX media_message ON media (message_id);
CREATE INDEX media_chat ON media (chat_id, thread_id);

CREATE TABLE uploads (
	device_id TEXT NOT NULL,
	ref       TEXT NOT NULL,
	sha256    TEXT NOT NULL,
	kind      TEXT NOT NULL,
	mime      TEXT NOT NULL,
	size      INTEGER NOT NULL,
	filename  TEXT NOT NULL,
	created   INTEGER NOT NULL,
	PRIMARY KEY (device_id, ref)
);
CREATE INDEX uploads_created ON uploads (created);

CREATE TRIGGER media_ref AFTER INSERT ON media BEGIN
	UPDATE blobs SET refs = refs + 1 WHERE sha256 = new.sha256;
END;
CREATE TRIGGER media_unref AFTER DELETE ON media BEGIN
	UPDATE blobs SET refs = refs - 1 WHERE sha256 = old.sha256;
END;
CREATE TRIGGER uploads_ref AFTER INSERT ON uploads BEGIN
	UPDATE blobs SET refs = refs + 1 WHERE sha256 = new.sha256;
END;
CREATE TRIGGER uploads_unref AFTER DELETE ON uploads BEGIN
	UPDATE blobs SET refs = refs - 1 WHERE sha256 = old.sha256;
END;
CREATE TRIGGER messages_media AFTER DELETE ON messages BEGIN
	DELETE FROM media WHERE message_id = old.id;
END;
`

// ftsInsertTrigger indexed a finished message as it was inserted, until
// schema 9 dropped it (index.go).
const ftsInsertTrigger = `CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.state != 1 BEGIN
	INSERT INTO messages_fts (rowid, text, lane_key) VALUES (new.seq, new.text, new.lane_key);
END`

// PutBlob records that the content store holds a file with this sha256
// (nothing happens when it is known already). Its count starts at zero:
// the rows that use it count themselves.
func (t *sqliteTx) PutBlob(sha256 string, size int64) error {
	_, err := t.exec(`INSERT INTO blobs (sha256, size, created) VALUES (?,?,?) ON CONFLICT (sha256) DO NOTHING`, sha256, size, now())
	return err
}

// PutUpload records a device's acknowledged upload under its ref,
// replacing an earlier upload of the same ref. The blob must be put first.
func (t *sqliteTx) PutUpload(deviceID, ref string, m core.Media) error {
	// Delete, then insert: a REPLACE would skip the delete trigger and
	// leave the old blob counted forever.
	if _, err := t.exec(`DELETE FROM uploads WHERE device_id = ? AND ref = ?`, deviceID, ref); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO uploads (device_id, ref, sha256, kind, mime, size, filename, created) VALUES (?,?,?,?,?,?,?,?)`,
		deviceID, ref, m.SHA256, m.Kind, m.Mime, m.Size, m.Filename, now())
	return err
}

// Upload returns a device's acknowledged upload (ErrNotFound when the ref
// is unknown, was used or has expired).
func (s *Store) Upload(ctx context.Context, deviceID, ref string) (core.Media, error) {
	var m core.Media
	err := s.pointRow(ctx, `SELECT sha256, kind, mime, size, filename FROM uploads WHERE device_id = ? AND ref = ?`, deviceID, ref).
		Scan(&m.SHA256, &m.Kind, &m.Mime, &m.Size, &m.Filename)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	return m, err
}

// AttachUpload turns a device's acknowledged upload into an attachment of
// a message: a media row with a fresh md_ id, and the upload is used up.
// ErrNotFound when the ref is unknown, used or expired.
func (t *sqliteTx) AttachUpload(deviceID, ref string, lane core.Lane, messageID string) (core.Media, error) {
	m := core.Media{ID: core.NewID("md_"), MessageID: messageID}
	err := t.queryRow(`SELECT sha256, kind, mime, size, filename FROM uploads WHERE device_id = ? AND ref = ?`, deviceID, ref).
		Scan(&m.SHA256, &m.Kind, &m.Mime, &m.Size, &m.Filename)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, err
	}
	// The media row counts the blob before the upload row stops counting
	// it, so it never reads as unused.
	if err := t.insertMedia(m, lane); err != nil {
		return m, err
	}
	_, err = t.exec(`DELETE FROM uploads WHERE device_id = ? AND ref = ?`, deviceID, ref)
	m.MessageID = "" // a message's own media list does not repeat its id
	return m, err
}

// InsertMedia adds a file to a message that exists; it reports false (and
// adds nothing) when the message is gone, deleted while its turn ran.
// The blob must be put first.
func (t *sqliteTx) InsertMedia(m core.Media, lane core.Lane) (bool, error) {
	var n int
	if err := t.queryRow(`SELECT COUNT(*) FROM messages WHERE id = ?`, m.MessageID).Scan(&n); err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	return true, t.insertMedia(m, lane)
}

func (t *sqliteTx) insertMedia(m core.Media, lane core.Lane) error {
	_, err := t.exec(`INSERT INTO media (id, sha256, kind, mime, size, filename, chat_id, thread_id, message_id, created) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		m.ID, m.SHA256, m.Kind, m.Mime, m.Size, m.Filename, lane.ChatID, lane.ThreadID, m.MessageID, now())
	return err
}

// Media returns a stored file by its md_ id.
func (s *Store) Media(ctx context.Context, id string) (core.Media, error) {
	m := core.Media{ID: id}
	err := s.pointRow(ctx, `SELECT sha256, kind, mime, size, filename, message_id FROM media WHERE id = ?`, id).
		Scan(&m.SHA256, &m.Kind, &m.Mime, &m.Size, &m.Filename, &m.MessageID)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	return m, err
}

// ExpireUploads forgets acknowledged uploads made before the given time
// (epoch ms) that no message used, and returns how many.
func (s *Store) ExpireUploads(ctx context.Context, before int64) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM uploads WHERE created < ?`, before)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// UnusedBlobs lists up to limit blobs that nothing uses any more.
func (s *Store) UnusedBlobs(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.query(ctx, `SELECT sha256 FROM blobs WHERE refs <= 0 LIMIT ?`, limit)
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

// ForgetBlob removes a blob's row if nothing uses it, and reports whether
// it did: only then may its file go.
func (s *Store) ForgetBlob(ctx context.Context, sha256 string) (bool, error) {
	res, err := s.exec(ctx, `DELETE FROM blobs WHERE sha256 = ? AND refs <= 0`, sha256)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// HasBlob reports whether the content store is meant to hold sha256.
func (s *Store) HasBlob(ctx context.Context, sha256 string) (bool, error) {
	var n int
	err := s.pointRow(ctx, `SELECT COUNT(*) FROM blobs WHERE sha256 = ?`, sha256).Scan(&n)
	return n > 0, err
}

// ClaimBlob records an install of the file with this sha256 under way
// (package media's Index): its row is made if need be. A SQLite database
// belongs to one gateway process (the data directory's lock), whose
// content store counts its own installs, so no count is kept here.
func (s *Store) ClaimBlob(ctx context.Context, sha256 string, size int64) error {
	_, err := s.exec(ctx, `INSERT INTO blobs (sha256, size, created) VALUES (?,?,?) ON CONFLICT (sha256) DO NOTHING`, sha256, size, now())
	return err
}

// DropBlob deletes, when remove is given, the row of a blob nothing uses,
// running remove before the deletion commits (package media's Index).
// Claims are the one process's own to count (ClaimBlob): released changes
// nothing here.
func (s *Store) DropBlob(ctx context.Context, sha256 string, released bool, remove func() error) (bool, error) {
	if remove == nil {
		return false, nil
	}
	gone := false
	err := s.write(ctx, func(t *sqliteTx) error {
		res, err := t.exec(`DELETE FROM blobs WHERE sha256 = ? AND refs <= 0`, sha256)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		gone = true
		return remove()
	})
	return gone && err == nil, err
}

// DropOrphan runs remove for a file no blob row names (package media's
// Index), inside a write transaction: no row for it commits meanwhile.
func (s *Store) DropOrphan(ctx context.Context, sha256 string, remove func() error) (bool, error) {
	gone := false
	err := s.write(ctx, func(t *sqliteTx) error {
		var n int
		if err := t.queryRow(`SELECT COUNT(*) FROM blobs WHERE sha256 = ?`, sha256).Scan(&n); err != nil || n > 0 {
			return err
		}
		gone = true
		return remove()
	})
	return gone && err == nil, err
}
