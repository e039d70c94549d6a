package server

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/postgres"
)

// Store is what a whole gateway asks of its database: the union of its
// parts' seams (the gateway's, which holds cron's; the pusher's; the
// content store's; the hub's; the admin socket's). SQLite's store and
// PostgreSQL's both fill it.
type Store interface {
	gateway.Store
	push.Store
	media.Index
	hub.ProofStore
	admin.Store
	Close() error
}

var (
	_ Store           = (*store.Store)(nil)
	_ Store           = (*postgres.Store)(nil)
	_ turn.LeaseStore = (*postgres.Store)(nil)
)

// openedStore is the store Open opened, with what it holds besides.
type openedStore struct {
	Store
	kind    datadir.Store
	serving *postgres.Serving // PostgreSQL's hold on the database
}

// openStore opens the store kind names for the data directory, whose
// lock the caller holds (prepareDataDir): the SQLite file there, or a
// PostgreSQL database, refused when another gateway serves it.
func openStore(cfg AppConfig, kind datadir.Store) (*openedStore, error) {
	if !kind.Postgres() {
		st, err := store.Open(filepath.Join(cfg.DataDir, DBFile), store.WithLog(cfg.Log), store.WithDurability(cfg.Durability))
		if err != nil {
			return nil, err
		}
		return &openedStore{Store: st, kind: kind}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenWait)
	defer cancel()
	st, err := postgres.Open(ctx, kind.URL, postgres.WithLog(cfg.Log))
	if err != nil {
		return nil, err
	}
	serve := st.Serve
	if cfg.Replica {
		serve = st.ServeReplica
	}
	hold, err := serve(ctx, postgres.Who(cfg.DataDir))
	if err != nil {
		st.Close()
		return nil, err
	}
	// Bound once it is certain this gateway serves it: a refused start
	// leaves the directory as it was.
	if err := datadir.BindStore(cfg.DataDir, kind); err != nil {
		hold.Close()
		st.Close()
		return nil, err
	}
	return &openedStore{Store: st, kind: kind, serving: hold}, nil
}

// replicaLeasing is a replica's lane leases, in the database it shares
// (issue 18): named by the host, pid and data directory, as its session
// is, and by this start.
func replicaLeasing(cfg AppConfig, st Store) *turn.Leasing {
	ls, _ := st.(turn.LeaseStore) // replicas are refused on SQLite (Open)
	return &turn.Leasing{Store: ls, Holder: postgres.Who(cfg.DataDir) + " " + core.NewID("start_"),
		TTL: cfg.LeaseTTL, Sweep: cfg.LeaseSweep}
}

// fleetKey is the key the replicas sign their NATS messages with: the
// database's, which every replica of it reads (replicas are refused on
// SQLite: Open).
func fleetKey(st Store) ([]byte, error) {
	ps, ok := st.(*postgres.Store)
	if !ok {
		return nil, errReplicaNeedsPostgres
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return ps.FleetKey(ctx)
}

// errReplicaNeedsPostgres refuses replicas on SQLite: its file belongs
// to one process of one machine.
var errReplicaNeedsPostgres = errors.New("replicas share a PostgreSQL database (--store postgres://…): a SQLite file serves one gateway")

// storeOpenWait bounds connecting to PostgreSQL and migrating its schema
// (a replica waits up to five minutes for another's migration).
const storeOpenWait = 6 * time.Minute

// Close closes the store, and lets a PostgreSQL database go.
func (s *openedStore) Close() error {
	err := s.Store.Close()
	s.serving.Close()
	return err
}

// prepareDataDir takes the data directory's lock and makes it private,
// without a SQLite file when the state is elsewhere. A data directory
// keeps the state of one store (its media files go with that store's
// messages): a store it was not served with is refused first, saying
// what to do, leaving the directory as it was.
func prepareDataDir(cfg AppConfig, kind datadir.Store) (*datadir.Lock, error) {
	lock, err := datadir.Acquire(cfg.DataDir, datadir.RoleServe, 2*time.Second)
	if err != nil {
		var inUse *datadir.InUseError
		if errors.As(err, &inUse) {
			inUse.Postgres = kind.Postgres()
		}
		return nil, err
	}
	if err := datadir.CheckStore(cfg.DataDir, kind); err != nil {
		lock.Release()
		return nil, err
	}
	prepare := datadir.Prepare
	if kind.Postgres() {
		prepare = datadir.PrepareFiles
	}
	tightened, err := prepare(cfg.DataDir, false)
	if err != nil {
		lock.Release()
		return nil, err
	}
	for _, p := range tightened {
		cfg.Log.Warn("made private: it was readable by other users", "path", p)
	}
	return lock, nil
}
