package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// setupMounts shapes the helper's private mount namespace: nothing it
// mounts reaches the host, /proc shows only the command's PID namespace,
// /dev/shm and /dev/pts are its own, each hidden directory is covered by
// an empty read-only tmpfs (exposed paths inside it bound back read-only)
// and each hidden file by /dev/null, and the git repositories of the
// working directory keep their hooks and config read-only. Landlock,
// applied next, forbids unmounting any of it.
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
	// A devpts of its own: the command may make terminals (script, ssh
	// -t) and sees none of the host's, which Landlock then also refuses.
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err == nil {
		sp.Devpts = true
	}
	protectGit(sp.Work)
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

// maxGitRepos bounds the repositories protectGit pins in one working
// directory (a directory of many projects): three mounts each, for every
// command.
const maxGitRepos = 64

// protectGit makes the hooks and config of the git repositories in work
// (its own and those of its immediate subdirectories) read-only for the
// command: git runs them when the owner commits, outside the sandbox. The
// .git directory itself becomes a mount point, so it cannot be renamed
// away and replaced; a .git file (a worktree's, a submodule's) is made
// read-only as a whole. What cannot be pinned is left as it is: the
// command runs all the same.
func protectGit(work string) {
	dirs := []string{work}
	if entries, err := os.ReadDir(work); err == nil {
		for _, e := range entries {
			if e.IsDir() && e.Name() != ".git" {
				dirs = append(dirs, filepath.Join(work, e.Name()))
			}
		}
	}
	n := 0
	for _, d := range dirs {
		g := filepath.Join(d, ".git")
		st, err := os.Lstat(g)
		if err != nil {
			continue
		}
		if n++; n > maxGitRepos {
			return
		}
		switch {
		case st.Mode().IsRegular():
			pinReadOnly(g)
		case st.IsDir():
			if unix.Mount(g, g, "", unix.MS_BIND, "") != nil {
				continue
			}
			hooks := filepath.Join(g, "hooks")
			if _, err := os.Stat(hooks); errors.Is(err, os.ErrNotExist) {
				os.Mkdir(hooks, 0o755) // or the command could make it
			}
			pinReadOnly(hooks)
			pinReadOnly(filepath.Join(g, "config"))
		}
	}
}

// pinReadOnly binds p onto itself read-only.
func pinReadOnly(p string) {
	if unix.Mount(p, p, "", unix.MS_BIND, "") == nil {
		remountReadOnly(p)
	}
}
