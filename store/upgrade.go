package store

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/irisgate/irisgate/store/record"
)

// recordsVersion is the schema version from which every JSON body is a
// record (package record). Its migration rewrites the bodies written
// before (version 0 of each record) in the same transaction as the schema
// change: an irisgate that stops half-way leaves the database as it was.
const recordsVersion = 7

// recordsSchema is the quarantine: rows the migration could not read. They
// are kept, never dropped, and the store warns of them at every start.
const recordsSchema = `
CREATE TABLE quarantine (
	id   INTEGER PRIMARY KEY AUTOINCREMENT,
	tbl  TEXT NOT NULL,
	key  TEXT NOT NULL,
	body BLOB NOT NULL,
	err  TEXT NOT NULL,
	ts   INTEGER NOT NULL
);
`

// steps are migrations' Go parts, by the schema version they bring the
// database to; each runs after that version's SQL, in its transaction.
var steps = map[int]func(*sql.Tx, *slog.Logger) error{recordsVersion: upgradeRecords}

// oneWay are the versions an older irisgate cannot read: the database is
// copied before migrating to them (see backup).
var oneWay = map[int]bool{recordsVersion: true}

// backup copies the database to path.pre-v<version> before a one-way
// migration, so going back to the older irisgate is restoring that file.
// The copy is made under a temporary name and renamed into place once
// complete; one left by an earlier attempt is replaced (the database was
// not migrated then, so the new copy is the same or newer), so a start
// that keeps failing does not fill the disk with copies.
func (s *Store) backup(path string, version int) (string, error) {
	dst := fmt.Sprintf("%s.pre-v%d", path, version)
	tmp := dst + ".tmp"
	os.Remove(tmp)
	// Created here, empty, so that it is the owner's alone: the copy holds
	// everything the database does. VACUUM INTO accepts an empty file.
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	f.Close()
	if _, err := s.w.Exec(`VACUUM INTO ?`, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return dst, nil
}

// upgradeRecords rewrites every body stored before records as a record:
// outbox frames, messages' media and runtime, conversation entries, lane
// settings and Web Push subscriptions. A body that does not decode goes to
// the quarantine with the reason (a message keeps its row, without the
// unreadable column). Bodies already records are checked, not rewritten.
func upgradeRecords(tx *sql.Tx, log *slog.Logger) error {
	start := time.Now()
	u := &upgrader{tx: tx, log: log}
	err := errors.Join(
		u.table("outbox", `SELECT cursor, cursor, body FROM outbox WHERE cursor > ? ORDER BY cursor LIMIT ?`,
			column{record.KindEvent, `UPDATE outbox SET body = ? WHERE cursor = ?`, `DELETE FROM outbox WHERE cursor = ?`, ""}),
		u.table("messages", `SELECT seq, id, media, runtime FROM messages WHERE seq > ? AND (media != '' OR runtime != '') ORDER BY seq LIMIT ?`,
			column{record.KindMedia, `UPDATE messages SET media = ? WHERE seq = ?`, `UPDATE messages SET media = '' WHERE seq = ?`, "media"},
			column{record.KindRuntime, `UPDATE messages SET runtime = ? WHERE seq = ?`, `UPDATE messages SET runtime = '' WHERE seq = ?`, "runtime"}),
		u.table("conversation", `SELECT seq, seq, body FROM conversation WHERE seq > ? ORDER BY seq LIMIT ?`,
			column{record.KindConversation, `UPDATE conversation SET body = ? WHERE seq = ?`, `DELETE FROM conversation WHERE seq = ?`, ""}),
		u.table("lane_settings", `SELECT rowid, CASE thread_id WHEN '' THEN chat_id ELSE chat_id || '/' || thread_id END, body FROM lane_settings WHERE rowid > ? ORDER BY rowid LIMIT ?`,
			column{record.KindLaneSettings, `UPDATE lane_settings SET body = ? WHERE rowid = ?`, `DELETE FROM lane_settings WHERE rowid = ?`, ""}),
		u.table("devices", `SELECT rowid, device_id, webpush FROM devices WHERE rowid > ? AND webpush != '' ORDER BY rowid LIMIT ?`,
			column{record.KindWebPush, `UPDATE devices SET webpush = ? WHERE rowid = ?`, `UPDATE devices SET webpush = '' WHERE rowid = ?`, "webpush"}),
	)
	if err != nil {
		return err
	}
	if u.rewritten+u.checked+u.quarantined == 0 {
		return nil // a new database
	}
	log.Info("store: stored bodies rewritten as records", "version", recordsVersion, "rewritten", u.rewritten,
		"checked", u.checked, "quarantined", u.quarantined, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// column is one JSON column of a table the upgrade rewrites.
type column struct {
	kind   string
	update string // body, row id
	drop   string // row id: what happens to a row whose body is quarantined
	name   string // for the quarantine's key; "" when the body is the row
}

type upgrader struct {
	tx                              *sql.Tx
	log                             *slog.Logger
	rewritten, checked, quarantined int
}

// maxQuarantineLogs bounds the lines one upgrade logs for quarantined
// rows; the count is logged in full, and Open warns of them all later.
const maxQuarantineLogs = 20

// table pages through a table by its integer id (the SELECT returns the
// id, the row's key for people, then one value per column), rewriting
// each column's bodies. Pages are read whole before any row is changed:
// SQLite leaves undefined what a running SELECT sees of writes to its table.
func (u *upgrader) table(tbl, query string, cols ...column) error {
	const page = 1000
	type row struct {
		id     int64
		key    string
		bodies [][]byte
	}
	// Prepared once: modernc's driver compiles a query on every call.
	updates := make([]*sql.Stmt, len(cols))
	for i, c := range cols {
		st, err := u.tx.Prepare(c.update)
		if err != nil {
			return err
		}
		defer st.Close()
		updates[i] = st
	}
	after := int64(-1 << 62)
	for {
		rows, err := u.tx.Query(query, after, page)
		if err != nil {
			return fmt.Errorf("reading %s: %w", tbl, err)
		}
		var batch []row
		for rows.Next() {
			r := row{bodies: make([][]byte, len(cols))}
			dst := []any{&r.id, &r.key}
			for i := range cols {
				dst = append(dst, &r.bodies[i])
			}
			if err := rows.Scan(dst...); err != nil {
				rows.Close()
				return fmt.Errorf("reading %s: %w", tbl, err)
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reading %s: %w", tbl, err)
		}
		for _, r := range batch {
			for i, c := range cols {
				if err := u.body(tbl, c, updates[i], r.id, r.key, r.bodies[i]); err != nil {
					return err
				}
			}
		}
		if len(batch) < page {
			return nil
		}
		after = batch[len(batch)-1].id
	}
}

func (u *upgrader) body(tbl string, c column, update *sql.Stmt, id int64, key string, body []byte) error {
	if len(body) == 0 {
		return nil // an empty column: none
	}
	out, changed, err := record.Upgrade(c.kind, body)
	if err != nil {
		if c.name != "" {
			key += " " + c.name
		}
		if _, qerr := u.tx.Exec(`INSERT INTO quarantine (tbl, key, body, err, ts) VALUES (?,?,?,?,?)`, tbl, key, body, err.Error(), now()); qerr != nil {
			return fmt.Errorf("quarantining %s row %s: %w", tbl, key, qerr)
		}
		if _, qerr := u.tx.Exec(c.drop, id); qerr != nil {
			return fmt.Errorf("quarantining %s row %s: %w", tbl, key, qerr)
		}
		u.quarantined++
		if u.quarantined <= maxQuarantineLogs {
			u.log.Warn("store: a row that does not decode was moved to the quarantine table", "table", tbl, "key", key, "err", err)
		}
		return nil
	}
	if !changed {
		u.checked++
		return nil
	}
	if _, err := update.Exec(out, id); err != nil {
		return fmt.Errorf("rewriting %s row %s: %w", tbl, key, err)
	}
	u.rewritten++
	return nil
}

// Quarantined is a row the records migration could not read, kept as it
// was found.
type Quarantined struct {
	Table, Key string
	Body       []byte
	Err        string
	TS         int64
}

// Quarantine lists the quarantined rows, oldest first.
func (s *Store) Quarantine() ([]Quarantined, error) {
	rows, err := s.r.Query(`SELECT tbl, key, body, err, ts FROM quarantine ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Quarantined
	for rows.Next() {
		var q Quarantined
		if err := rows.Scan(&q.Table, &q.Key, &q.Body, &q.Err, &q.TS); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// warnQuarantine reminds the owner at every start of what is in the
// quarantine: nothing there is lost, but nothing there is used either.
func (s *Store) warnQuarantine(path string) {
	var n int
	var tables string
	if err := s.w.QueryRow(`SELECT COUNT(*), COALESCE(GROUP_CONCAT(DISTINCT tbl), '') FROM quarantine`).Scan(&n, &tables); err != nil || n == 0 {
		return
	}
	s.log.Warn("store: rows that did not decode are kept in the quarantine table, unused; see the README (Upgrading)",
		"rows", n, "tables", tables, "database", path)
}
