package admin

import (
	"context"
	"path/filepath"

	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/postgres"
)

// Store is what the admin operations need of a database: the tokens, the
// channel directory and the cron jobs. The running gateway's store fills
// it (Backend), and so does the store a command opens itself when no
// gateway answers, SQLite's or PostgreSQL's.
type Store interface {
	gateway.TokenStore
	RevokeToken(ctx context.Context, id string) error
	cron.Store // the jobs, and the channels they post into
}

var (
	_ Store = (*store.Store)(nil)
	_ Store = (*postgres.Store)(nil)
)

// ownStore is a store a Client opened, and closes.
type ownStore interface {
	Store
	Close() error
}

// openStore opens the store of dir's gateway, as s names it. A command
// never migrates PostgreSQL: its schema is set up and upgraded by
// irisgate serve, which may run on another machine, so a schema that is
// not this irisgate's (another version, or none) is refused. SQLite's is
// migrated only where no gateway runs (asIs false: the command holds the
// directory's lock).
func openStore(ctx context.Context, dir string, s datadir.Store, asIs bool) (ownStore, error) {
	if s.Postgres() {
		st, err := postgres.Open(ctx, s.URL, postgres.WithoutMigration(), postgres.WithMaxConns(2))
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	var opts []store.Option
	if asIs {
		opts = append(opts, store.WithoutMigration())
	}
	st, err := store.Open(filepath.Join(dir, datadir.DBFile), opts...)
	if err != nil {
		return nil, err
	}
	return st, nil
}
