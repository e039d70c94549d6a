package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The supervisor is the helper's first stage for the Landlock wall and
// for no wall. The gateway starts it in a session of its own. It stays
// outside the walls: it
// is the child subreaper of everything the command starts, so a process
// that double-forks or calls setsid still ends up its child, and when the
// command's shell exits, the gateway closes the control pipe (a timeout,
// /stop) or the gateway dies (the pipe closes with it), it kills every
// process left, reaps them and exits with the shell's status.
//
// Behind Landlock the command cannot signal or trace it: Landlock (from
// ABI 6) keeps a command's signals and ptrace inside its own domain, which
// the supervisor is not in. It never runs the command in its own process:
// the walls are built by a second copy of the helper, which then becomes
// bash. (Had a thread of the supervisor built them, the command could
// ptrace that thread, of its own domain, and write the memory it shares
// with the unrestricted rest.) The namespaces wall needs no supervisor:
// see namespaced.
//
// Without a wall a command runs as the gateway's user and could kill the
// supervisor first; then what it started outlives it, which the README
// says.

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC (linux/close_range.h).
const closeRangeCloexec = 1 << 2

func supervise(sp *spec) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("child subreaper: %w", err)
	}
	// Whatever the gateway inherited without close-on-exec (a terminal, a
	// socket its service manager passed) must not reach the command.
	if err := cloexecFrom(3); err != nil {
		return fmt.Errorf("closing inherited descriptors: %w", err)
	}
	attr := &syscall.ProcAttr{Dir: sp.Work, Files: []uintptr{0, 1, 2}}
	var pid int
	var err error
	if sp.Wall == None {
		ttyFilter()
		attr.Env = sp.Env
		pid, err = syscall.ForkExec(sp.Bash, sp.Args, attr)
	} else {
		next := *sp
		next.Stage, next.Control = "walls", false
		b, merr := json.Marshal(next)
		if merr != nil {
			return merr
		}
		attr.Env = []string{helperEnv + "=" + string(b)}
		pid, err = syscall.ForkExec("/proc/self/exe", []string{"irisgate-sandbox"}, attr)
	}
	if err != nil {
		return fmt.Errorf("starting %s: %w", sp.Args, err)
	}
	var stop atomic.Bool
	if sp.Control {
		unix.SetNonblock(3, true) // read through the poller: no thread waits on it
		go func() {
			ctl := os.NewFile(3, "control")
			var b [64]byte
			for {
				if _, err := ctl.Read(b[:]); err != nil {
					break // EOF: the gateway closed its end, or is gone
				}
			}
			stop.Store(true)
			killChildren()
		}()
	}
	ws := reap(pid, &stop)
	switch {
	case ws.Exited():
		os.Exit(ws.ExitStatus())
	case ws.Signaled():
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(125)
	return nil
}

// reap reaps every child until none is left and returns the status of
// first (the shell). Once the shell has gone, or stop is set, each turn
// kills every child left: the children of a killed one are reparented to
// the supervisor before it can be reaped, so the next turn finds them.
func reap(first int, stop *atomic.Bool) unix.WaitStatus {
	var status unix.WaitStatus
	ended := false
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return status // ECHILD: nothing is left
		}
		if pid == first {
			status, ended = ws, true
		}
		if ended || stop.Load() {
			killChildren()
		}
	}
}

// killChildren sends SIGKILL to every child of the supervisor.
func killChildren() {
	for _, pid := range children() {
		unix.Kill(pid, unix.SIGKILL)
	}
}

// children lists the supervisor's children: from each of its threads'
// /proc children list, or, on a kernel without them, by a scan of /proc.
func children() []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var out []int
	listed := false
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		listed = true
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if listed {
		return out
	}
	self := os.Getpid()
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		n, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold anything but the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(self) {
				out = append(out, n)
			}
		}
	}
	return out
}

// cloexecFrom marks every descriptor from fd up close-on-exec.
func cloexecFrom(fd int) error {
	err := unix.CloseRange(uint(fd), ^uint(0), closeRangeCloexec)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	// Before Linux 5.11.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			unix.FcntlInt(uintptr(n), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
	return nil
}

// ttyFilter, without a wall, refuses TIOCSTI and TIOCLINUX to everything
// the supervisor starts, where it may: a gateway with CAP_SYS_ADMIN (run
// as root) could otherwise type into any terminal it opens, controlling
// or not. Without that capability the kernel refuses TIOCSTI on a
// terminal that is not the caller's controlling one, and the supervisor's
// session has none; seccomp then needs no_new_privs, which would break the
// owner's setuid programs, so it is left out.
func ttyFilter() {
	prog, err := ttyProgram()
	if err != nil {
		return
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0)
}
