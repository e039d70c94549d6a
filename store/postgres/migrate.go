package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

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
