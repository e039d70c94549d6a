package server_test

// The sandbox as a reviewer attacked it after issue 13: terminals, sockets
// Landlock's TCP rules do not cover, processes that outlive their command,
// kernels whose Landlock cannot stop signals, descriptors the gateway
// inherited. Each attack runs through the real tool path: the fake model
// calls the terminal tool, the command is a real process.

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/internal/kernel"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/sandbox"
)

// The test binary doubles as the attacker's tool, run by a command inside
// the sandbox: `server.test irisgate-attack VERB=ARG…` tries each and
// prints "VERB ARG: ok" or what refused it. It needs no python.
func init() {
	if len(os.Args) < 3 || os.Args[1] != "irisgate-attack" {
		return
	}
	for _, a := range os.Args[2:] {
		verb, arg, _ := strings.Cut(a, "=")
		fmt.Printf("%s %s: %s\n", verb, arg, attack(verb, arg))
	}
	os.Exit(0)
}

func attack(verb, arg string) string {
	switch verb {
	case "tiocsti": // type a line into the terminal arg, as its owner would
		fd, err := unix.Open(arg, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "open: " + err.Error()
		}
		defer unix.Close(fd)
		for _, c := range []byte("echo INJ" + "ECTED\n") {
			if err := unix.IoctlSetPointerInt(fd, unix.TIOCSTI, int(c)); err != nil {
				return "TIOCSTI: " + err.Error()
			}
		}
		return "ok"
	case "write": // write on the terminal arg
		fd, err := unix.Open(arg, unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "open: " + err.Error()
		}
		defer unix.Close(fd)
		if _, err := unix.Write(fd, []byte("PWN"+"ED\n")); err != nil {
			return "write: " + err.Error()
		}
		return "ok"
	case "mptcp", "sctp": // a stream socket Landlock's TCP rules do not cover, to arg
		proto := unix.IPPROTO_MPTCP
		if verb == "sctp" {
			proto = unix.IPPROTO_SCTP
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return "socket: " + err.Error()
		}
		defer unix.Close(fd)
		ap, err := net.ResolveTCPAddr("tcp4", arg)
		if err != nil {
			return err.Error()
		}
		sa := &unix.SockaddrInet4{Port: ap.Port}
		copy(sa.Addr[:], ap.IP.To4())
		if err := unix.Connect(fd, sa); err != nil {
			return "connect: " + err.Error()
		}
		unix.Write(fd, []byte("leak"))
		return "ok"
	}
	return "unknown attack"
}

// attackCmd is the command line that runs the attacker's tool.
func attackCmd(t *testing.T, attacks ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self + " irisgate-attack " + strings.Join(attacks, " ")
}

// succeeded returns the attacks of out that worked.
func succeeded(out string) []string {
	var ok []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, ": ok") {
			ok = append(ok, l)
		}
	}
	return ok
}

// allWalls are the walls, and no wall, that a test attacks.
var allWalls = []sandbox.Wall{sandbox.Namespaces, sandbox.Landlock, sandbox.None}

func eachWall(t *testing.T, f func(t *testing.T, wall sandbox.Wall)) {
	for _, w := range allWalls {
		t.Run(w.String(), func(t *testing.T) { f(t, w) })
	}
}

// approveIfAsked answers "once" to the approval a command gets where no
// wall holds, which is what the owner of a wall-less machine would do.
func approveIfAsked(t *testing.T, d *testgw.Device, wall sandbox.Wall) {
	t.Helper()
	if wall == sandbox.None {
		selectChoice(t, d, sbApproval(t, d).PickerID, "once")
	}
}

// toolSaid is what the model was told by the tool call of request i.
func toolSaid(t *testing.T, reqs []map[string]any, i int) string {
	t.Helper()
	return fmt.Sprint(agLast(t, reqs[i])["content"])
}

// TestSandboxNoTerminalEscape: a gateway started from a terminal (as
// `go run ./cmd/irisgate serve` is) lends none of it to a command: TIOCSTI
// into /dev/tty or into the gateway's own /dev/pts/N types nothing into
// the owner's shell, and behind a wall no other terminal of the owner's
// can be written. The gateway runs as a child of this test, on a pty of
// its own; another pty stands for a second terminal of the owner's.
func TestSandboxNoTerminalEscape(t *testing.T) {
	if w := os.Getenv("IRISGATE_TEST_PTY_WALL"); w != "" {
		terminalEscapeChild(t, w)
		return
	}
	eachWall(t, func(t *testing.T, wall sandbox.Wall) {
		if why := kernel.Lacks(wall); why != "" {
			t.Skip(why)
		}
		ctty, victim := newPTY(t), newPTY(t)
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSandboxNoTerminalEscape$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "IRISGATE_TEST_PTY_WALL="+wall.String(), "IRISGATE_TEST_VICTIM="+victim.name)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ctty.slave, ctty.slave, ctty.slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ctty.slave.Close()
		var screen bytes.Buffer
		read := make(chan struct{})
		go func() {
			defer close(read)
			io.Copy(&screen, ctty.master) // EIO once the child is gone
		}()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-time.After(6 * testgw.Wait):
			cmd.Process.Kill()
			<-exited
			t.Fatal("the gateway on its terminal did not finish")
		}
		<-read
		out := screen.String()
		if strings.Contains(out, "--- SKIP") {
			t.Skip(out)
		}
		if err != nil || !strings.Contains(out, "--- PASS: TestSandboxNoTerminalEscape") {
			t.Fatalf("the gateway on its terminal: %v\n%s", err, out)
		}
		if strings.Contains(out, "INJECTED") {
			t.Fatalf("a line was typed into the gateway's terminal:\n%s", out)
		}
		// Anything a command wrote on the other terminal arrives before
		// what is written after it.
		if _, err := victim.slave.WriteString("sentinel\n"); err != nil {
			t.Fatal(err)
		}
		got, err := readUntil(victim.master, "sentinel")
		if err != nil || got != "" {
			t.Fatalf("the owner's other terminal received %q (%v)", got, err)
		}
	})
}

// terminalEscapeChild is the gateway on a terminal: its command tries the
// terminals, and nothing may wait in the terminal's input after.
func terminalEscapeChild(t *testing.T, name string) {
	wall, err := sandbox.ParseWall(name)
	if err != nil || wall.String() != name {
		t.Fatalf("wall %q: %v", name, err)
	}
	own, err := os.Readlink("/proc/self/fd/0")
	if err != nil || !strings.HasPrefix(own, "/dev/pts/") {
		t.Fatalf("the test's terminal: %q %v", own, err)
	}
	victim := os.Getenv("IRISGATE_TEST_VICTIM")
	attacks := []string{"tiocsti=/dev/tty", "write=/dev/tty", "tiocsti=" + own}
	if wall != sandbox.None {
		// Without a wall a command (which asks first) runs as the owner
		// and may write the owner's terminals: the README says so.
		attacks = append(attacks, "write="+own, "write="+victim, "tiocsti="+victim)
	}
	r, _ := sbRig(t, wall, false)
	r.sbCall("terminal", "command", attackCmd(t, attacks...))
	r.reply("typed")
	a := r.dial("phone")
	send(t, a, def, "type into the owner's terminal")
	approveIfAsked(t, a, wall)
	until(t, a, is(t, "agent.idle"))
	out := toolSaid(t, r.requests(2), 1)
	if ok := succeeded(out); len(ok) > 0 || strings.Count(out, "\n") < len(attacks)-1 {
		t.Fatalf("attacks that worked: %q\n%s", ok, out)
	}
	if n, err := unix.IoctlGetInt(0, unix.TIOCINQ); err != nil || n != 0 {
		t.Fatalf("%d bytes wait in the gateway's terminal (%v)", n, err)
	}
}

type pty struct {
	master, slave *os.File
	name          string
}

func newPTY(t *testing.T) pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	name := "/dev/pts/" + strconv.Itoa(int(n))
	s, err := os.OpenFile(name, os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return pty{master: m, slave: s, name: name}
}

// readUntil reads f until a line holding mark and returns what came
// before that line.
func readUntil(f *os.File, mark string) (string, error) {
	f.SetReadDeadline(time.Now().Add(testgw.Wait))
	var got []byte
	buf := make([]byte, 256)
	for {
		n, err := f.Read(buf)
		got = append(got, buf[:n]...)
		if i := bytes.Index(got, []byte(mark)); i >= 0 {
			return strings.TrimRight(string(got[:i]), "\r\n"), nil
		}
		if err != nil {
			return string(got), err
		}
	}
}

// TestSandboxOfflineStreamsAreTCP: offline behind the Landlock wall, whose
// TCP rules cover IPPROTO_TCP alone, an MPTCP or SCTP stream socket is
// refused by seccomp and reaches no listener.
func TestSandboxOfflineStreamsAreTCP(t *testing.T) {
	r, _ := sbRig(t, sandbox.Landlock, false)
	tp := newTap(t)
	r.sbCall("terminal", "command", attackCmd(t, "mptcp="+tp.addr, "sctp="+tp.addr))
	r.reply("connected")
	a := r.dial("phone")
	none(t, "offline streams", agTurn(t, a, def, "connect"), is(t, "picker.approval"))
	out := toolSaid(t, r.requests(2), 1)
	for _, proto := range []string{"mptcp", "sctp"} {
		if !strings.Contains(out, proto+" "+tp.addr+": socket: permission denied") {
			t.Errorf("%s was not refused by the filter:\n%s", proto, out)
		}
	}
	if got := tp.received(t, 0); len(got) != 0 {
		t.Fatalf("the listener received %q", got)
	}
}

// TestSandboxNothingOutlivesACommand: what a command starts, setsid and
// all, dies when the command ends, when it times out and on /stop, behind
// every wall; neither holds the turn past its end.
func TestSandboxNothingOutlivesACommand(t *testing.T) {
	eachWall(t, func(t *testing.T, wall sandbox.Wall) {
		r, _ := sbRig(t, wall, false)
		mark := fmt.Sprintf("irisgate-outlive-%d", time.Now().UnixNano())
		sleeper := func(n int) string { return fmt.Sprintf("setsid bash -c 'exec -a %s-%d sleep infinity'", mark, n) }
		a := r.dial("phone")

		// In the background, holding the output open: the command ends
		// at once, and the sleeper with it.
		r.sbCall("terminal", "command", sleeper(1)+" & echo started")
		// Past the timeout. (In the background again: behind the
		// namespaces wall bash is the first process of its PID namespace
		// and leads its process group, so setsid in the foreground forks
		// and returns at once.)
		r.sbCall("terminal", "command", sleeper(2)+" & sleep infinity", "timeout", 1)
		r.reply("waited")
		send(t, a, def, "start something that lasts")
		approveIfAsked(t, a, wall)
		approveIfAsked(t, a, wall)
		until(t, a, is(t, "agent.idle"))
		reqs := r.requests(3)
		if out := toolSaid(t, reqs, 1); strings.TrimSpace(out) != "started" {
			t.Fatalf("the background command: %q", out)
		}
		if out := toolSaid(t, reqs, 2); !strings.Contains(out, "killed after 1s (timeout)") {
			t.Fatalf("the command past its timeout: %q", out)
		}
		gone(t, mark)

		// Stopped by the person.
		r.sbCall("terminal", "command", sleeper(3)+" & sleep infinity")
		r.reply("stopped")
		send(t, a, def, "start it again")
		approveIfAsked(t, a, wall)
		waitSleeper(t, fmt.Sprintf("%s-%d", mark, 3))
		send(t, a, def, "/stop")
		until(t, a, is(t, "agent.idle"))
		gone(t, mark)
	})
}

// marked lists the processes whose command line holds mark.
func marked(mark string) (all []string, sleepers int) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(mark)) {
			continue
		}
		all = append(all, p.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		if argv0, _, _ := bytes.Cut(b, []byte{0}); string(argv0) == mark {
			sleepers++
		}
	}
	return all, sleepers
}

// gone fails the test if a process marked mark is alive: the tool call
// that started it has returned, and with it everything it started.
func gone(t *testing.T, mark string) {
	t.Helper()
	if all, _ := marked(mark); len(all) > 0 {
		t.Fatalf("alive after their command: %q", all)
	}
}

// waitSleeper waits for the process named name to run.
func waitSleeper(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	for {
		if _, n := marked(name); n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start within %v", name, testgw.Wait)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc: no event to wait on
	}
}

// TestSandboxOldLandlockAsks: below Landlock ABI 6 (Ubuntu 24.04's 6.8 has
// 4) Landlock cannot keep a command's signals in, and without namespaces
// nothing else does: there is no wall, start-up says why, and a command
// that signals the gateway asks first.
func TestSandboxOldLandlockAsks(t *testing.T) {
	kernel.Require(t, sandbox.Landlock, sandbox.Landlock)
	capped := func(abi int) func(*agent.ModelConfig) {
		return func(mc *agent.ModelConfig) {
			sb, err := sandbox.New(sandbox.Config{Temp: filepath.Join(t.TempDir(), "tmp"), Want: sandbox.Landlock, MaxABI: abi})
			if err != nil {
				t.Fatal(err)
			}
			if abi < 6 && (sb.Wall() != sandbox.None || !strings.Contains(sb.Describe(), "cannot keep a command's signals in")) {
				t.Fatalf("Landlock ABI %d: %s", abi, sb.Describe())
			}
			mc.Tools.Sandbox = sb
		}
	}
	kill := fmt.Sprintf("kill -0 %d && echo signalled", os.Getpid())

	r, _ := sbRig(t, sandbox.None, false, agWithModel(capped(5)))
	r.sbCall("terminal", "command", kill)
	r.reply("signalled")
	a := r.dial("phone")
	send(t, a, def, "signal the gateway")
	p := sbApproval(t, a)
	if p.Command != kill || !strings.Contains(p.Description, "no sandbox") {
		t.Fatalf("the approval: %+v", p)
	}
	selectChoice(t, a, p.PickerID, "deny")
	until(t, a, is(t, "agent.idle"))
	if out := toolSaid(t, r.requests(2), 1); strings.Contains(out, "signalled") {
		t.Fatalf("the command ran: %s", out)
	}

	// From ABI 6 the Landlock wall holds, and the same command fails
	// unasked.
	r, _ = sbRig(t, sandbox.None, false, agWithModel(capped(6)))
	r.sbCall("terminal", "command", kill)
	r.reply("tried")
	a = r.dial("phone")
	none(t, "ABI 6", agTurn(t, a, def, "signal the gateway"), is(t, "picker.approval"))
	if out := toolSaid(t, r.requests(2), 1); strings.Contains(out, "signalled") || !strings.Contains(out, "exit status") {
		t.Fatalf("behind Landlock ABI 6: %s", out)
	}
}

// TestSandboxNoInheritedDescriptors: a descriptor the gateway holds open
// without close-on-exec (inherited from whatever started it) does not
// reach a command: it has 0, 1 and 2 alone.
func TestSandboxNoInheritedDescriptors(t *testing.T) {
	eachWall(t, func(t *testing.T, wall sandbox.Wall) {
		r, _ := sbRig(t, wall, false)
		secret := filepath.Join(t.TempDir(), "inherited")
		if err := os.WriteFile(secret, []byte("the gateway's"), 0o600); err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Open(secret, syscall.O_RDONLY, 0) // no O_CLOEXEC
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		r.sbCall("terminal", "command", "ls /proc/$$/fd; : bash forks ls, and ls lists what bash holds")
		r.reply("listed")
		a := r.dial("phone")
		send(t, a, def, "list your descriptors")
		approveIfAsked(t, a, wall)
		until(t, a, is(t, "agent.idle"))
		if out := toolSaid(t, r.requests(2), 1); strings.Join(strings.Fields(out), " ") != "0 1 2" {
			t.Fatalf("the command's descriptors (the gateway's inherited one is %d): %q", fd, out)
		}
	})
}
