// Package pgtest runs a real PostgreSQL server for tests: Debian's binaries
// (initdb, postgres) on a data directory in a fresh temporary directory,
// listening only on a Unix socket there, stopped and removed when the tests
// end. Tests that use it skip, saying why, where the binaries are absent
// and CI is not set; under CI a missing server is a failure.
//
// One server serves a whole test binary (DB hands each test a fresh
// database on it): a package's TestMain calls Main, which stops it after
// the tests and then checks for leaked goroutines. A test that needs its
// own server (to stop or restart it) calls Start.
//
// initdb and postgres refuse to run as root. When the tests do (CI runs
// as root), the server runs as the user nobody, with its directory handed
// to that user; root still connects through the socket.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// Wait bounds each step of a server's life: initdb, start, stop.
const Wait = 2 * time.Minute

// Server is a PostgreSQL server of the tests' own.
type Server struct {
	dir  string // everything: data/, the socket, initdb's output
	bin  string
	cred *syscall.Credential // nil: run as ourselves
	opts []string            // -c settings

	mu   sync.Mutex
	proc *process // nil while stopped
	dbs  atomic.Int64
}

// Option changes how Start sets the server up.
type Option func(*Server)

// Setting passes a server setting (postgres -c name=value), as
// postgresql.conf would have it.
func Setting(name, value string) Option {
	return func(s *Server) { s.opts = append(s.opts, "-c", name+"="+value) }
}

// Fast is the settings of the shared server: no fsync, which makes a
// fresh database and its migration two to three times quicker. A commit
// still reaches the kernel before it returns, so it survives the server
// crashing (Crash), not the machine: tests check what is stored and what
// a crash keeps; a bench of durable commits uses SharedDurable.
func Fast() []Option {
	return []Option{Setting("fsync", "off"), Setting("full_page_writes", "off")}
}

// ErrNoBinaries is Start's error where PostgreSQL is not installed.
var ErrNoBinaries = errors.New("pgtest: PostgreSQL's initdb and postgres are not installed (Debian: apt-get install postgresql; or set PGTEST_BIN to their directory)")

// Bin finds the directory of initdb and postgres: $PGTEST_BIN, else the
// newest /usr/lib/postgresql/*/bin, else pg_config --bindir.
func Bin() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("PGTEST_BIN"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("pgtest: PGTEST_BIN=%s has no initdb and postgres", d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := string(trimSpace(out)); has(d) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

// version is the major version in /usr/lib/postgresql/<v>/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// Start makes a new cluster in a temporary directory and starts it. Close
// stops it and removes everything.
func Start(opts ...Option) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	for _, o := range opts {
		o(s)
	}
	parent := ""
	if os.Geteuid() == 0 {
		// The server's user must reach its directory: /tmp lets anyone
		// through, a root-owned TMPDIR may not.
		parent = "/tmp"
		if s.cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	if s.dir, err = os.MkdirTemp(parent, "irisgate-pg-"); err != nil {
		return nil, err
	}
	// A Unix socket's path is at most 107 bytes.
	if len(s.dir) > 80 {
		os.RemoveAll(s.dir)
		if s.dir, err = os.MkdirTemp("/tmp", "irisgate-pg-"); err != nil {
			return nil, err
		}
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
	if err := s.initdb(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if err := s.Start(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// unprivileged is the user a root test run starts the server as.
func unprivileged() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses root: no user nobody to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user nobody: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	// Messages in English whatever the machine's locale: the start waits
	// for one of them.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C", "PGTZ=UTC")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

func (s *Server) initdb() error {
	cmd := s.command("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	out, err := runFor(cmd, Wait)
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

// runFor runs cmd to its end, killing it after d.
func runFor(cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return out.Bytes(), fmt.Errorf("still running after %v", d)
	}
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Dir is the directory of the socket (libpq's host).
func (s *Server) Dir() string { return s.dir }

// Start starts a stopped server on its data directory (the first start is
// Start's); it returns once the server accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("pgtest: the server is running")
	}
	args := []string{"-D", s.data(), "-k", s.dir, "-c", "listen_addresses=", "-c", "port=5432",
		"-c", "logging_collector=off", "-c", "shared_buffers=32MB", "-c", "max_connections=200"}
	p, err := startProcess(s.command("postgres", append(args, s.opts...)...))
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// Stop shuts the server down (fast: sessions are ended), waiting for it.
func (s *Server) Stop() error {
	return s.stop(syscall.SIGINT)
}

// Crash stops the server the way a power cut would: immediately, leaving
// its next start to recover from the write-ahead log.
func (s *Server) Crash() error {
	return s.stop(syscall.SIGQUIT)
}

func (s *Server) stop(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	err := s.proc.stop(sig)
	s.proc = nil
	return err
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	err := s.Stop()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// URL is the connection URL of database db, as the store takes it.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + db,
		RawQuery: url.Values{"host": {s.dir}, "port": {"5432"}, "sslmode": {"disable"}}.Encode()}
	return u.String()
}

// CreateDB makes an empty database and returns its URL.
func (s *Server) CreateDB(ctx context.Context) (name, dsn string, err error) {
	name = fmt.Sprintf("t%d", s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", "", err
	}
	return name, s.URL(name), nil
}

// DropDB removes a database, ending its sessions.
func (s *Server) DropDB(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// DB returns the URL of a fresh, empty database on the tests' shared
// server, dropped when t ends. It skips t where PostgreSQL is not
// installed and CI is not set.
func (s *Server) DB(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	name, dsn, err := s.CreateDB(ctx)
	if err != nil {
		t.Fatalf("pgtest: creating a database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Wait)
		defer cancel()
		if err := s.DropDB(ctx, name); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return dsn
}

// The servers a test binary shares, stopped by Main: the fast one (Shared)
// and, for benchmarks of commits, a durable one (SharedDurable).
var shared struct {
	mu      sync.Mutex
	fast    lazy
	durable lazy
	main    bool // Main runs the tests: it stops the servers after them
}

type lazy struct {
	srv *Server
	err error
}

// Shared returns the test binary's server (with the Fast settings),
// starting it on first use. It skips t where PostgreSQL is not installed
// and CI is not set, and fails it otherwise.
func Shared(t testing.TB) *Server {
	t.Helper()
	return sharedServer(t, &shared.fast, Fast()...)
}

// SharedDurable is Shared's durable twin: PostgreSQL's default settings,
// every commit flushed to disk before it returns. For benchmarks of what a
// commit costs.
func SharedDurable(t testing.TB) *Server {
	t.Helper()
	return sharedServer(t, &shared.durable)
}

func sharedServer(t testing.TB, l *lazy, opts ...Option) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main, which stops the shared servers after the tests")
	}
	if l.srv == nil && l.err == nil {
		l.srv, l.err = Start(opts...)
	}
	if l.err != nil {
		Skip(t, l.err)
	}
	return l.srv
}

// Skip ends t for an error of Start: a skip where PostgreSQL is not
// installed and CI is not set, a failure otherwise.
func Skip(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinaries) && os.Getenv("CI") == "" {
		t.Skipf("%v: skipped (with CI set this fails)", err)
	}
	t.Fatal(err)
}

// DB returns the URL of a fresh database on the shared server (Shared).
func DB(t testing.TB) string {
	t.Helper()
	return Shared(t).DB(t)
}

// Main is a package's TestMain: it runs the tests, stops the shared servers
// they started, then fails the run on goroutines left behind.
func Main(m *testing.M, ignore ...goleak.Option) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	for _, l := range []*lazy{&shared.fast, &shared.durable} {
		if l.srv != nil {
			if err := l.srv.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "pgtest: stopping a server:", err)
				code = 1
			}
			l.srv = nil
		}
	}
	shared.mu.Unlock()
	if code == 0 {
		if err := goleak.Find(ignore...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
