package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// walls is the helper's second stage, started by the supervisor: it
// builds the walls around its own (locked) thread and execs bash behind
// them, or, probing, checks from inside that they hold.
func walls(sp *spec) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := restrictLandlock(sp); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := installSeccomp(sp); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if err := dropCaps(); err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	if sp.Probe {
		return selfCheck(sp)
	}
	return unix.Exec(sp.Bash, sp.Args, sp.Env)
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
	if err := unix.IoctlSetPointerInt(0, unix.TIOCSTI, 0); !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("TIOCSTI: %v, want refused by seccomp", err)
	}
	return nil
}

// dropCaps empties the bounding, ambient and current capability sets, so
// a command run as root keeps no power beyond its files' owner bits (it
// still is uid 0 for files it owns). Without CAP_SETPCAP (an unprivileged
// gateway outside a user namespace) the bounding set stays, and the rest
// is emptied all the same.
func dropCaps() error {
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
				break // past the kernel's last capability, or not ours to drop
			}
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	var data [2]unix.CapUserData
	return unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0])
}
