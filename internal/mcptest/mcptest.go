// Package mcptest runs the real MCP servers of the reference
// implementation (@modelcontextprotocol/server-everything and
// server-filesystem, from npm) for tests. .ci/run installs them with
// `npm ci --prefix internal/mcptest/node`; a test that finds them missing
// installs them the same way (once, whichever test binary comes first),
// and skips only where npm itself is missing (it fails there under CI).
package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// NodeDir holds package.json, the lock file and, once installed,
// node_modules.
func NodeDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "node")
}

func scriptPath(pkg, file string) string {
	return filepath.Join(NodeDir(), "node_modules", "@modelcontextprotocol", pkg, "dist", file)
}

// installed: both servers are there.
func installed() bool {
	for _, pkg := range []string{"server-everything", "server-filesystem"} {
		if _, err := os.Stat(scriptPath(pkg, "index.js")); err != nil {
			return false
		}
	}
	return true
}

var (
	installOnce sync.Once
	installErr  error
)

func script(t testing.TB, pkg, file string) (node, js string) {
	t.Helper()
	js = scriptPath(pkg, file)
	if !installed() {
		npm, err := exec.LookPath("npm")
		if err != nil {
			msg := fmt.Sprintf("npm is not installed, so neither are the MCP test servers it installs (%v): install Node.js and npm (.ci/run does)", err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		installOnce.Do(func() { installErr = install(npm) })
		if installErr != nil {
			t.Fatalf("installing the MCP test servers: %v", installErr)
		}
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(js)
	}
	if err != nil {
		t.Fatalf("the MCP test server %s: %v (npm ci --prefix %s installs it)", pkg, err, NodeDir())
	}
	return node, js
}

// install runs npm ci in NodeDir, holding a lock there: go test runs
// several packages' test binaries at once, and two npm ci in one
// directory would undo each other.
func install(npm string) error {
	lock, err := os.OpenFile(filepath.Join(NodeDir(), ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if installed() {
		return nil // another test binary did it meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, npm, "ci", "--prefix", NodeDir(), "--no-audit", "--no-fund")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		said := out.String()
		if len(said) > 2000 {
			said = "…" + said[len(said)-2000:]
		}
		return fmt.Errorf("npm ci --prefix %s: %v\n%s", NodeDir(), err, said)
	}
	if !installed() {
		return fmt.Errorf("npm ci --prefix %s succeeded but the servers are not in node_modules", NodeDir())
	}
	return nil
}

// Everything is the command line of server-everything over stdio.
func Everything(t testing.TB) []string {
	t.Helper()
	node, js := script(t, "server-everything", "index.js")
	return []string{node, js, "stdio"}
}

// Filesystem is the command line of server-filesystem allowed dirs.
func Filesystem(t testing.TB, dirs ...string) []string {
	t.Helper()
	node, js := script(t, "server-filesystem", "index.js")
	return append([]string{node, js}, dirs...)
}

// HTTP is server-everything over streamable HTTP, on a loopback port.
type HTTP struct {
	URL string
	cmd *exec.Cmd
}

// EverythingHTTP starts server-everything's streamableHttp transport and
// waits until it listens. It is stopped when the test ends.
func EverythingHTTP(t testing.TB) *HTTP {
	t.Helper()
	node, js := script(t, "server-everything", "index.js")
	var lastErr error
	for range 3 {
		h, err := startHTTP(t, node, js)
		if err == nil {
			return h
		}
		lastErr = err // the free port was taken meanwhile: another one
	}
	t.Fatalf("server-everything over HTTP did not start: %v", lastErr)
	return nil
}

func startHTTP(t testing.TB, node, js string) (*HTTP, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, "--require", filepath.Join(NodeDir(), "bindlocal.cjs"), js, "streamableHttp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), fmt.Sprintf("PORT=%d", port)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &HTTP{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), cmd: cmd}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var said []string
		for sc.Scan() {
			said = append(said, sc.Text())
			if strings.Contains(sc.Text(), "listening on port") {
				ready <- nil
				for sc.Scan() {
				}
				return
			}
		}
		ready <- fmt.Errorf("it ended saying %q", said)
	}()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("it did not listen within 30s")
	}
	if err != nil {
		h.Stop()
		return nil, err
	}
	t.Cleanup(h.Stop)
	return h, nil
}

// Stop kills the server (and waits for it).
func (h *HTTP) Stop() {
	if h.cmd.Process == nil || h.cmd.ProcessState != nil {
		return
	}
	syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	h.cmd.Wait()
}
