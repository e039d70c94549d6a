package pgtest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func run(t *testing.T, dsn, q string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func query(t *testing.T, dsn, q string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// Each test gets its own empty database on the shared server, and it is
// gone once the test ends.
func TestDBIsFreshAndDropped(t *testing.T) {
	var name string
	t.Run("a", func(t *testing.T) {
		dsn := DB(t)
		name = query(t, dsn, "SELECT current_database()")
		if n := query(t, dsn, "SELECT count(*)::text FROM pg_tables WHERE schemaname = 'public'"); n != "0" {
			t.Fatalf("a new database has %s tables", n)
		}
	})
	if n := query(t, Shared(t).URL("postgres"), "SELECT count(*)::text FROM pg_database WHERE datname = '"+name+"'"); n != "0" {
		t.Fatalf("database %s outlived its test", name)
	}
}

// The server never runs as root (PostgreSQL refuses to), and it is ours
// alone: it listens on no TCP port.
func TestServerUserAndSocket(t *testing.T) {
	s := Shared(t)
	pid := s.proc.cmd.Process.Pid
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	uid := ""
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			uid = f[1]
		}
	}
	if os.Geteuid() == 0 && uid == "0" {
		t.Fatal("the server runs as root")
	}
	if os.Geteuid() != 0 && uid != strconv.Itoa(os.Geteuid()) {
		t.Fatalf("the server runs as uid %s, the tests as %d", uid, os.Geteuid())
	}
	if v := query(t, s.URL("postgres"), "SELECT current_setting('listen_addresses')"); v != "" {
		t.Fatalf("listen_addresses = %q", v)
	}
}

// A server of a test's own keeps its data across a stop and a crash, and
// nothing of it is left once closed.
func TestStopCrashRestart(t *testing.T) {
	s, err := Start()
	if err != nil {
		Skip(t, err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	name, dsn, err := s.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run(t, dsn, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('x')")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, dsn); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if v := query(t, dsn, "SELECT v FROM kept"); v != "x" {
		t.Fatalf("after a restart: %q", v)
	}
	run(t, dsn, "INSERT INTO kept VALUES ('y')")
	pid := s.proc.cmd.Process.Pid
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if v := query(t, dsn, "SELECT string_agg(v, ',' ORDER BY v) FROM kept"); v != "x,y" {
		t.Fatalf("after a crash: %q (committed rows lost)", v)
	}
	if err := s.DropDB(ctx, name); err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	last := s.proc.cmd.Process.Pid
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{pid, last} {
		if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("postmaster %d still there after Close: %v", p, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", dir, err)
	}
}
