// Package store keeps the gateway's state in one SQLite file: the channel
// directory, message history, the outbox, device tokens and device state.
//
// Writes go through one connection (SQLite has one writer anyway); reads use
// a pool, which WAL mode lets run beside the writer.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotFound is returned when a row asked for by id does not exist.
var ErrNotFound = errors.New("not found")

// Store is an open database.
type Store struct {
	w   *sql.DB // one connection: the writer
	r   *sql.DB // readers
	log *slog.Logger

	// tokens counts this store's writes of the tokens table
	// (TokensVersion).
	tokens atomic.Uint64

	// Prepared statements by query text, one set per pool. modernc's
	// driver compiles a query on every call otherwise, which was a fifth
	// of the gateway's CPU under load.
	stmtMu sync.Mutex
	wStmts map[string]*sql.Stmt
	rStmts map[string]*sql.Stmt
	// wanted are writer queries first seen inside a transaction: the one
	// writer connection is busy then, so they are prepared after it ends.
	wanted []string

	// corruptSaid holds the devices whose undecodable push registration
	// was logged (PushDevices): said once, not at every push.
	corruptSaid sync.Map
	// asIs: the schema must be this irisgate's already (WithoutMigration).
	asIs       bool
	durability Durability

	idx        indexer      // the search index's upkeep, off the commit path (index.go)
	ck         checkpointer // the WAL's checkpoints, off the commit path (checkpoint.go)
	indexDelay time.Duration
	// indexQuiet and maxIndexLag: how long the indexer waits for the
	// writer to be quiet, and at most (index.go; tests shorten them).
	indexQuiet, maxIndexLag time.Duration

	hist *histCache    // lanes' newest history pages (histcache.go)
	sets settingsCache // lanes' settings read lately (settingscache.go)
	conv convCache     // lanes' conversations read lately (convcache.go)
	devs knownDevices  // ids the devices table may hold (knowndevices.go)
}

// maxStmts bounds each statement cache: queries built with a variable
// number of placeholders would otherwise grow it without end.
const maxStmts = 256

// stmt returns the prepared form of q on db, nil when the cache is full.
func (s *Store) stmt(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	m := s.rStmts
	if db == s.w {
		m = s.wStmts
	}
	st, full := m[q], len(m) >= maxStmts
	s.stmtMu.Unlock()
	if st != nil || full {
		return st, nil
	}
	// Not under stmtMu: preparing waits for a free connection, which a
	// transaction asking the cache may hold.
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if have := m[q]; have != nil {
		st.Close() // prepared meanwhile by another caller
		return have, nil
	}
	m[q] = st
	return st, nil
}

func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, s.r, q)
	if err != nil || st == nil {
		return s.r.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, s.w, q)
	if err != nil || st == nil {
		return s.w.ExecContext(ctx, q, args...)
	}
	return st.ExecContext(ctx, args...)
}

// queryWrite runs a statement that writes and returns rows (RETURNING)
// on the writer.
func (s *Store) queryWrite(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, s.w, q)
	if err != nil || st == nil {
		return s.w.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := s.stmt(ctx, s.r, q)
	if err != nil || st == nil {
		return s.r.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// pointRow is queryRow for a statement that reads a row by key: one that
// ends in microseconds, so ending it early is worth nothing, while a
// context that can end costs every statement two goroutines to watch it
// (database/sql's Rows and modernc.org/sqlite's interrupt each start one)
// and the wake-up of an idle P to run them. A context already ended still
// gets its error.
func (s *Store) pointRow(ctx context.Context, q string, args ...any) *sql.Row {
	if ctx.Err() == nil {
		ctx = context.WithoutCancel(ctx)
	}
	return s.queryRow(ctx, q, args...)
}

// Option configures Open.
type Option func(*Store)

// WithLog sets where the store reports its migrations and the rows it
// keeps in quarantine (slog.Default() otherwise).
func WithLog(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithoutMigration opens a database only if its schema is this
// irisgate's, migrating nothing: for a command acting beside a running
// gateway, which owns the schema.
func WithoutMigration() Option { return func(s *Store) { s.asIs = true } }

// Open opens (creating if needed) the database at path and brings its
// schema up to date. Before a migration an older irisgate cannot undo, a
// database that has data is copied to path.pre-v<version>.
func Open(path string, opts ...Option) (*Store, error) {
	return openAt(path, len(migrations), opts...)
}

// openAt opens the database and migrates it up to version upto.
func openAt(path string, upto int, opts ...Option) (*Store, error) {
	s := &Store{log: slog.Default(), wStmts: map[string]*sql.Stmt{}, rStmts: map[string]*sql.Stmt{}, indexDelay: defaultIndexDelay, indexQuiet: indexQuiet, maxIndexLag: maxIndexLag,
		hist: newHistCache()}
	for _, o := range opts {
		o(s)
	}
	syncMode, err := s.durability.pragma()
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	q := url.Values{}
	// secure_delete: deleted rows are overwritten, not just unlinked, so a
	// hard delete leaves nothing in the file to recover.
	for _, p := range []string{"journal_mode(WAL)", "synchronous(" + syncMode + ")", "busy_timeout(10000)", "foreign_keys(ON)", "secure_delete(ON)"} {
		q.Add("_pragma", p)
	}
	dsn := "file:" + path + "?" + q.Encode()
	// The writer's transactions take the write lock as they begin, so one
	// that reads first is never refused for a snapshot another process's
	// commit made stale: it waits (busy_timeout) like any writer. Its
	// statement journals (a multi-row INSERT keeps one, rowbuf.go) stay in
	// memory: past 64 KiB SQLite spilled them to a temporary file, a
	// write(2) a page.
	wdsn := dsn + "&_txlock=immediate&_pragma=temp_store(MEMORY)"
	if !s.asIs {
		// The checkpoints run beside the writer (checkpoint.go); a
		// command acting beside a running gateway keeps SQLite's own.
		wdsn += fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", autoCheckpointPages)
	}
	if s.w, err = sql.Open("sqlite", wdsn); err != nil {
		return nil, err
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetConnMaxLifetime(0)
	if s.r, err = sql.Open("sqlite", dsn+"&mode=ro"); err != nil {
		s.w.Close()
		return nil, err
	}
	s.r.SetMaxOpenConns(4)
	s.r.SetMaxIdleConns(4)
	if s.asIs {
		var version int
		if err := s.w.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != upto {
			s.Close()
			if err == nil {
				err = fmt.Errorf("the database is at version %d and this irisgate's is %d: use the irisgate that serves it", version, upto)
			}
			return nil, fmt.Errorf("store: %s: %w", path, err)
		}
	} else if err := s.migrate(path, upto); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	if upto >= recordsVersion && !s.asIs {
		s.warnQuarantine(path)
	}
	if s.asIs {
		s.devs.turnOff() // another process writes the table
	} else if err := s.devs.load(context.Background(), s); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: %s: reading the devices: %w", path, err)
	}
	if upto >= lazyIndexVersion {
		s.startIndexer()
	}
	if !s.asIs {
		if err := s.startCheckpointer(dsn); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close indexes what is still waiting to be, and closes the database.
func (s *Store) Close() error {
	s.stopIndexer()
	// The statements are closed outside stmtMu: closing one waits for its
	// runs, and a run may wait for the writer's connection, held by a
	// transaction that asks stmtMu for its next statement (a deadlock
	// TestMobileInternalError met, closing the store under a live app).
	s.stmtMu.Lock()
	var sts []*sql.Stmt
	for _, m := range []map[string]*sql.Stmt{s.wStmts, s.rStmts} {
		for q, st := range m {
			sts = append(sts, st)
			delete(m, q)
		}
	}
	s.stmtMu.Unlock()
	for _, st := range sts {
		st.Close()
	}
	return errors.Join(s.stopCheckpointer(), s.r.Close(), s.w.Close())
}

// sqliteTx is SQLite's write transaction.
type sqliteTx struct {
	tx *sql.Tx
	s  *Store
	// indexes: the transaction wrote messages the search index is to
	// take in, so the indexer is woken once it commits.
	indexes bool
	// indexer: the indexer's own transaction, which leaves the writer
	// quiet (Store.write does not note it as a commit).
	indexer bool
	// hist: what it may have changed of history, whose cached pages go
	// when it ends.
	hist histTouch
	// sets: the lanes whose settings it may have changed.
	sets settingsTouch
	// conv: what it appended to and deleted from conversations.
	conv convTouch
	// bound: the prepared statements bound to tx so far. A batch runs
	// the same few statements for each of its writes, and binding one
	// (sql.Tx.Stmt) allocates a statement each time: 5 % of a burst's CPU.
	bound map[string]*sql.Stmt
	// rows: the inserts waiting to go in together (rowbuf.go).
	rows rowBuffer
}

// txStmt is q's prepared statement bound to the transaction, nil when q
// is run unprepared this time.
func (t *sqliteTx) txStmt(q string) *sql.Stmt {
	if st := t.bound[q]; st != nil {
		return st
	}
	s := t.s
	s.stmtMu.Lock()
	st := s.wStmts[q]
	if st == nil && len(s.wStmts)+len(s.wanted) < maxStmts && !slices.Contains(s.wanted, q) {
		s.wanted = append(s.wanted, q)
	}
	s.stmtMu.Unlock()
	if st == nil {
		return nil
	}
	if t.bound == nil {
		t.bound = make(map[string]*sql.Stmt, 8)
	}
	b := t.tx.Stmt(st)
	t.bound[q] = b
	return b
}

// prepareWanted prepares the queries transactions ran unprepared.
func (s *Store) prepareWanted(ctx context.Context) {
	s.stmtMu.Lock()
	qs := s.wanted
	s.wanted = nil
	s.stmtMu.Unlock()
	for _, q := range qs {
		s.stmt(ctx, s.w, q) // a query that fails to prepare runs unprepared
	}
}

// exec, query and queryRow put the rows waiting in first (rowbuf.go).
func (t *sqliteTx) exec(q string, args ...any) (sql.Result, error) {
	if err := t.Flush(); err != nil {
		return nil, err
	}
	return t.execNow(q, args...)
}

func (t *sqliteTx) execNow(q string, args ...any) (sql.Result, error) {
	if st := t.txStmt(q); st != nil {
		return st.Exec(args...)
	}
	return t.tx.Exec(q, args...)
}

func (t *sqliteTx) query(q string, args ...any) (*sql.Rows, error) {
	if err := t.Flush(); err != nil {
		return nil, err
	}
	if st := t.txStmt(q); st != nil {
		return st.Query(args...)
	}
	return t.tx.Query(q, args...)
}

// queryRow cannot return a failed insert's error; the statements after it
// and the transaction's end do.
func (t *sqliteTx) queryRow(q string, args ...any) *sql.Row {
	t.Flush()
	return t.queryRowNow(q, args...)
}

func (t *sqliteTx) queryRowNow(q string, args ...any) *sql.Row {
	if st := t.txStmt(q); st != nil {
		return st.QueryRow(args...)
	}
	return t.tx.QueryRow(q, args...)
}

// Write runs fn in one write transaction, committed when fn returns nil.
func (s *Store) Write(ctx context.Context, fn func(Tx) error) error {
	return s.write(ctx, func(t *sqliteTx) error { return fn(t) })
}

// write is Write for the store's own code, which may use what only the
// SQLite transaction has (its statements, the meta table).
func (s *Store) write(ctx context.Context, fn func(*sqliteTx) error) error {
	s.finishCheckpoint(ctx)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	t := &sqliteTx{tx: tx, s: s}
	// Deferred: the pages go even if fn panics, and only once the
	// transaction has ended, so no reader caches its old state after.
	defer s.hist.invalidate(&t.hist)
	defer s.sets.invalidate(&t.sets)
	committed, mark := false, uint64(0)
	defer func() { s.conv.end(&t.conv, committed, mark) }()
	if err := fn(t); err != nil {
		tx.Rollback()
		s.prepareWanted(ctx)
		return err
	}
	if err := t.Flush(); err != nil {
		tx.Rollback()
		s.prepareWanted(ctx)
		return err
	}
	mark = s.conv.committing(&t.conv)
	err = tx.Commit()
	committed = err == nil
	s.prepareWanted(ctx)
	if err == nil {
		s.ck.committed()
		if !t.indexer {
			s.idx.lastCommit.Store(time.Now().UnixNano())
		}
		if t.indexes {
			s.idx.wake()
		}
	}
	return err
}

// Savepoint runs fn inside a savepoint so a failing fn undoes only its own
// writes; the group commit uses it to isolate one request from the others
// of its batch.
func (t *sqliteTx) Savepoint(fn func(Tx) error) error {
	if _, err := t.exec("SAVEPOINT sp"); err != nil {
		return err
	}
	head, known, appended := t.rows.head, t.rows.headKnown, len(t.conv.appended)
	err := fn(t)
	if err == nil {
		err = t.Flush() // its rows are in before it ends, or it failed
	}
	if err != nil {
		// The undone rows take their cursors with them.
		t.rows.discard()
		t.rows.err, t.rows.head, t.rows.headKnown = nil, head, known
		t.conv.undo(appended)
		if _, rerr := t.execNow("ROLLBACK TO sp"); rerr != nil {
			return errors.Join(err, rerr)
		}
		if _, rerr := t.exec("RELEASE sp"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err = t.exec("RELEASE sp")
	return err
}

func (s *Store) migrate(path string, upto int) error {
	var version int
	if err := s.w.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("the database is at version %d, from a newer irisgate (this one knows %d)", version, len(migrations))
	}
	for i := version; i < upto; i++ {
		if oneWay[i+1] && version > 0 {
			copied, err := s.backup(path, i+1)
			if err != nil {
				return fmt.Errorf("copying the database before migration %d (an older irisgate cannot read it afterwards; it needs as much free space as the database): %w", i+1, err)
			}
			s.log.Info("store: copied the database before a one-way migration", "copy", copied, "version", i+1)
		}
		tx, err := s.w.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if step := steps[i+1]; step != nil {
			if err := step(tx, s.log); err != nil {
				tx.Rollback()
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

var migrations = []string{`
CREATE TABLE channels (
	chat_id    TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	kind       TEXT NOT NULL,
	parent     TEXT NOT NULL DEFAULT '',
	is_default INTEGER NOT NULL DEFAULT 0,
	auto       INTEGER NOT NULL DEFAULT 0,
	favorite   INTEGER NOT NULL DEFAULT 0,
	icon       TEXT NOT NULL DEFAULT '',
	color      TEXT NOT NULL DEFAULT '',
	automation INTEGER NOT NULL DEFAULT 0,
	created    INTEGER NOT NULL
);
INSERT INTO channels (chat_id, name, kind, is_default, created) VALUES ('default', 'Default', 'default', 1, 0);

CREATE TABLE messages (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	id        TEXT NOT NULL UNIQUE,
	chat_id   TEXT NOT NULL,
	thread_id TEXT NOT NULL DEFAULT '',
	role      TEXT NOT NULL,
	text      TEXT NOT NULL DEFAULT '',
	reasoning TEXT NOT NULL DEFAULT '',
	media     TEXT NOT NULL DEFAULT '',
	reply_to  TEXT NOT NULL DEFAULT '',
	model     TEXT NOT NULL DEFAULT '',
	tokens    INTEGER NOT NULL DEFAULT 0,
	runtime   TEXT NOT NULL DEFAULT '',
	ts        INTEGER NOT NULL,
	state     INTEGER NOT NULL DEFAULT 0 -- 0 final, 1 streaming, 2 stopped
);
CREATE INDEX messages_lane ON messages (chat_id, thread_id, seq);
CREATE INDEX messages_streaming ON messages (state) WHERE state = 1;

CREATE TABLE outbox (
	cursor     INTEGER PRIMARY KEY AUTOINCREMENT,
	type       TEXT NOT NULL,
	chat_id    TEXT NOT NULL DEFAULT '',
	thread_id  TEXT NOT NULL DEFAULT '',
	message_id TEXT NOT NULL DEFAULT '',
	body       BLOB NOT NULL,
	ts         INTEGER NOT NULL
);
CREATE INDEX outbox_chat ON outbox (chat_id, thread_id) WHERE chat_id != '';
CREATE INDEX outbox_message ON outbox (message_id) WHERE message_id != '';

CREATE TABLE tokens (
	id        TEXT PRIMARY KEY,
	hash      BLOB NOT NULL UNIQUE,
	name      TEXT NOT NULL DEFAULT '',
	device_id TEXT NOT NULL DEFAULT '',
	created   INTEGER NOT NULL,
	last_used INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE devices (
	device_id          TEXT PRIMARY KEY,
	name               TEXT NOT NULL DEFAULT '',
	fcm_token          TEXT NOT NULL DEFAULT '',
	ntfy_topic         TEXT NOT NULL DEFAULT '',
	last_pushed_cursor INTEGER NOT NULL DEFAULT 0,
	proven             TEXT NOT NULL DEFAULT '',
	last_seen          INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE reads (
	chat_id    TEXT NOT NULL,
	thread_id  TEXT NOT NULL DEFAULT '',
	message_id TEXT NOT NULL,
	device_id  TEXT NOT NULL,
	ts         INTEGER NOT NULL,
	PRIMARY KEY (message_id, device_id)
);
CREATE INDEX reads_chat ON reads (chat_id);

CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`, `
CREATE TABLE conversation (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	chat_id    TEXT NOT NULL,
	thread_id  TEXT NOT NULL DEFAULT '',
	message_id TEXT NOT NULL DEFAULT '',
	body       TEXT NOT NULL
);
CREATE INDEX conversation_lane ON conversation (chat_id, thread_id, seq);
CREATE INDEX conversation_message ON conversation (message_id) WHERE message_id != '';

CREATE TABLE lane_settings (
	chat_id   TEXT NOT NULL,
	thread_id TEXT NOT NULL DEFAULT '',
	body      TEXT NOT NULL,
	PRIMARY KEY (chat_id, thread_id)
);

CREATE TABLE approvals (
	command TEXT PRIMARY KEY,
	created INTEGER NOT NULL
);

CREATE TABLE turns (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	message_id TEXT NOT NULL UNIQUE,
	chat_id    TEXT NOT NULL,
	thread_id  TEXT NOT NULL DEFAULT '',
	running    INTEGER NOT NULL DEFAULT 0
);
`, pushSchema, cronSchema, mediaSchema, pushSchema2, recordsSchema, devicesTokenSchema, lazyIndexSchema, pushClaimSchema, turnReplySchema, devicesPushSchema}

func now() int64 { return time.Now().UnixMilli() }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
