// Package sandbox runs the agent's shell commands behind walls the kernel
// keeps, not string matching: a command can write only in its working
// directory and its temp directory, cannot see the gateway's data directory
// or its environment, and has no network unless it is let out.
//
// The walls are Landlock (file access, TCP, signals), a seccomp filter (no
// Unix sockets, no io_uring, no other address families offline) and, where
// unprivileged user namespaces exist, private mount, PID and network
// namespaces (the data directory is covered by an empty tmpfs, /proc shows
// only the command's own processes, the network is a loopback of its own).
// Landlock and seccomp bind the thread that sets them up, so that is never
// the gateway: it re-executes its own binary as a helper (see
// helper_linux.go) in two stages: a supervisor, outside the walls, that
// outlives every process the command starts and kills them all when it
// ends, and under it the walls, built around a second copy of the helper
// that then execs bash.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Wall is how far a command is kept in.
type Wall int

// Walls, weakest first.
const (
	// None: commands run as the gateway's user with a least environment
	// only; the agent asks before every command that is not read-only.
	None Wall = iota
	// Landlock: Landlock and seccomp without namespaces. It cannot hide
	// the data directory when it lies inside the working directory, nor
	// other processes in /proc.
	Landlock
	// Namespaces: user, mount, PID and (offline) network namespaces, with
	// Landlock and seccomp inside them.
	Namespaces
)

func (w Wall) String() string {
	switch w {
	case Landlock:
		return "landlock"
	case Namespaces:
		return "namespaces"
	}
	return "none"
}

// ParseWall reads a wall's name (as --sandbox takes it); "auto" and ""
// are the strongest the kernel offers.
func ParseWall(s string) (Wall, error) {
	switch s {
	case "", "auto", "namespaces":
		return Namespaces, nil
	case "landlock":
		return Landlock, nil
	case "none", "off":
		return None, nil
	}
	return None, fmt.Errorf("unknown sandbox %q: use auto, landlock or off", s)
}

// Config says what every command's sandbox holds.
type Config struct {
	// Temp is the commands' writable scratch directory (their TMPDIR and
	// cache). Default: irisgate-<uid>-tools in the system's temp directory.
	Temp string
	// Hide are paths no command and no file tool may read or write: the
	// gateway's data directory, its config file. New makes each one that
	// does not exist yet as an empty private directory (a first start's
	// data directory): see ensureHidden.
	Hide []string
	// Expose are paths inside Hide that stay readable, never writable:
	// the media store, whose files the agent is told to open.
	Expose []string
	// Env names variables passed to commands besides PATH, HOME, LANG and
	// TERM (the owner's --tool-env).
	Env []string
	// Want is the strongest wall to try (the zero value, None, runs
	// commands without walls); New settles for the strongest that works.
	Want Wall
	// MaxABI, when set, makes the sandbox treat the kernel as offering at
	// most this Landlock ABI (the walls are then built as on such a
	// kernel): a test's stand-in for an older kernel.
	MaxABI int
}

// Sandbox runs commands behind the strongest wall this machine offers.
// A nil *Sandbox runs them without walls. It is safe for concurrent use.
type Sandbox struct {
	cfg    Config
	wall   Wall
	abi    int    // Landlock ABI version
	exe    string // the binary re-executed as the helper
	bash   string
	reason string // why a stronger wall is not in force
	env    []string

	mu    sync.Mutex
	hides []string // canonical Hide, resolved once each exists
}

// New settles on the strongest wall up to cfg.Want that works here: it
// tries each by running the helper once, which builds the walls and checks
// from inside that a write outside them fails.
func New(cfg Config) (*Sandbox, error) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("the terminal tool needs bash: %w", err)
	}
	if bash, err = filepath.Abs(bash); err != nil {
		return nil, err
	}
	s := &Sandbox{cfg: cfg, bash: bash}
	if s.cfg.Temp == "" {
		s.cfg.Temp = filepath.Join(os.TempDir(), fmt.Sprintf("irisgate-%d-tools", os.Getuid()))
	}
	if s.cfg.Temp, err = privateDir(s.cfg.Temp); err != nil {
		return nil, fmt.Errorf("sandbox temp directory: %w", err)
	}
	for i, p := range s.cfg.Hide {
		if s.cfg.Hide[i], err = filepath.Abs(p); err != nil {
			return nil, err
		}
		if err := ensureHidden(s.cfg.Hide[i]); err != nil {
			return nil, err
		}
	}
	for i, p := range s.cfg.Expose {
		if s.cfg.Expose[i], err = filepath.Abs(p); err != nil {
			return nil, err
		}
	}
	home, err := s.toolHome()
	if err != nil {
		return nil, err
	}
	s.env = leastEnv(cfg.Env, s.cfg.Temp, home)
	s.wall, s.abi, s.reason = settle(s, cfg.Want)
	return s, nil
}

// ensureHidden makes a hidden path that does not exist yet, as an empty
// directory only the gateway's user may enter. The walls are built when a
// command starts, from what exists then: a mount can only cover, and a
// Landlock rule only leave out, a path that is there. A command started
// before the gateway made its data directory (a stdio MCP server, started
// with the agent before a first start's data directory is opened, which
// runs as long as the gateway) would see it, database and keys, for as
// long as it runs. The gateway makes it with these permissions anyway.
func ensureHidden(p string) error {
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		return nil // there (or not ours to judge): hidden as it is
	}
	if err := os.MkdirAll(p, 0o700); err != nil {
		return fmt.Errorf("sandbox: making %s, which tools must not see, before any of them starts: %w", p, err)
	}
	return nil
}

// toolHome is the HOME commands get instead of the gateway's when that
// one is hidden (a service whose home is its data directory): a directory
// of the temp directory. "" keeps the gateway's.
func (s *Sandbox) toolHome() (string, error) {
	home, ok := os.LookupEnv("HOME")
	if !ok || home == "" {
		return "", nil
	}
	if c, err := filepath.EvalSymlinks(home); err == nil {
		home = c
	}
	for _, h := range s.cfg.Hide {
		if c, err := filepath.EvalSymlinks(h); err == nil {
			h = c
		}
		if within(home, h) {
			return privateDir(filepath.Join(s.cfg.Temp, "home"))
		}
	}
	return "", nil
}

// privateDir makes dir (mode 0700) or checks that the one there is a real
// directory of this user that nobody else can enter: in a shared /tmp
// another user could have made it first.
func privateDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return "", fmt.Errorf("%s is not a directory", dir)
	case ok && int(sys.Uid) != os.Getuid():
		return "", fmt.Errorf("%s belongs to another user", dir)
	case st.Mode().Perm()&0o077 != 0:
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Wall is the wall commands run behind.
func (s *Sandbox) Wall() Wall {
	if s == nil {
		return None
	}
	return s.wall
}

// Off reports whether the owner turned the walls off (--sandbox off, or
// no Sandbox at all), rather than the kernel offering none.
func (s *Sandbox) Off() bool { return s == nil || s.cfg.Want == None }

// WallFor is the wall a command run in dir gets: Landlock alone cannot
// keep the data directory out of a working directory that holds it.
func (s *Sandbox) WallFor(dir string) Wall {
	w := s.Wall()
	if w == Landlock {
		for _, h := range s.hidden() {
			if within(h, dir) || within(h, s.cfg.Temp) {
				return None
			}
		}
	}
	return w
}

// Describe says in a line which wall is in force, for the start-up log
// and /status.
func (s *Sandbox) Describe() string {
	const ends = "no terminal of the gateway's, and everything a command starts is killed when it ends"
	switch s.Wall() {
	case Namespaces:
		return fmt.Sprintf("user, mount, PID and network namespaces + Landlock ABI %d + seccomp: commands write only in the working directory and %s, see neither the data directory nor the gateway's processes, are offline unless allowed, have %s", s.abi, s.cfg.Temp, ends)
	case Landlock:
		why := ""
		if s.reason != "" {
			why = " (" + s.reason + ")"
		}
		return fmt.Sprintf("Landlock ABI %d + seccomp, no namespaces%s: commands write only in the working directory and %s, cannot read the data directory (unless it lies inside the working directory: then every command that is not read-only asks, even under /yolo), signal only their own processes, are offline unless allowed (TCP by Landlock, other sockets by seccomp), have %s", s.abi, why, s.cfg.Temp, ends)
	}
	why := "no sandbox was asked for"
	if s != nil && s.reason != "" {
		why = s.reason
	}
	return "no sandbox (" + why + "): every command that is not read-only asks first, even under /yolo"
}

// Temp is the commands' scratch directory.
func (s *Sandbox) Temp() string {
	if s == nil {
		return os.TempDir()
	}
	return s.cfg.Temp
}

// Env is the environment commands get.
func (s *Sandbox) Env() []string {
	if s == nil {
		return leastEnv(nil, "", "")
	}
	return append([]string(nil), s.env...)
}

// Run is one command to run.
type Run struct {
	Dir     string // working directory (writable)
	Script  string // bash -c script
	Network bool   // let it reach the network
}

// Command prepares r behind the sandbox's wall (none on a nil Sandbox).
// The caller sets Stdout and Stderr, starts it and waits for it; Stop ends
// everything it started.
func (s *Sandbox) Command(r Run) (*Cmd, error) {
	dir, err := filepath.Abs(r.Dir)
	if err != nil {
		return nil, err
	}
	if strings.ContainsRune(r.Script, 0) {
		return nil, errors.New("a command cannot contain a NUL byte")
	}
	for _, h := range s.hidden() {
		if within(dir, h) {
			return nil, fmt.Errorf("the working directory %s lies inside %s, which tools never see", dir, h)
		}
	}
	return s.helper(s.WallFor(dir), spec{Work: dir, Args: []string{"bash", "-c", r.Script}, Network: r.Network})
}

// bashPath is the bash commands run.
func (s *Sandbox) bashPath() (string, error) {
	if s != nil {
		return s.bash, nil
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return "", fmt.Errorf("the terminal tool needs bash: %w", err)
	}
	return filepath.Abs(bash)
}

// leastEnv is PATH, HOME, LANG and TERM from the gateway's environment,
// the names the owner listed, and the temp directory as TMPDIR and cache;
// home, when set, replaces HOME. Nothing else of the gateway's environment
// (keys, tokens, its config) reaches a command.
func leastEnv(names []string, temp, home string) []string {
	var env []string
	seen := map[string]bool{}
	add := func(k, v string) {
		if !seen[k] {
			seen[k] = true
			env = append(env, k+"="+v)
		}
	}
	if temp != "" {
		add("TMPDIR", temp)
		add("XDG_CACHE_HOME", filepath.Join(temp, "cache"))
	}
	if home != "" {
		add("HOME", home)
	}
	for _, k := range append([]string{"PATH", "HOME", "LANG", "TERM"}, names...) {
		if k = strings.TrimSpace(k); k == "" || strings.ContainsAny(k, "=\x00") {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			add(k, v)
		}
	}
	if !seen["PATH"] {
		add("PATH", "/usr/local/bin:/usr/bin:/bin")
	}
	return env
}

// hidden is cfg.Hide as the kernel names them (symlinks resolved), for
// each that exists (New made the missing ones; one removed since is left
// out until it appears again).
func (s *Sandbox) hidden() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.hides) == len(s.cfg.Hide) {
		return s.hides
	}
	var out []string
	for _, h := range s.cfg.Hide {
		if c, err := filepath.EvalSymlinks(h); err == nil {
			out = append(out, c)
		}
	}
	if len(out) == len(s.cfg.Hide) {
		s.hides = out
	}
	return out
}

// within reports whether p is dir or lies beneath it (both clean and
// absolute).
func within(p, dir string) bool {
	if p == dir {
		return true
	}
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}
