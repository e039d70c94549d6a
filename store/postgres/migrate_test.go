package postgres

import (
	"database/sql"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/store"
	"github.com/pressly/goose/v3"
)

// Replicas starting together on an empty database migrate it once (goose's
// advisory lock), and a later start finds nothing to do.
func TestReplicasMigrateOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	var wg sync.WaitGroup
	stores := make([]*Store, 3)
	errs := make([]error, 3)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(bg, dsn, WithLog(quiet))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var applied int
	if err := stores[0].pool.QueryRow(bg, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != len(latestSources(t)) {
		t.Fatalf("%d migrations recorded, want each once (%d)", applied, len(latestSources(t)))
	}
	c := appendEvent(t, stores[1], idle(1))
	again, err := Open(bg, dsn, WithLog(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if head, _ := again.OutboxHead(bg); head != c {
		t.Fatalf("reopened: head %d, want %d", head, c)
	}
}

func latestSources(t *testing.T) []string {
	t.Helper()
	files, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		out = append(out, f.Name())
	}
	return out
}

// A database a newer irisgate migrated is refused, not used.
func TestRefusesANewerDatabase(t *testing.T) {
	s := open(t)
	rawExec(t, s, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`)
	_, err := Open(bg, s.pool.Config().ConnString(), WithLog(quiet))
	if err == nil || !strings.Contains(err.Error(), "newer irisgate") {
		t.Fatalf("opened a newer database: %v", err)
	}
}

func TestOpenRefusesABadURL(t *testing.T) {
	if _, err := Open(bg, "postgres://%zz", WithLog(quiet)); err == nil {
		t.Fatal("opened a malformed URL")
	}
}

// The server restarting (or crashing) under an open store: what is asked
// meanwhile fails with an error, and once the server is back the store
// works again without being reopened (the pool replaces dead connections).
func TestSurvivesAServerRestart(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Fast()...)
	if err != nil {
		pgtest.Skip(t, err)
	}
	t.Cleanup(func() { srv.Close() })
	_, dsn, err := srv.CreateDB(bg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(bg, dsn, WithLog(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c1 := appendEvent(t, s, idle(1))
	for _, stop := range []func() error{srv.Stop, srv.Crash} {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(bg, func(tx store.Tx) error { _, _, err := tx.AppendEvent(idle(2)); return err }); err == nil {
			t.Fatal("a write succeeded with the server down")
		}
		if _, err := s.OutboxHead(bg); err == nil {
			t.Fatal("a read succeeded with the server down")
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		// The pool's idle connections are dead; the next use finds out
		// and dials anew.
		c := appendEvent(t, s, idle(3))
		if c != c1+1 {
			t.Fatalf("after the restart: cursor %d, want %d (the failed write took none)", c, c1+1)
		}
		c1 = c
	}
}

// A database of the first schema, with a device, comes up to the newest:
// the device keeps what it had and has no token (it said hello before
// irisgate kept it), so it is still pushed to.
func TestMigratesAVersion1Database(t *testing.T) {
	dsn := pgtest.DB(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(bg, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO devices (device_id, name, fcm_token, last_seen) VALUES ('phone', 'Pixel', 'f', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(bg, dsn, WithLog(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.SchemaVersion(bg); err != nil || v != int64(len(latestSources(t))) || v < 2 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	if d, err := s.Device(bg, "phone"); err != nil || d.Name != "Pixel" || d.FCMToken != "f" || d.TokenID != "" || d.Revoked {
		t.Fatalf("the device after the migration: %+v, %v", d, err)
	}
	if ds, err := s.PushDevices(bg); err != nil || len(ds) != 1 {
		t.Fatalf("push devices: %+v, %v", ds, err)
	}
}
