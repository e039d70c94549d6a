package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Roles a lock is held in.
const (
	RoleServe = "serve" // a running gateway
	RoleCLI   = "cli"   // a command acting on the directory while no gateway runs
)

// Lock is an exclusive lock on a data directory, held until Release or
// the process's end (the kernel drops it even on kill -9, so a crash
// never leaves a directory locked).
type Lock struct {
	f *os.File
}

// InUseError says who holds a directory's lock.
type InUseError struct {
	Dir  string
	PID  int    // 0 when unknown
	Role string // RoleServe, RoleCLI or "" when unknown
	// Postgres: the gateway refused keeps its state in PostgreSQL, where
	// another --data alone is not enough.
	Postgres bool
}

func (e *InUseError) Error() string {
	who := "another irisgate process"
	switch e.Role {
	case RoleServe:
		who = "another irisgate serve"
	case RoleCLI:
		who = "an irisgate command"
	}
	if e.PID > 0 {
		who += fmt.Sprintf(" (pid %d)", e.PID)
	}
	if e.Postgres {
		return fmt.Sprintf("data directory %s is in use by %s: stop it first, or give this one another --data and a database of its own (--store); "+
			"several gateways on one database are not kept in step yet", e.Dir, who)
	}
	return fmt.Sprintf("data directory %s is in use by %s: two gateways on one directory would run every cron job twice; stop it first, or give this one another --data", e.Dir, who)
}

// Acquire takes dir's lock for role, waiting up to wait for a holder to
// let go (a command holds it for a moment only, and so does Held's
// probe); an *InUseError says who has it.
func Acquire(dir, role string, wait time.Duration) (*Lock, error) {
	p := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := tryLock(f)
		if err == nil {
			break
		}
		if !errors.Is(err, errLocked) {
			f.Close()
			return nil, fmt.Errorf("data directory lock %s: %w", p, err)
		}
		// A live gateway will not let go: say so at once. Anything else
		// (a command, a probe, a name left by a crash) is waited for.
		if h := holder(dir); time.Now().After(deadline) || (h.Role == RoleServe && alive(h.PID)) {
			f.Close()
			return nil, h
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Who holds it, for the message a second process prints.
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("%d %s\n", os.Getpid(), role)), 0)
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0) // no stale holder named after we are gone
	unlock(l.f)
	l.f.Close()
	l.f = nil
}

// Held reports whether some process holds dir's lock now, and who.
func Held(dir string) (*InUseError, bool) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if err := tryLock(f); err != nil {
		return holder(dir), errors.Is(err, errLocked)
	}
	unlock(f)
	return nil, false
}

func holder(dir string) *InUseError {
	e := &InUseError{Dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil {
		return e
	}
	pid, role, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	e.PID, _ = strconv.Atoi(pid)
	if role == RoleServe || role == RoleCLI {
		e.Role = role
	}
	return e
}
