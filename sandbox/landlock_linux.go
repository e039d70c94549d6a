package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock through raw system calls rather than go-landlock: that library
// enforces a policy on every thread of the process, which before ABI 8
// takes libpsx, and libpsx wraps pthread_create for the whole binary
// under cgo. The helper only needs its one locked thread restricted
// before it execs, which is what landlock_restrict_self does by itself.

// rulesetAttr is struct landlock_ruleset_attr up to the scoped field
// (ABI 6); the size passed tells older kernels which fields exist.
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

type pathBeneath struct {
	allowed  uint64
	parentFd int32
}

const (
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fsFileOnly are the rights that apply to a file (not a directory):
	// a rule on a file may hold no others.
	fsFileOnly = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	fsDevice = fsRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// fsHandled is every file access right ABI abi knows.
func fsHandled(abi int) uint64 {
	switch {
	case abi >= 5:
		return 1<<16 - 1
	case abi >= 3:
		return 1<<15 - 1
	case abi == 2:
		return 1<<14 - 1
	}
	return 1<<13 - 1
}

// restrictLandlock lets the thread read everything (but what is hidden),
// write only in the working and temp directories and the harmless devices,
// signal only its own processes, and (without a network namespace and
// offline) neither bind nor connect TCP.
func restrictLandlock(sp *spec) error {
	handled := fsHandled(sp.ABI)
	attr := rulesetAttr{handledFS: handled}
	size := unsafe.Sizeof(attr.handledFS)
	if sp.ABI >= 4 {
		size += unsafe.Sizeof(attr.handledNet)
		if sp.Wall == Landlock && !sp.Network {
			attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		}
	}
	if sp.ABI >= 6 {
		size += unsafe.Sizeof(attr.scoped)
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return e
	}
	rs := int(fd)
	defer unix.Close(rs)
	add := func(path string, rights uint64, follow bool) error {
		flags := unix.O_PATH | unix.O_CLOEXEC
		if !follow {
			flags |= unix.O_NOFOLLOW
		}
		pfd, err := unix.Open(path, flags, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
				return nil // nothing there to allow
			}
			return err
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			rights &= fsFileOnly
		}
		pb := pathBeneath{allowed: rights & handled, parentFd: int32(pfd)}
		if pb.allowed == 0 {
			return nil
		}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0); e != 0 {
			return &os.PathError{Op: "landlock_add_rule", Path: path, Err: e}
		}
		return nil
	}
	if sp.Wall == Namespaces {
		// The hidden paths are covered by mounts already.
		if err := add("/", fsRead, true); err != nil {
			return err
		}
	} else {
		if err := readAround("/", sp.Hide, add); err != nil {
			return err
		}
		for _, e := range sp.Expose {
			if err := add(e, fsRead, true); err != nil {
				return err
			}
		}
	}
	all := handled
	for _, p := range []string{sp.Work, sp.Temp} {
		if err := add(p, all, true); err != nil {
			return err
		}
	}
	// No terminal of the host: /dev/tty is the gateway's terminal (none
	// in the supervisor's session, but a grant would outlive that), and
	// every /dev/pts/N a terminal of the owner's. Terminals of its own
	// only where the supervisor mounted a private devpts instance, which
	// /dev/ptmx then opens.
	devices := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}
	if sp.Devpts {
		devices = append(devices, "/dev/ptmx", "/dev/pts")
	}
	for _, p := range devices {
		if err := add(p, fsDevice, true); err != nil {
			return err
		}
	}
	if sp.Wall == Namespaces {
		if err := add("/dev/shm", all, true); err != nil { // its own tmpfs
			return err
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0); e != 0 {
		return e
	}
	return nil
}

// readAround allows reading everything beneath dir except the hidden
// paths, for a wall without a mount namespace to cover them: Landlock only
// adds rights, so each directory on the way down to a hidden path gets
// the right to list it, and its other entries get full reading. Links are
// not followed (one pointing into a hidden path must not open it).
func readAround(dir string, hide []string, add func(string, uint64, bool) error) error {
	inside := false
	for _, h := range hide {
		if h == dir {
			return nil
		}
		if within(h, dir) {
			inside = true
		}
	}
	if !inside {
		return add(dir, fsRead, false)
	}
	if err := add(dir, unix.LANDLOCK_ACCESS_FS_READ_DIR, false); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := readAround(filepath.Join(dir, e.Name()), hide, add); err != nil {
			return err
		}
	}
	return nil
}
