package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// irisgateBinary compiles cmd/irisgate once per test run (with -race when
// the tests run under the race detector, which also reuses their build
// cache) and returns its path.
func irisgateBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build irisgate with: %v", err)
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "irisgate-e2e-"); buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "irisgate")
		args := []string{"build", "-o", buildBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/irisgate/irisgate/cmd/irisgate")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, goBin, args...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build irisgate: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveProc is one `irisgate serve` process.
type serveProc struct {
	t      *testing.T
	name   string
	addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
	err    error         // Wait's result, set before exited closes

	mu  sync.Mutex
	log strings.Builder
}

// startServe runs `irisgate serve` on addr with data directory dir and
// returns once it logged that it is listening.
func startServe(t *testing.T, name, bin, addr, dir string, env ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data", dir)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IRISGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "IRISGATE_LOG_LEVEL=info")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{t: t, name: name, addr: addr, cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting irisgate: %v", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line)
			p.log.WriteByte('\n')
			p.mu.Unlock()
			if strings.Contains(line, "irisgate listening") {
				once.Do(func() { close(ready) })
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if out := p.output(); strings.Contains(out, "WARNING: DATA RACE") || strings.HasPrefix(out, "panic: ") || strings.Contains(out, "\npanic: ") {
			t.Errorf("%s: the gateway process reported a race or a panic:\n%s", name, out)
		} else if t.Failed() {
			t.Logf("%s output:\n%s", name, out)
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("%s exited before listening (%v):\n%s", name, p.err, p.output())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start listening within 30s:\n%s", name, p.output())
	}
	return p
}

func (p *serveProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill ends the process with SIGKILL (a crash: nothing is flushed, no
// handler runs) and waits for it.
func (p *serveProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s: still running 10s after SIGKILL", p.name)
	}
}

// stop ends the process with SIGTERM (a graceful shutdown) and returns its
// exit error.
func (p *serveProc) stop(timeout time.Duration) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s: no exit within %v of SIGTERM", p.name, timeout)
	}
}

// healthHead reads outbox_head from /healthz.
func (p *serveProc) healthHead(ctx context.Context) (int64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
		Head   int64  `json:"outbox_head"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, err
	}
	if h.Status != "ok" {
		return 0, errors.New("healthz: status " + h.Status)
	}
	return h.Head, nil
}
