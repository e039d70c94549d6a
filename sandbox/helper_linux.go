package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if sp.Wall == Namespaces {
		if err := setupMounts(&sp); err != nil {
			return fmt.Errorf("mount namespace: %w", err)
		}
		if !sp.Network {
			if err := loopbackUp(); err != nil {
				return fmt.Errorf("loopback: %w", err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := restrictLandlock(&sp); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := installSeccomp(&sp); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if err := dropCaps(); err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	if sp.Probe {
		return selfCheck(&sp)
	}
	return unix.Exec(sp.Bash, sp.Args, sp.Env)
}

// helper prepares the helper process for spec behind wall w.
func (s *Sandbox) helper(w Wall, sp spec) (*exec.Cmd, error) {
	sp.Wall, sp.ABI, sp.Bash, sp.Env, sp.Temp = w, s.abi, s.bash, s.env, s.cfg.Temp
	sp.Hide = s.hidden()
	for _, e := range s.cfg.Expose {
		if c, err := filepath.EvalSymlinks(e); err == nil {
			sp.Expose = append(sp.Expose, c)
		}
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	// /proc/self/exe is the gateway's own binary even when an upgrade has
	// replaced the file meanwhile: the helper always speaks this spec.
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"irisgate-sandbox"}
	cmd.Env = []string{helperEnv + "=" + string(b)}
	cmd.Dir = sp.Work
	attr := &syscall.SysProcAttr{Setpgid: true}
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
	}
	cmd.SysProcAttr = attr
	return cmd, nil
}

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
	s.abi = abi
	var why []string
	for w := want; w > None; w-- {
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
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return errors.New("the probe did not finish within 20s")
	}
	if err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(buf.String()), "irisgate sandbox:"))
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(msg)
	}
	return nil
}

// selfCheck, inside the walls, tries what they must stop.
func selfCheck(sp *spec) error {
	var b [8]byte
	rand.Read(b[:])
	outside := filepath.Join(filepath.Dir(sp.Temp), ".irisgate-probe-"+hex.EncodeToString(b[:]))
	fd, err := unix.Open(outside, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err == nil {
		unix.Close(fd)
		unix.Unlink(outside)
		return fmt.Errorf("a file outside the sandbox could be created (%s)", outside)
	}
	if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("creating %s: %v, want permission denied", outside, err)
	}
	if fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
		unix.Close(fd)
		return errors.New("a Unix socket could be made")
	}
	return nil
}

// dropCaps empties the bounding, ambient and current capability sets, so
// a command run as root keeps no power beyond its files' owner bits (it
// still is uid 0 for files it owns). Without CAP_SETPCAP (an unprivileged
// gateway outside a user namespace) there is nothing to drop.
func dropCaps() error {
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			if errors.Is(err, unix.EPERM) {
				return nil
			}
			return err
		}
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	var data [2]unix.CapUserData
	return unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0])
}
