// Package postgres keeps the gateway's state in PostgreSQL, for owners who
// outgrow one machine (issue 18): the same methods as package store's
// SQLite store, the same records (package record) in every JSON column,
// the same rules (outbox cursors, search, deletes), on a server that
// several gateway replicas can share.
//
// Every change is one transaction (Write), as in SQLite; reads run on a
// connection pool beside it. Schema migrations are goose's, embedded
// (migrate.go). What differs from SQLite, and why, is said where it is:
// how cursors are handed out (outbox.go), how search tokenises (search.go),
// and strings PostgreSQL cannot hold (text.go).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/irisgate/irisgate/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is an open PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	// corruptSaid holds the devices whose undecodable push registration
	// was logged (PushDevices): said once, not at every push.
	corruptSaid sync.Map
}

// Option configures Open.
type Option func(*options)

type options struct {
	log      *slog.Logger
	maxConns int32
	asIs     bool
}

// WithLog sets where the store reports its migrations and what it keeps
// in quarantine (slog.Default() otherwise).
func WithLog(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithMaxConns bounds the connections the store opens (default 8: one
// writer at a time, the rest for reads beside it).
func WithMaxConns(n int32) Option { return func(o *options) { o.maxConns = n } }

// WithoutMigration opens a database only if its schema is this
// irisgate's, migrating nothing: for a command acting beside a running
// gateway, which owns the schema. A database with no irisgate schema, or
// one at another version, is refused with what to do.
func WithoutMigration() Option { return func(o *options) { o.asIs = true } }

// Open connects to the database at url (postgres://user:pass@host/db?…, or
// any form libpq takes) and brings its schema up to date.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{log: slog.Default(), maxConns: 8}
	for _, f := range opts {
		f(&o)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg.MaxConns = o.maxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// libpq waits forever by default (connect_timeout); a gateway
		// starting against an address that never answers says so.
		cfg.ConnConfig.ConnectTimeout = 30 * time.Second
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "irisgate"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, log: o.log}
	if o.asIs {
		if err := s.checkSchema(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: %s@%s/%s: %w", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
		}
		return s, nil
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrating %s@%s/%s: %w", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	s.warnQuarantine(ctx)
	return s, nil
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

var _ store.Tx = (*Tx)(nil)

// Tx is a write transaction. It is valid only inside the Write (or
// Savepoint) that gave it.
type Tx struct {
	ctx context.Context
	tx  pgx.Tx
	s   *Store
	// The outbox cursors this transaction hands out (outbox.go): locked
	// once it holds outbox_head's row, base the head that row says, head
	// the last cursor handed out.
	locked     bool
	base, head int64
}

// Write runs fn in one write transaction, committed when fn returns nil.
func (s *Store) Write(ctx context.Context, fn func(store.Tx) error) error {
	return s.write(ctx, func(t *Tx) error { return fn(t) })
}

// write is Write for the store's own code, which uses what only this
// transaction has.
func (s *Store) write(ctx context.Context, fn func(*Tx) error) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return err
	}
	t := &Tx{ctx: ctx, tx: tx, s: s}
	if err := fn(t); err != nil {
		rollback(ctx, tx)
		return err
	}
	if err := t.storeHead(); err != nil {
		rollback(ctx, tx)
		return err
	}
	return tx.Commit(ctx)
}

// begin starts a write transaction. Right after PostgreSQL restarts (or
// its backends are ended), the pool still holds connections to the server
// that went away: pgx checks only those idle for more than a second. A
// BEGIN on one fails, and is tried on another, as many times as the pool
// has connections: a BEGIN that fails leaves no transaction behind, so
// trying it again is always safe, and a reply's save is not lost to a
// connection that died while idle. A failure to connect is not tried
// again: the server is away, and the caller is told.
func (s *Store) begin(ctx context.Context) (pgx.Tx, error) {
	tries := int(s.pool.Config().MaxConns) + 1
	for try := 1; ; try++ {
		tx, err := s.pool.Begin(ctx)
		var ce *pgconn.ConnectError
		if err == nil || try >= tries || ctx.Err() != nil || errors.As(err, &ce) {
			return tx, err
		}
	}
}

// rollback ends a failed transaction even when ctx has ended: a
// connection left mid-transaction would go back to the pool unusable.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx.Rollback(ctx)
}

// Savepoint runs fn inside a savepoint so a failing fn undoes only its own
// writes (the group commit isolates one request of a batch with it). In
// PostgreSQL a statement that fails spoils its whole transaction; rolling
// back to the savepoint is what makes the rest usable again.
func (t *Tx) Savepoint(fn func(store.Tx) error) error {
	locked, base, head := t.locked, t.base, t.head
	if _, err := t.tx.Exec(t.ctx, "SAVEPOINT sp"); err != nil {
		return err
	}
	if err := fn(t); err != nil {
		// The undone writes take their cursors with them; a lock on
		// outbox_head taken inside the savepoint goes too.
		t.locked, t.base, t.head = locked, base, head
		if _, rerr := t.tx.Exec(t.ctx, "ROLLBACK TO SAVEPOINT sp"); rerr != nil {
			return errors.Join(err, rerr)
		}
		if _, rerr := t.tx.Exec(t.ctx, "RELEASE SAVEPOINT sp"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err := t.tx.Exec(t.ctx, "RELEASE SAVEPOINT sp")
	return err
}

// Flush has nothing to do: each write runs as it is made.
func (t *Tx) Flush() error { return nil }

// querier is what a pool and a transaction both run statements on.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// rows is the part of pgx.Rows the store reads with.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// The statement helpers check every string argument first (text.go): one
// PostgreSQL cannot hold matches nothing a read looks for, and is a clear
// error for a write, without a round trip, and without spoiling the
// transaction as the server's own refusal would.

func query(ctx context.Context, q querier, sql string, args ...any) (rows, error) {
	if !storable(args) {
		return noRows{}, nil
	}
	return q.Query(ctx, sql, args...)
}

func queryRow(ctx context.Context, q querier, sql string, args ...any) pgx.Row {
	if !storable(args) {
		return noRows{}
	}
	return q.QueryRow(ctx, sql, args...)
}

func exec(ctx context.Context, q querier, sql string, args ...any) (pgconn.CommandTag, error) {
	if !storable(args) {
		return pgconn.CommandTag{}, ErrNotText.New()
	}
	return q.Exec(ctx, sql, args...)
}

func (s *Store) query(ctx context.Context, sql string, args ...any) (rows, error) {
	return query(ctx, s.pool, sql, args...)
}

func (s *Store) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return queryRow(ctx, s.pool, sql, args...)
}

func (s *Store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return exec(ctx, s.pool, sql, args...)
}

func (t *Tx) query(sql string, args ...any) (rows, error) { return query(t.ctx, t.tx, sql, args...) }

func (t *Tx) queryRow(sql string, args ...any) pgx.Row { return queryRow(t.ctx, t.tx, sql, args...) }

func (t *Tx) exec(sql string, args ...any) (pgconn.CommandTag, error) {
	return exec(t.ctx, t.tx, sql, args...)
}

// noRows is the result of a read whose arguments nothing stored can match.
type noRows struct{}

func (noRows) Next() bool        { return false }
func (noRows) Scan(...any) error { return pgx.ErrNoRows }
func (noRows) Err() error        { return nil }
func (noRows) Close()            {}

func now() int64 { return time.Now().UnixMilli() }
