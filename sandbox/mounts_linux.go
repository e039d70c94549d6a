package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// setupMounts shapes the helper's private mount namespace: nothing it
// mounts reaches the host, /proc shows only the command's PID namespace,
// /dev/shm is its own, each hidden directory is covered by an empty
// read-only tmpfs (exposed paths inside it bound back read-only) and each
// hidden file by /dev/null. Landlock, applied next, forbids unmounting any
// of it.
func setupMounts(sp *spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
			return fmt.Errorf("mounting /dev/shm: %w", err)
		}
	}
	for _, h := range sp.Hide {
		st, err := os.Lstat(h)
		if err != nil {
			continue // gone since: nothing to hide
		}
		if !st.IsDir() {
			if err := unix.Mount("/dev/null", h, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("hiding %s: %w", h, err)
			}
			continue
		}
		if err := hideDir(h, sp.Expose); err != nil {
			return fmt.Errorf("hiding %s: %w", h, err)
		}
	}
	return nil
}

// hideDir covers dir with an empty tmpfs, binding each exposed path
// beneath it back, read-only, at its place.
func hideDir(dir string, expose []string) error {
	type keep struct {
		rel string
		fd  int
	}
	var keeps []keep
	defer func() {
		for _, k := range keeps {
			unix.Close(k.fd)
		}
	}()
	for _, e := range expose {
		rel, err := filepath.Rel(dir, e)
		if err != nil || rel == "." || !filepath.IsLocal(rel) {
			continue
		}
		// Held open across the cover, bound from /proc/self/fd after.
		fd, err := unix.Open(e, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		keeps = append(keeps, keep{rel, fd})
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, k := range keeps {
		target := filepath.Join(dir, k.rel)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		src := "/proc/self/fd/" + strconv.Itoa(k.fd)
		if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding %s back: %w", k.rel, err)
		}
		if err := remountReadOnly(target); err != nil {
			return fmt.Errorf("making %s read-only: %w", k.rel, err)
		}
	}
	return unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, "")
}

// remountReadOnly makes a bind mount read-only, keeping the flags the
// kernel locks on mounts a user namespace inherited (remounting without
// them fails with EPERM).
func remountReadOnly(target string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return unix.Mount("", target, "", flags, "")
}

// loopbackUp brings up the loopback of the helper's fresh network
// namespace: the command may serve and reach itself (a test's local
// server), and nothing else.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
