package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The file tools (read_file, write_file, send_file) run in the gateway
// itself, so their wall is in how they open: every path inside the working
// directory goes through os.Root, which follows no link out of it, and
// what was opened is checked by the kernel's own name for it
// (/proc/self/fd), so no link, however made, reaches a hidden path.

// ErrOutside says a path leads out of the working directory (perhaps
// through a link inside it).
var ErrOutside = errors.New("the path leads outside the working directory")

// ErrChanged says the file is not the one that was resolved (and shown
// to the person) any more: a link was swapped in, or another file put in
// its place.
var ErrChanged = errors.New("the file changed since it was shown for approval")

// Path is where a file tool's path argument lands.
type Path struct {
	Abs string // absolute and clean: what the person is shown
	Rel string // relative to the working directory; "" when outside
	// Dev and Ino identify the file a resolved path outside the working
	// directory named when it was resolved (ResolveOutside); opening it
	// must find the same one.
	Dev, Ino uint64
}

// Inside reports whether the path lies in the working directory (by its
// name: a link inside may still lead out, which opening finds).
func (p Path) Inside() bool { return p.Rel != "" }

// Locate resolves name against dir: relative names are in dir, ~/ is the
// home directory.
func Locate(dir, name string) (Path, error) {
	if name == "" {
		return Path{}, errors.New("no path given")
	}
	if strings.ContainsRune(name, 0) {
		return Path{}, errors.New("a path cannot contain a NUL byte")
	}
	if name == "~" || strings.HasPrefix(name, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return Path{}, err
		}
		name = filepath.Join(home, name[1:])
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Path{}, err
	}
	abs := name
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(dir, abs)
	}
	p := Path{Abs: filepath.Clean(abs)}
	if rel, err := filepath.Rel(dir, p.Abs); err == nil && filepath.IsLocal(rel) {
		p.Rel = rel
	}
	return p, nil
}

// OpenRead opens a file for a tool to read. Inside the working directory
// it opens through os.Root (ErrOutside when a link leads out); outside it
// opens p.Abs, which the caller has had approved. Either way it refuses
// hidden paths (but exposed ones), anything under /proc and anything that
// is not a regular file.
func (s *Sandbox) OpenRead(dir string, p Path) (*os.File, error) {
	var f *os.File
	var err error
	// O_NONBLOCK: a FIFO someone made must not hang the turn.
	const flags = os.O_RDONLY | syscall.O_NONBLOCK
	if p.Inside() {
		root, rerr := os.OpenRoot(dir)
		if rerr != nil {
			return nil, rerr
		}
		f, err = root.OpenFile(p.Rel, flags, 0)
		root.Close()
		if err != nil && isEscape(err) {
			return nil, ErrOutside
		}
	} else {
		// A resolved path is opened as it was resolved: no link as its
		// last element, the same name by the kernel's account, the same
		// file.
		if p.Ino != 0 {
			f, err = os.OpenFile(p.Abs, flags|syscall.O_NOFOLLOW, 0)
			if errors.Is(err, syscall.ELOOP) {
				return nil, ErrChanged
			}
		} else {
			f, err = os.OpenFile(p.Abs, flags, 0)
		}
	}
	if err != nil {
		return nil, err
	}
	if !p.Inside() && p.Ino != 0 {
		if err := sameFile(f, p); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := s.checkOpened(f, true); err != nil {
		f.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", p.Abs)
	}
	return f, nil
}

// ResolveInside is where a write of p lands: p itself, or, when its last
// element is a link, the link's target while it stays inside dir, by its
// canonical name (no link left in it). ErrOutside when it leads out, even
// through a link on the way.
func (s *Sandbox) ResolveInside(dir string, p Path) (Path, error) {
	if !p.Inside() || p.Rel == "." {
		return Path{}, ErrOutside
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Path{}, err
	}
	defer root.Close()
	top, err := root.Open(".")
	if err != nil {
		return Path{}, err
	}
	base, err := openedName(top)
	top.Close()
	if err != nil {
		return Path{}, err
	}
	rel := p.Rel
	for range 16 {
		parentRel, name := filepath.Split(rel)
		parent, err := root.Open(filepath.Clean("." + string(filepath.Separator) + parentRel))
		if err != nil {
			if isEscape(err) {
				return Path{}, ErrOutside
			}
			return Path{}, err
		}
		dirName, err := openedName(parent)
		parent.Close()
		if err != nil {
			return Path{}, err
		}
		canon, err := filepath.Rel(base, filepath.Join(dirName, name))
		if err != nil || !filepath.IsLocal(canon) {
			return Path{}, ErrOutside
		}
		fi, err := root.Lstat(canon)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return Path{}, err
		}
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return Path{Abs: filepath.Join(base, canon), Rel: canon}, nil
		}
		target, err := root.Readlink(canon)
		if err != nil {
			return Path{}, err
		}
		if filepath.IsAbs(target) {
			if target, err = filepath.Rel(base, target); err != nil {
				return Path{}, ErrOutside
			}
		} else {
			target = filepath.Join(filepath.Dir(canon), target)
		}
		if rel = filepath.Clean(target); !filepath.IsLocal(rel) {
			return Path{}, ErrOutside
		}
	}
	return Path{}, errors.New("too many links")
}

// WriteInside replaces (or creates) the file at p, which must lie in dir
// as ResolveInside named it: writing outside the working directory is
// refused (ErrOutside), and a path that is not what was resolved any more
// (a link put in its place or on its way) is ErrChanged.
func (s *Sandbox) WriteInside(dir string, p Path, data []byte) error {
	if !p.Inside() || p.Rel == "." {
		return ErrOutside
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	parentRel, base := filepath.Split(p.Rel)
	parent, err := root.Open(filepath.Clean("." + string(filepath.Separator) + parentRel))
	if err != nil {
		if isEscape(err) {
			return ErrOutside
		}
		return err
	}
	defer parent.Close()
	if name, err := openedName(parent); err != nil || name != filepath.Dir(p.Abs) {
		return ErrChanged
	}
	f, err := s.createIn(parent, base)
	if errors.Is(err, syscall.ELOOP) {
		return ErrChanged
	}
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// createIn opens base in the directory parent for writing, without
// following a link (ELOOP when base is one), after checking that neither
// the directory nor the file is hidden.
func (s *Sandbox) createIn(parent *os.File, base string) (*os.File, error) {
	dirName, err := openedName(parent)
	if err != nil {
		return nil, err
	}
	if s.isHidden(filepath.Join(dirName, base), false) {
		return nil, errHidden
	}
	fd, err := unix.Openat(int(parent.Fd()), base, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(dirName, base), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dirName, base))
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", f.Name())
	}
	if err == nil {
		err = f.Truncate(0) // only now that it is known to be a plain file
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CopyOut copies an open file to a fresh private directory under its base
// name and returns that path, a cleanup and the bytes copied: the gateway
// opens files it sends by path, and the copy is what was checked,
// whatever the original path points at by then.
func CopyOut(f io.Reader, name string) (string, func(), int64, error) {
	dir, err := os.MkdirTemp("", "irisgate-send-")
	if err != nil {
		return "", nil, 0, err
	}
	done := func() { os.RemoveAll(dir) }
	dst := filepath.Join(dir, filepath.Base(name))
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	var n int64
	if err == nil {
		n, err = io.Copy(out, f)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		done()
		return "", nil, 0, err
	}
	return dst, done, n, nil
}

var errHidden = errors.New("that is the gateway's own data: tools never open it")

// checkOpened refuses a file whose real name is hidden or under /proc (the
// gateway's own environment and memory are there).
func (s *Sandbox) checkOpened(f *os.File, read bool) error {
	name, err := openedName(f)
	if err != nil {
		return err
	}
	if within(name, "/proc") {
		return errors.New("tools do not open files under /proc")
	}
	if s.isHidden(name, read) {
		return errHidden
	}
	return nil
}

// isHidden reports whether name (canonical) is a hidden path or lies in
// one; when reading, exposed paths are not.
func (s *Sandbox) isHidden(name string, read bool) bool {
	for _, h := range s.hidden() {
		if !within(name, h) {
			continue
		}
		if read {
			for _, e := range s.exposed() {
				if within(name, e) {
					return false
				}
			}
		}
		return true
	}
	return false
}

func (s *Sandbox) exposed() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, e := range s.cfg.Expose {
		if c, err := filepath.EvalSymlinks(e); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// openedName is the kernel's name for an open file: no link or rename
// before the open can make it lie.
func openedName(f *os.File) (string, error) {
	name, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		// No /proc (not Linux): the name it was opened by, resolved.
		if name, err = filepath.EvalSymlinks(f.Name()); err != nil {
			return "", fmt.Errorf("naming an open file: %w", err)
		}
	}
	if strings.HasSuffix(name, " (deleted)") {
		return "", errors.New("the file was deleted while opening it")
	}
	return name, nil
}

// isEscape reports whether an os.Root error is its refusal to leave the
// root.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// ResolveOutside names the file a read of abs, outside the working
// directory, opens: its canonical name (links resolved), to be shown to
// the person and keyed on, and its identity, which OpenRead holds to.
func (s *Sandbox) ResolveOutside(abs string) (Path, error) {
	name, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Path{}, err
	}
	st, err := os.Stat(name)
	if err != nil {
		return Path{}, err
	}
	p := Path{Abs: name}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		p.Dev, p.Ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	return p, nil
}

// sameFile checks that f is the file p was resolved to.
func sameFile(f *os.File, p Path) error {
	name, err := openedName(f)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if name != p.Abs || !ok || uint64(sys.Dev) != p.Dev || uint64(sys.Ino) != p.Ino {
		return ErrChanged
	}
	return nil
}

// Conceals reports whether a tool reading abs would reach what tools never
// see: a hidden path (but an exposed one), and, deep (a recursive read), a
// hidden path anywhere beneath abs. abs is resolved first, as far as it
// exists.
func (s *Sandbox) Conceals(abs string, deep bool) bool {
	name := ResolveExisting(abs)
	if s.isHidden(name, true) {
		return true
	}
	if deep {
		for _, h := range s.hidden() {
			if within(h, name) {
				return true
			}
		}
	}
	return false
}

// ResolveExisting resolves the links of the longest part of p that
// exists, and keeps the rest as it is.
func ResolveExisting(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if c, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(c, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// Refuses says why a tool may never open abs, whatever the person
// answers (nil when it may): it is hidden, or under /proc. Asking first
// would be a question with only one answer; OpenRead checks again on what
// it opens.
func (s *Sandbox) Refuses(abs string) error {
	name, err := filepath.EvalSymlinks(abs)
	if err != nil {
		name = abs // does not exist (yet): opening will say so
	}
	if within(name, "/proc") || within(abs, "/proc") {
		return errors.New("tools do not open files under /proc")
	}
	if s.isHidden(name, true) {
		return errHidden
	}
	return nil
}
