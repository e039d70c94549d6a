package admin

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/store"
)

// A data directory deeper than a socket address holds (108 bytes on
// Linux) still gets its admin socket, reached through /proc/self/fd.
func TestSocketInADeepDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd")
	}
	st, err := store.Open(filepath.Join(dir, datadir.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ln, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(Backend{Store: st, Info: Info{DataDir: dir, PID: os.Getpid()}})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Shutdown(context.Background()); <-done }()
	if fi, err := os.Stat(SocketPath(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v %v", fi, err)
	}
	c, err := Connect(context.Background(), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Live() || c.info.DataDir != dir {
		t.Fatalf("connected to %+v (live %v)", c.info, c.Live())
	}
	tok, err := c.CreateToken(context.Background(), "deep", "")
	if err != nil || !strings.HasPrefix(tok.Value, "igt_") {
		t.Fatalf("create: %+v %v", tok, err)
	}
	// Requests of the socket are local; an unknown path is not found.
	req, _ := http.NewRequest(http.MethodGet, "http://irisgate/nope", nil)
	res, err := c.Do(req)
	if err != nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %v %v", res, err)
	}
	res.Body.Close()
}

// The registry lists gateways that answer, and forgets those that do not.
func TestRegistry(t *testing.T) {
	reg := t.TempDir()
	os.Chmod(reg, 0o700)
	t.Setenv(RuntimeDirEnv, reg)
	dead := t.TempDir()
	if _, err := Register(dead); err != nil { // no socket answers there
		t.Fatal(err)
	}
	if got := Running(context.Background()); len(got) != 0 {
		t.Fatalf("running: %+v", got)
	}
	if ents, _ := os.ReadDir(reg); len(ents) != 0 {
		t.Fatalf("a dead gateway's entry was kept: %v", ents)
	}
	// A registry others can write to is not used.
	os.Chmod(reg, 0o777)
	if _, err := Register(dead); err == nil {
		t.Fatal("registered in a directory others can write")
	}
}
