package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv marks a process started as the sandbox helper; its value is
// the spec. It is the helper's whole environment: the command's own comes
// from the spec.
const helperEnv = "IRISGATE_SANDBOX_HELPER"

// minSignalABI is the first Landlock ABI that keeps signals in (scoped
// signals, Linux 6.12): without it, and without a PID namespace, a
// command could signal every process of the gateway's user.
const minSignalABI = 6

// spec is what the helper builds and runs.
type spec struct {
	Wall    Wall
	ABI     int
	Bash    string
	Args    []string
	Env     []string
	Work    string
	Temp    string
	Hide    []string
	Expose  []string
	Network bool
	// Stage is "" for the supervisor the gateway starts, "walls" for the
	// process it starts behind the walls (which becomes bash).
	Stage string
	// Control: the supervisor's fd 3 is the read end of the gateway's
	// control pipe.
	Control bool
	// Devpts: the supervisor mounted a private devpts instance on
	// /dev/pts, so the command may have terminals of its own.
	Devpts bool
	// Probe: build the walls, check from inside that they hold, exit.
	Probe bool
}

// The helper runs in init, before main and before any other package of
// the binary has done more than initialise itself: whatever binary links
// this package (irisgate, a test binary) can be the helper, and nothing of
// the gateway starts in it. It never returns.
func init() {
	raw, ok := os.LookupEnv(helperEnv)
	if !ok {
		return
	}
	// Landlock, seccomp and no_new_privs bind the calling thread: build
	// them and exec on one thread.
	runtime.LockOSThread()
	os.Unsetenv(helperEnv)
	err := helperMain(raw)
	if err == nil {
		os.Exit(0) // a probe that passed
	}
	fmt.Fprintf(os.Stderr, "irisgate sandbox: %v\n", err)
	os.Exit(125)
}

func helperMain(raw string) error {
	var sp spec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		return fmt.Errorf("bad spec: %w", err)
	}
	switch {
	case sp.Stage == "walls":
		return walls(&sp)
	case sp.Wall == Namespaces:
		return namespaced(&sp)
	}
	return supervise(&sp)
}

// namespaced is the helper behind the namespaces wall: PID 1 of fresh
// namespaces, it shapes the mounts and builds the walls around itself,
// then becomes bash. No supervisor is needed there: when the PID
// namespace's first process exits (the command ends, or the gateway
// kills it on a timeout or /stop, or dies itself: Pdeathsig), the kernel
// kills every process in it before the exit is reported, and a command
// cannot reach a process outside it.
func namespaced(sp *spec) error {
	if err := setupMounts(sp); err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	if !sp.Network {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
	}
	// The capabilities the mounts needed end here.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	if err := cloexecFrom(3); err != nil {
		return fmt.Errorf("closing inherited descriptors: %w", err)
	}
	return walls(sp)
}

// helper prepares the helper for spec behind wall w: the supervisor, or
// behind the namespaces wall the helper that becomes bash.
func (s *Sandbox) helper(w Wall, sp spec) (*Cmd, error) {
	bash, err := s.bashPath()
	if err != nil {
		return nil, err
	}
	sp.Wall, sp.Bash, sp.Env, sp.Temp = w, bash, s.Env(), s.Temp()
	if s != nil {
		sp.ABI = s.abi
		sp.Hide = s.hidden()
		sp.Expose = s.exposed()
	}
	sp.Control = !sp.Probe && w != Namespaces
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	// /proc/self/exe is the gateway's own binary even when an upgrade has
	// replaced the file meanwhile: the helper always speaks this spec.
	c := exec.Command("/proc/self/exe")
	c.Args = []string{"irisgate-sandbox"}
	// One P: the helper does one thing at a time, and each thread a Go
	// process starts must be scheduled again before it can exit.
	c.Env = []string{helperEnv + "=" + string(b), "GOMAXPROCS=1"}
	c.Dir = sp.Work
	// A session of its own: no controlling terminal, so no command can
	// reach the gateway's terminal through /dev/tty (TIOCSTI there would
	// type into the owner's shell).
	attr := &syscall.SysProcAttr{Setsid: true}
	if w == Namespaces {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
		if !sp.Network {
			attr.Cloneflags |= syscall.CLONE_NEWNET
		}
		// The same ids inside: files keep their owners, and the command
		// gains no power over anything the namespace does not own.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// The helper mounts and brings the loopback up after exec, which
		// as anyone but root inside drops the namespace's capabilities
		// unless they are ambient; it clears them before bash.
		attr.AmbientCaps = []uintptr{capSysAdmin, capNetAdmin}
		// The gateway's death ends the namespace too. (Pdeathsig follows
		// the thread that started the helper; the gateway's threads live
		// as long as it does: none of its goroutines exits locked.)
		attr.Pdeathsig = syscall.SIGKILL
	}
	c.SysProcAttr = attr
	cmd := newCmd(c)
	if sp.Control {
		if err := cmd.withControl(); err != nil {
			return nil, err
		}
	}
	return cmd, nil
}

const (
	capNetAdmin = 12
	capSysAdmin = 21
)

// settle returns the strongest wall up to want that holds here, with the
// Landlock ABI and why stronger ones do not.
func settle(s *Sandbox, want Wall) (Wall, int, string) {
	if want == None {
		return None, 0, "turned off (--sandbox off)"
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return None, 0, "the seccomp filter is written for amd64 and arm64 only, not " + runtime.GOARCH
	}
	abi := landlockABI()
	if abi < 1 {
		return None, 0, "the kernel has no Landlock (Linux 5.13 or later with landlock in the lsm= boot list)"
	}
	if s.cfg.MaxABI > 0 && abi > s.cfg.MaxABI {
		abi = s.cfg.MaxABI
	}
	s.abi = abi
	var why []string
	for w := want; w > None; w-- {
		if w == Landlock && abi < minSignalABI {
			why = append(why, fmt.Sprintf("landlock: Landlock ABI %d cannot keep a command's signals in (ABI %d, Linux 6.12, can), and without a PID namespace nothing else does", abi, minSignalABI))
			continue
		}
		err := s.probe(w)
		if err == nil {
			return w, abi, strings.Join(why, "; ")
		}
		why = append(why, w.String()+": "+err.Error())
	}
	return None, abi, strings.Join(why, "; ")
}

// probe runs the helper behind w once, in a fresh directory of the temp
// directory, and checks that it reports the walls hold.
func (s *Sandbox) probe(w Wall) error {
	work, err := os.MkdirTemp(s.cfg.Temp, "probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	cmd, err := s.helper(w, spec{Work: work, Probe: true})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Kill()
		<-done
		return errors.New("the probe did not finish within 20s")
	}
	if err != nil {
		msg := strings.TrimSpace(buf.String())
		if i := strings.LastIndex(msg, "irisgate sandbox:"); i >= 0 {
			msg = strings.TrimSpace(msg[i+len("irisgate sandbox:"):])
		}
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(msg)
	}
	return nil
}
