package sandbox_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/kernel"
	"github.com/irisgate/irisgate/sandbox"
)

// TestMain lets the test binary be a client run inside the sandbox:
// "dial NETWORK ADDRESS" connects (and for udp sends) and says what
// happened. It needs no python or netcat on the machine.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "dial" {
		c, err := net.DialTimeout(os.Args[2], os.Args[3], 2*time.Second)
		if err == nil {
			_, err = c.Write([]byte("leak"))
			c.Close()
		}
		if err != nil {
			fmt.Println("dial failed:", err)
			os.Exit(3)
		}
		fmt.Println("dial ok")
		return
	}
	os.Exit(m.Run())
}

// layout is a test's directories: the working one, one outside it, a data
// directory (with a secret and media) and the sandbox's temp.
type layout struct {
	base, work, outside, data, media, temp, config string
}

func newLayout(t *testing.T, dataInWork bool) layout {
	t.Helper()
	base := t.TempDir()
	l := layout{base: base, work: filepath.Join(base, "work"), outside: filepath.Join(base, "outside"), temp: filepath.Join(base, "tmp"), config: filepath.Join(base, "irisgate.toml")}
	l.data = filepath.Join(base, "data")
	if dataInWork {
		l.data = filepath.Join(l.work, "irisgate-data")
	}
	l.media = filepath.Join(l.data, "media")
	for _, d := range []string{l.work, l.outside, filepath.Join(l.media, "ab", "cd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(l.outside, "keep.txt"), "precious")
	write(t, filepath.Join(l.data, "vapid.json"), "PRIVATE-KEY")
	write(t, filepath.Join(l.media, "ab", "cd", "abcd1234"), "a photo")
	write(t, l.config, `api_key = "sk-in-the-config"`)
	return l
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (l layout) sandbox(t *testing.T, want sandbox.Wall) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(sandbox.Config{Temp: l.temp, Hide: []string{l.data, l.config}, Expose: []string{l.media}, Want: want})
	if err != nil {
		t.Fatal(err)
	}
	kernel.Require(t, sb.Wall(), want)
	return sb
}

// run runs script in the working directory and returns its output.
func run(t *testing.T, sb *sandbox.Sandbox, dir, script string, network bool) string {
	t.Helper()
	cmd, err := sb.Command(sandbox.Run{Dir: dir, Script: script, Network: network})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Kill()
		<-done
		t.Fatalf("%q did not end within 30s: %s", script, out.String())
	}
	return out.String()
}

var walls = []sandbox.Wall{sandbox.Namespaces, sandbox.Landlock}

// TestWallsHold: behind each wall a command writes only in the working and
// temp directories, cannot read the data directory (but its media), sees
// none of the gateway's environment, reaches no listener, cannot make a
// Unix socket and cannot signal the gateway.
func TestWallsHold(t *testing.T) {
	t.Setenv("IRISGATE_TOKEN", "tok-s3cret")
	t.Setenv("OPENAI_API_KEY", "sk-s3cret")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range walls {
		t.Run(w.String(), func(t *testing.T) {
			l := newLayout(t, w == sandbox.Namespaces)
			sb := l.sandbox(t, w)
			rel := func(p string) string {
				r, err := filepath.Rel(l.work, p)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			out := run(t, sb, l.work, `echo hi > out.txt && cat out.txt; echo t > "$TMPDIR/t" && cat "$TMPDIR/t"`, false)
			if out != "hi\nt\n" {
				t.Fatalf("ordinary writes: %q", out)
			}
			for _, s := range []string{
				"echo x > " + filepath.Join(l.outside, "new"),
				"echo x > " + rel(filepath.Join(l.outside, "keep.txt")),
				"rm -rf " + l.outside,
				"mv " + l.outside + " " + filepath.Join(l.work, "stolen"),
				"ln " + filepath.Join(l.outside, "keep.txt") + " hard && echo pwned > hard",
				"touch " + filepath.Join(filepath.Dir(l.base), "irisgate-escaped"),
			} {
				run(t, sb, l.work, s, false)
			}
			if b, err := os.ReadFile(filepath.Join(l.outside, "keep.txt")); err != nil || string(b) != "precious" {
				t.Fatalf("the file outside: %q %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(l.outside, "new")); err == nil {
				t.Fatal("a file was created outside")
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(l.base), "irisgate-escaped")); err == nil {
				os.Remove(filepath.Join(filepath.Dir(l.base), "irisgate-escaped"))
				t.Fatal("a file was created in the temp directory's parent")
			}

			out = run(t, sb, l.work, "env; cat /proc/$PPID/environ; cat /proc/*/environ; cat /proc/1/cmdline", false)
			if strings.Contains(out, "s3cret") {
				t.Fatalf("a secret of the gateway's environment reached the command:\n%s", out)
			}
			if !strings.Contains(out, "PATH=") || !strings.Contains(out, "TMPDIR="+l.temp) {
				t.Fatalf("env lacks PATH or TMPDIR: %s", out)
			}

			out = run(t, sb, l.work, fmt.Sprintf("cat %s %s; echo x > %s; cat %s", filepath.Join(l.data, "vapid.json"), l.config, filepath.Join(l.media, "new"), filepath.Join(l.media, "ab", "cd", "abcd1234")), false)
			if strings.Contains(out, "PRIVATE-KEY") || strings.Contains(out, "sk-in-the-config") || !strings.Contains(out, "a photo") {
				t.Fatalf("data directory: %s", out)
			}
			if _, err := os.Stat(filepath.Join(l.media, "new")); err == nil {
				t.Fatal("the media directory was written")
			}

			for _, network := range []string{"tcp", "udp"} {
				accepted := listen(t, network)
				out = run(t, sb, l.work, fmt.Sprintf("%s dial %s %s", self, network, accepted.addr), false)
				if !strings.Contains(out, "dial failed") && network == "tcp" {
					t.Fatalf("offline, a %s dial to the host's loopback: %s", network, out)
				}
				if n := accepted.wait(200 * time.Millisecond); n != 0 {
					t.Fatalf("offline, a %s listener on the host received %d bytes (%s)", network, n, out)
				}
			}
			accepted := listen(t, "tcp")
			out = run(t, sb, l.work, fmt.Sprintf("%s dial tcp %s", self, accepted.addr), true)
			if !strings.Contains(out, "dial ok") || accepted.wait(5*time.Second) == 0 {
				t.Fatalf("with the network allowed, the dial: %s", out)
			}

			sock := filepath.Join(l.temp, "s.sock") // a socket the command may even write beside
			ul, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ul.Close()
			out = run(t, sb, l.work, fmt.Sprintf("%s dial unix %s", self, sock), true)
			if !strings.Contains(out, "dial failed") {
				t.Fatalf("a Unix socket was reached: %s", out)
			}

			out = run(t, sb, l.work, fmt.Sprintf("kill -0 %d && echo signalled", os.Getpid()), false)
			if strings.Contains(out, "signalled") {
				t.Fatalf("the command could signal the gateway: %s", out)
			}
		})
	}
}

// listener counts the bytes a TCP or UDP listener on the host's loopback
// receives.
type listener struct {
	addr  string
	bytes chan int
}

func listen(t *testing.T, network string) listener {
	t.Helper()
	l := listener{bytes: make(chan int, 16)}
	switch network {
	case "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		l.addr = ln.Addr().String()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				var b [64]byte
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, _ := c.Read(b[:])
				c.Close()
				l.bytes <- max(n, 1)
			}
		}()
	case "udp":
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		l.addr = pc.LocalAddr().String()
		go func() {
			var b [64]byte
			for {
				n, _, err := pc.ReadFrom(b[:])
				if err != nil {
					return
				}
				l.bytes <- n
			}
		}()
	}
	return l
}

// wait returns the bytes of the first connection or datagram, or 0 when
// none came within d.
func (l listener) wait(d time.Duration) int {
	select {
	case n := <-l.bytes:
		return n
	case <-time.After(d):
		return 0
	}
}

// TestLandlockCannotHideInsideWork: Landlock alone cannot keep a data
// directory that lies inside the working directory out, so commands there
// get no wall (and the agent asks before each); namespaces can.
func TestLandlockCannotHideInsideWork(t *testing.T) {
	l := newLayout(t, true)
	if w := l.sandbox(t, sandbox.Landlock).WallFor(l.work); w != sandbox.None {
		t.Fatalf("landlock with the data directory inside the working directory: %v, want none", w)
	}
	if w := l.sandbox(t, sandbox.Landlock).WallFor(l.outside); w != sandbox.Landlock {
		t.Fatalf("landlock elsewhere: %v", w)
	}
	if w := l.sandbox(t, sandbox.Namespaces).WallFor(l.work); w != sandbox.Namespaces {
		t.Fatalf("namespaces: %v", w)
	}
}

// TestNothingOutlivesItsCommand: a process a command leaves running behind
// it, in a session of its own, is gone when the command returns, behind
// every wall and without one (the supervisor kills it).
func TestNothingOutlivesItsCommand(t *testing.T) {
	for _, w := range append(walls, sandbox.None) {
		t.Run(w.String(), func(t *testing.T) {
			l := newLayout(t, false)
			sb := l.sandbox(t, w)
			mark := fmt.Sprintf("irisgate-late-%d", time.Now().UnixNano())
			if out := run(t, sb, l.work, "setsid bash -c 'exec -a "+mark+" sleep infinity' & echo started", false); out != "started\n" {
				t.Fatalf("the command: %q", out)
			}
			procs, _ := os.ReadDir("/proc")
			for _, p := range procs {
				if b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline")); err == nil && strings.Contains(string(b), mark) {
					t.Fatalf("a background process outlived its command: %s %q", p.Name(), b)
				}
			}
		})
	}
}

// TestWallsForAnotherUser: the namespaces wall holds for a gateway that
// is not root (the usual case), whose user namespace gives it no
// capabilities after exec but ambient ones. Run as root, the test runs
// itself as nobody.
func TestWallsForAnotherUser(t *testing.T) {
	if os.Getenv("IRISGATE_TEST_AS_NOBODY") != "" {
		sb, err := sandbox.New(sandbox.Config{Temp: filepath.Join(os.Getenv("IRISGATE_TEST_AS_NOBODY"), "tmp"), Want: sandbox.Namespaces})
		if err != nil {
			t.Fatal(err)
		}
		kernel.Require(t, sb.Wall(), sandbox.Namespaces)
		if out := run(t, sb, os.Getenv("IRISGATE_TEST_AS_NOBODY"), "id -u; cat /proc/self/status | grep ^CapEff", false); !strings.Contains(out, "CapEff:\t0000000000000000") {
			t.Fatalf("as uid %d, behind the wall: %s", os.Getuid(), out)
		}
		return
	}
	if os.Getuid() != 0 {
		t.Skip("runs itself as nobody when run as root; this is another user already, which the other tests cover")
	}
	if why := kernel.Lacks(sandbox.Namespaces); why != "" {
		t.Skip(why)
	}
	// A copy of the test binary nobody may run, in a directory nobody
	// may write.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestWallsForAnotherUser$", "-test.count=1", "-test.v")
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + home, "IRISGATE_TEST_AS_NOBODY=" + home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestWallsForAnotherUser") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// TestWallOnThisKernel names the wall New settles on, and fails where the
// kernel offers more.
func TestWallOnThisKernel(t *testing.T) {
	sb, err := sandbox.New(sandbox.Config{Temp: t.TempDir(), Want: sandbox.Namespaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wall: %s — %s", sb.Wall(), sb.Describe())
	for _, w := range walls {
		if kernel.Lacks(w) == "" && sb.Wall() < w {
			t.Fatalf("the kernel offers %s, the sandbox settled on %s", w, sb.Wall())
		}
	}
	off, err := sandbox.New(sandbox.Config{Temp: t.TempDir(), Want: sandbox.None})
	if err != nil || off.Wall() != sandbox.None || !strings.Contains(off.Describe(), "asks") {
		t.Fatalf("--sandbox off: %v %v", off.Describe(), err)
	}
}

// TestGitHooksStayReadOnly: behind the namespaces wall a command cannot
// plant a hook or a config in the working directory's repositories (its
// own and a subdirectory's), which git would run outside the sandbox when
// the owner commits, nor swap .git for another; git's own writes work.
func TestGitHooksStayReadOnly(t *testing.T) {
	l := newLayout(t, false)
	sb := l.sandbox(t, sandbox.Namespaces)
	for _, repo := range []string{l.work, filepath.Join(l.work, "sub")} {
		if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
	}
	for _, repo := range []string{".", "sub"} {
		out := run(t, sb, l.work, fmt.Sprintf(`cd %s
echo 'touch pwned' > .git/hooks/pre-commit && echo HOOK-PLANTED
printf '[core]\n\tfsmonitor = touch pwned\n' >> .git/config && echo CONFIG-CHANGED
mv .git/hooks .git/h && echo HOOKS-MOVED
mv .git .git-old && echo GIT-MOVED
rm -rf .git/hooks .git/config; ls .git/hooks .git/config
touch .git/objects/ok && echo objects
git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && echo committed`, repo), false)
		for _, bad := range []string{"HOOK-PLANTED", "CONFIG-CHANGED", "HOOKS-MOVED", "GIT-MOVED"} {
			if strings.Contains(out, bad) {
				t.Fatalf("%s: %s:\n%s", repo, bad, out)
			}
		}
		if !strings.Contains(out, "objects") || !strings.Contains(out, "committed") {
			t.Fatalf("%s: git's own writes failed:\n%s", repo, out)
		}
		if b, _ := os.ReadFile(filepath.Join(l.work, repo, ".git", "config")); strings.Contains(string(b), "fsmonitor") {
			t.Fatalf("%s: the config was changed", repo)
		}
	}
}

// TestHiddenHomeIsTemp: a gateway whose HOME is its data directory (a
// service's) gives commands a home in their temp directory instead.
func TestHiddenHomeIsTemp(t *testing.T) {
	for _, w := range append(walls, sandbox.None) {
		t.Run(w.String(), func(t *testing.T) {
			l := newLayout(t, false)
			t.Setenv("HOME", l.data)
			sb := l.sandbox(t, w)
			out := run(t, sb, l.work, `echo "$HOME"; echo x > ~/.profile-test && echo written`, false)
			if want := filepath.Join(l.temp, "home") + "\nwritten\n"; out != want {
				t.Fatalf("HOME: %q, want %q", out, want)
			}
		})
	}
}

// TestHiddenBeforeItExists: a command started before the data directory
// exists (a stdio MCP server, started with the agent before the gateway
// opens a first start's data directory, and then running for as long as
// the gateway) cannot read what the gateway writes there afterwards. The
// walls are built when the command starts and cannot cover a path that is
// not there yet, so New makes each missing hidden directory first.
func TestHiddenBeforeItExists(t *testing.T) {
	for _, w := range walls {
		t.Run(w.String(), func(t *testing.T) {
			base := t.TempDir()
			work := filepath.Join(base, "work")
			if err := os.Mkdir(work, 0o755); err != nil {
				t.Fatal(err)
			}
			// Inside the working directory (the defaults) where the mount
			// namespace can cover it; beside it behind Landlock alone,
			// which cannot keep it out of a working directory.
			data := filepath.Join(base, "irisgate-data")
			if w == sandbox.Namespaces {
				data = filepath.Join(work, "irisgate-data")
			}
			sb, err := sandbox.New(sandbox.Config{Temp: filepath.Join(base, "tmp"), Hide: []string{data}, Want: w})
			if err != nil {
				t.Fatal(err)
			}
			kernel.Require(t, sb.Wall(), w)
			if st, err := os.Stat(data); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
				t.Errorf("the hidden directory after New: %v", err) // and the command sees it:
			}
			// The command waits on its stdin for the gateway to have
			// written its secret, then looks.
			cmd, err := sb.Command(sandbox.Run{Dir: work, Script: fmt.Sprintf("read go; cat %s/secret.db; echo listing:; ls -a %s", data, data)})
			if err != nil {
				t.Fatal(err)
			}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The gateway makes its data directory (already there now)
			// and writes to it.
			if err := os.MkdirAll(data, 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(data, "secret.db"), "THE-DATABASE")
			stdin.Write([]byte("go\n"))
			stdin.Close()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Kill()
				<-done
				t.Fatalf("the command did not end within 30s: %s", out.String())
			}
			// Behind Landlock alone the names in it stay listable (the right
			// to list the directories on the way down to a hidden path
			// holds beneath them too), as for any command.
			_, listing, _ := strings.Cut(out.String(), "listing:")
			if strings.Contains(out.String(), "THE-DATABASE") || w == sandbox.Namespaces && strings.Contains(listing, "secret.db") {
				t.Fatalf("a command started before the data directory existed sees it:\n%s", out.String())
			}
		})
	}
}
