package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// The schema's migrations, in goose's SQL files (migrations/NNNNN_*.sql),
// applied in order and recorded in goose_db_version. Only ever added to:
// a released file is never edited.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate brings the schema up to date. Replicas starting together
// migrate once: goose holds a session advisory lock around the run, and
// the others wait for it (up to five minutes) and then find nothing to do.
// A database migrated by a newer irisgate is refused rather than used:
// this one would not know what its columns mean.
func (s *Store) migrate(ctx context.Context) error {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return err
	}
	// No copy is made before migrating, as SQLite's store makes one: each
	// migration runs in its own transaction, so a failed one leaves the
	// database as it was, and the way back to an older irisgate after a
	// successful one is the owner's own backup (pg_dump), which this
	// process cannot take for a server elsewhere. Said before it starts.
	if have, want, err := p.GetVersions(ctx); err == nil && have > 0 && have < want {
		s.log.Warn("postgres: upgrading the schema; an older irisgate will refuse the database afterwards (restore a pg_dump taken before to go back)",
			"from", have, "to", want)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return err
	}
	for _, r := range results {
		s.log.Info("postgres: migrated", "version", r.Source.Version, "took", r.Duration)
	}
	have, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	if know := latest(p); have > know {
		return fmt.Errorf("the database is at version %d, from a newer irisgate (this one knows %d)", have, know)
	}
	return nil
}

// latest is the newest migration this irisgate has.
func latest(p *goose.Provider) int64 {
	var v int64
	for _, src := range p.ListSources() {
		v = max(v, src.Version)
	}
	return v
}

// SchemaVersion is the database's schema version (goose's).
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v)
	return v, err
}

// checkSchema is WithoutMigration's test: the schema is this irisgate's,
// at the version it knows, or nothing is touched.
func (s *Store) checkSchema(ctx context.Context) error {
	// goose's table and one of irisgate's own: another program's
	// migrations would have the first.
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL AND to_regclass('outbox_head') IS NOT NULL`).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return ErrNoSchema
	}
	have, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	know, err := knownVersion()
	if err != nil {
		return err
	}
	switch {
	case have == 0:
		return ErrNoSchema
	case have > know:
		return fmt.Errorf("the database is at schema version %d, from a newer irisgate (this one knows %d): use the irisgate that serves it", have, know)
	case have < know:
		return fmt.Errorf("the database is at schema version %d and this irisgate's is %d: use the irisgate that serves it, or let this one's serve migrate it", have, know)
	}
	return nil
}

// ErrNoSchema is WithoutMigration's error for a database no irisgate has
// set up: the wrong database, or one no gateway has started on yet.
var ErrNoSchema = errors.New("the database has no irisgate schema: is it the one the gateway serves? (irisgate serve --store creates it on its first start)")

// knownVersion is the newest migration embedded, from the files' names
// (NNNNN_what.sql), without a connection.
func knownVersion() (int64, error) {
	files, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return 0, err
	}
	var v int64
	for _, f := range files {
		num, _, _ := strings.Cut(f.Name(), "_")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", f.Name(), err)
		}
		v = max(v, n)
	}
	return v, nil
}
