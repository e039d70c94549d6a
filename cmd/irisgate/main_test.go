package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
)

// TestMain lets a test run this binary as irisgate itself: a child started
// with asMainEnv set runs main() with its arguments, so serve, pair and
// chat are tested as the processes people start, on real stdio.
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	pgtest.Main(m) // goleak's check, after stopping the PostgreSQL server postgres_test.go started
}

const asMainEnv = "IRISGATE_TEST_AS_MAIN"

// irisgateCmd is this test binary started as `irisgate args…`, in dir,
// with the environment cleared of IRISGATE_* settings but for env.
func irisgateCmd(t *testing.T, ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IRISGATE_") && !strings.HasPrefix(kv, "NO_COLOR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, asMainEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = testgw.Wait
	return cmd
}

// lines collects a stream line by line and lets a test wait for one.
type lines struct {
	mu    sync.Mutex
	all   []string
	added chan struct{}
	done  chan struct{}
}

func collect(r io.Reader) *lines {
	l := &lines{added: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
			select {
			case l.added <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

func (l *lines) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...)
}

// waitFor waits until a line contains want and returns it.
func (l *lines) waitFor(t *testing.T, want string) string {
	t.Helper()
	deadline := time.After(testgw.Wait)
	for {
		for _, s := range l.snapshot() {
			if strings.Contains(s, want) {
				return s
			}
		}
		select {
		case <-l.added:
		case <-l.done:
			for _, s := range l.snapshot() {
				if strings.Contains(s, want) {
					return s
				}
			}
			t.Fatalf("the stream ended without %q:\n%s", want, strings.Join(l.snapshot(), "\n"))
		case <-deadline:
			t.Fatalf("no %q within %v:\n%s", want, testgw.Wait, strings.Join(l.snapshot(), "\n"))
		}
	}
}

// serveProc runs `irisgate serve` until the test says stop.
type serveProc struct {
	cmd            *exec.Cmd
	stdout, stderr *lines
}

func startServe(t *testing.T, dir string, env []string, args ...string) *serveProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := irisgateCmd(t, ctx, dir, env, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, stdout: collect(outR), stderr: collect(errR)}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	return p
}

// stop ends the gateway as Ctrl-C does and waits for it.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.stdout.done
	<-p.stderr.done
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v:\n%s", err, strings.Join(p.stderr.snapshot(), "\n"))
	}
}

// runIrisgate runs a command to its end and returns its stdout and stderr.
func runIrisgate(t *testing.T, dir string, env []string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	cmd := irisgateCmd(t, ctx, dir, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("irisgate %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}
