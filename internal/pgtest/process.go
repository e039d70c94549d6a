package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// ready is the line the postmaster logs once it accepts connections.
var ready = []byte("database system is ready to accept connections")

// process is a running postmaster.
type process struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done
}

// startProcess starts cmd and waits until the server accepts connections
// (it logs so) or exits.
//
// The server dies with the test binary even when that is killed: the
// postmaster gets a parent-death signal (Linux). The kernel sends it when
// the thread that started the child exits, not the process, so the child
// is started from a goroutine locked to its thread for the child's whole
// life.
func startProcess(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, log: &syncBuffer{watch: ready, seen: make(chan struct{})}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	setParentDeath(cmd)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	select {
	case <-p.log.seen:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("pgtest: postgres exited before accepting connections (%v):\n%s", p.err, p.log.tail())
	case <-time.After(Wait):
		p.stop(syscall.SIGKILL)
		return nil, fmt.Errorf("pgtest: postgres did not accept connections within %v:\n%s", Wait, p.log.tail())
	}
}

// stop signals the postmaster (SIGINT: fast shutdown; SIGQUIT: immediate)
// and waits for it, killing it if it outlasts Wait.
func (p *process) stop(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(Wait):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("pgtest: postgres did not stop within %v:\n%s", Wait, p.log.tail())
	}
	// Only a fast shutdown ends cleanly; the others exit with a status.
	if p.err != nil && sig == syscall.SIGINT {
		return fmt.Errorf("pgtest: postgres ended with %v:\n%s", p.err, p.log.tail())
	}
	return nil
}

// syncBuffer collects a process's output (the last maxLog bytes) and
// closes seen once watch has appeared in it.
type syncBuffer struct {
	mu    sync.Mutex
	b     []byte
	watch []byte
	seen  chan struct{}
	found bool
}

const maxLog = 64 << 10

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if w.watch != nil && !w.found && bytes.Contains(w.b, w.watch) {
		w.found = true
		close(w.seen)
	}
	if len(w.b) > maxLog {
		w.b = append(w.b[:0], w.b[len(w.b)-maxLog/2:]...)
	}
	return len(p), nil
}

func (w *syncBuffer) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.b)
}

func (w *syncBuffer) tail() string {
	b := w.Bytes()
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}
