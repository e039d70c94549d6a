package postgres

import (
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// openURL opens a second store on s's database, as another gateway would.
func openURL(t *testing.T, dsn string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(bg, dsn, append([]Option{WithLog(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func serve(t *testing.T, s *Store, who string) *Serving {
	t.Helper()
	h, err := s.Serve(bg, who)
	if err != nil {
		t.Fatalf("serve as %s: %v", who, err)
	}
	t.Cleanup(h.Close)
	return h
}

func wantServed(t *testing.T, err error, by string) {
	t.Helper()
	var se *ServedError
	if !errors.As(err, &se) || !strings.Contains(se.By, by) ||
		!strings.Contains(err.Error(), "stop the other gateway first, or give this one a database of its own (--store)") {
		t.Fatalf("want the database served by %q, got %v", by, err)
	}
}

// Two gateways on one database are refused (they would not be kept in
// step); the refusal names the one that serves it, and once it stops the
// database is free. Another database on the same server is not concerned.
func TestServeHoldsTheDatabase(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := openURL(t, dsn), openURL(t, dsn)
	ha := serve(t, a, "host-a pid 1 /srv/a")
	_, err := b.Serve(bg, "host-b pid 2 /srv/b")
	wantServed(t, err, "irisgate serve host-a pid 1 /srv/a")
	serve(t, open(t), "host-c pid 3 /srv/c") // a database of its own

	ha.Close()
	ha.Close() // idempotent
	serve(t, b, "host-b pid 2 /srv/b")
	_, err = a.Serve(bg, "host-a pid 1 /srv/a")
	wantServed(t, err, "host-b")
}

// Replicas share the database; a lone gateway and replicas refuse each
// other, each told what to do.
func TestReplicasShareTheDatabase(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b, c := openURL(t, dsn), openURL(t, dsn), openURL(t, dsn)
	ra, err := a.ServeReplica(bg, "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ra.Close)
	rb, err := b.ServeReplica(bg, "replica-b")
	if err != nil {
		t.Fatalf("a second replica: %v", err)
	}
	t.Cleanup(rb.Close)
	_, err = c.Serve(bg, "alone")
	wantServed(t, err, "irisgate serve replica-")
	if !strings.Contains(err.Error(), "must all be replicas") {
		t.Fatalf("a lone gateway beside replicas should be told they must all be replicas: %v", err)
	}
	ra.Close()
	rb.Close()
	serve(t, c, "alone")
	_, err = a.ServeReplica(bg, "replica-a")
	var se *ServedError
	if !errors.As(err, &se) || !strings.Contains(se.By, "alone") || !strings.Contains(err.Error(), "alone, not as a replica") {
		t.Fatalf("a replica beside a lone gateway: %v", err)
	}
}

// A holding session that dies (the server restarted it, the network
// dropped it) is taken again at the next check, unless another gateway
// took the database meanwhile: then the check says so.
func TestServeTakesALostSessionAgain(t *testing.T) {
	dsn := pgtest.DB(t)
	a, b := openURL(t, dsn), openURL(t, dsn)
	ha := serve(t, a, "a")
	kill := func(h *Serving) {
		t.Helper()
		h.mu.Lock()
		pid := h.conn.PgConn().PID()
		h.mu.Unlock()
		rawExec(t, a, `SELECT pg_terminate_backend($1, 10000)`, pid)
	}
	kill(ha)
	if err := ha.Check(bg); err != nil {
		t.Fatalf("taking a lost session again: %v", err)
	}
	_, err := b.Serve(bg, "b")
	wantServed(t, err, "irisgate serve a")
	if err := ha.Check(bg); err != nil {
		t.Fatalf("a held session checked: %v", err)
	}

	kill(ha)
	serve(t, b, "b") // in the gap
	wantServed(t, ha.Check(bg), "irisgate serve b")
}

// A holder that names itself as a process of this host that has ended
// (a gateway killed and restarted at once) is waited for; any other is
// refused at once.
func TestServedByAGoneProcess(t *testing.T) {
	ended := osexec.Command("true")
	if err := ended.Run(); err != nil {
		t.Skip(err)
	}
	dead := ended.Process.Pid
	host, _ := os.Hostname()
	for by, gone := range map[string]bool{
		appName(fmt.Sprintf("%s pid %d /srv/a", host, dead)):          true,
		appName(Who("/srv/a")):                                        false, // alive: this test
		appName(fmt.Sprintf("elsewhere.example pid %d /srv/a", dead)): false,
		"psql": false,
		"":     false,
	} {
		if got := (&ServedError{By: by}).gone(); got != gone {
			t.Errorf("%q: gone %v, want %v", by, got, gone)
		}
	}
}

func TestAppNameFits(t *testing.T) {
	long := strings.Repeat("é", 40)
	if n := appName(long); len(n) > 63 || !strings.HasPrefix(n, "irisgate serve é") || strings.ContainsRune(n, '\uFFFD') {
		t.Fatalf("%q (%d bytes)", n, len(n))
	}
}

// WithoutMigration (a command beside a running gateway) opens only this
// irisgate's schema at its version, and changes nothing otherwise.
func TestWithoutMigration(t *testing.T) {
	fresh := pgtest.DB(t)
	_, err := Open(bg, fresh, WithLog(quiet), WithoutMigration())
	if !errors.Is(err, ErrNoSchema) || !strings.Contains(err.Error(), "irisgate serve --store creates it") {
		t.Fatalf("a database without the schema: %v", err)
	}
	s := openURL(t, fresh) // migrates
	if _, err := openURL(t, fresh, WithoutMigration()).OutboxHead(bg); err != nil {
		t.Fatalf("this irisgate's schema: %v", err)
	}
	know, err := knownVersion()
	if err != nil || know < 2 {
		t.Fatalf("known version %d, %v", know, err)
	}
	rawExec(t, s, `UPDATE goose_db_version SET is_applied = false WHERE version_id = $1`, know)
	_, err = Open(bg, fresh, WithLog(quiet), WithoutMigration())
	if err == nil || !strings.Contains(err.Error(), "use the irisgate that serves it") {
		t.Fatalf("an older schema: %v", err)
	}
	if v, _ := s.SchemaVersion(bg); v != know-1 {
		t.Fatalf("the refusal migrated: version %d", v)
	}
	rawExec(t, s, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`)
	_, err = Open(bg, fresh, WithLog(quiet), WithoutMigration())
	if err == nil || !strings.Contains(err.Error(), "from a newer irisgate") {
		t.Fatalf("a newer schema: %v", err)
	}

	// Another program's goose table does not make a database ours.
	other := pgtest.DB(t)
	conn, err := pgx.Connect(bg, other)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	if _, err := conn.Exec(bg, `CREATE TABLE goose_db_version (id serial, version_id bigint, is_applied boolean, tstamp timestamp);
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (1, true), (2, true)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bg, other, WithLog(quiet), WithoutMigration()); !errors.Is(err, ErrNoSchema) {
		t.Fatalf("a foreign goose table: %v", err)
	}
}
