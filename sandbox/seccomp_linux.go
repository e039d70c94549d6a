package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter closes what Landlock (before ABI 9) and namespaces
// leave open:
//   - Unix sockets, always: a socket file anywhere (a tmux server, the
//     session bus, docker.sock, the gateway's own admin socket) would run
//     commands outside the sandbox. socketpair stays: it reaches nothing.
//   - io_uring, always: its operations do not pass through this filter.
//   - TIOCSTI and TIOCLINUX, always: they type into a terminal as if its
//     owner had (the supervisor's session has no terminal, but a command
//     might open one).
//   - offline: every address family but IP (and, with its own network
//     namespace, netlink); without that namespace, IP only as TCP
//     (SOCK_STREAM with protocol 0 or IPPROTO_TCP: an allow-list, since
//     Landlock's TCP rules cover IPPROTO_TCP alone and MPTCP or SCTP
//     streams would pass them), which Landlock then keeps from binding or
//     connecting, and no TCP Fast Open (it connects through sendto).
// A denied call fails with EACCES, which programs report as such.

// seccomp_data offsets (little-endian: an argument's low half first).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

func offArg(i int) uint32 { return offArg0 + 8*uint32(i) }

// asm assembles classic BPF with symbolic jump targets.
type asm struct {
	ins    []unix.SockFilter
	labels map[string]int
	jumps  []jump
}

type jump struct {
	at     int
	jt, jf string // "" falls through
}

func (a *asm) label(name string) { a.labels[name] = len(a.ins) }

func (a *asm) stmt(code uint16, k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

func (a *asm) load(off uint32) { a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }

// jmp compares the accumulator with k (op: BPF_JEQ, BPF_JGE, BPF_JSET).
func (a *asm) jmp(op uint16, k uint32, jt, jf string) {
	a.jumps = append(a.jumps, jump{len(a.ins), jt, jf})
	a.stmt(unix.BPF_JMP|op|unix.BPF_K, k)
}

func (a *asm) ret(v uint32) { a.stmt(unix.BPF_RET|unix.BPF_K, v) }

func (a *asm) build() ([]unix.SockFilter, error) {
	for _, j := range a.jumps {
		for _, t := range []struct {
			label string
			dst   *uint8
		}{{j.jt, &a.ins[j.at].Jt}, {j.jf, &a.ins[j.at].Jf}} {
			if t.label == "" {
				continue
			}
			to, ok := a.labels[t.label]
			if !ok {
				return nil, fmt.Errorf("seccomp: no label %q", t.label)
			}
			d := to - j.at - 1
			if d < 0 || d > 255 {
				return nil, fmt.Errorf("seccomp: jump to %q out of range", t.label)
			}
			*t.dst = uint8(d)
		}
	}
	return a.ins, nil
}

const (
	allow = unix.SECCOMP_RET_ALLOW
	deny  = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
	kill  = unix.SECCOMP_RET_KILL_PROCESS
)

// start checks the architecture (another ABI's numbers mean other calls)
// and loads the system call's number.
func start(a *asm) error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	a.load(offArch)
	a.jmp(unix.BPF_JEQ, arch, "", "kill")
	a.load(offNr)
	if runtime.GOARCH == "amd64" {
		a.jmp(unix.BPF_JGE, 0x40000000, "deny", "") // x32 system calls
	}
	return nil
}

// ttyIoctls jumps to deny for TIOCSTI and TIOCLINUX (the request is an
// unsigned int: the kernel reads the low half alone), else to other.
func ttyIoctls(a *asm, deny, other string) {
	a.load(offArg(1))
	a.jmp(unix.BPF_JEQ, unix.TIOCSTI, deny, "")
	a.jmp(unix.BPF_JEQ, unix.TIOCLINUX, deny, other)
}

// ttyProgram refuses TIOCSTI and TIOCLINUX and allows everything else.
func ttyProgram() ([]unix.SockFilter, error) {
	a := &asm{labels: map[string]int{}}
	if err := start(a); err != nil {
		return nil, err
	}
	a.jmp(unix.BPF_JEQ, unix.SYS_IOCTL, "", "allow")
	ttyIoctls(a, "deny", "allow")
	a.label("allow")
	a.ret(allow)
	a.label("deny")
	a.ret(deny)
	a.label("kill")
	a.ret(kill)
	return a.build()
}

// filter is the program for sp on this architecture.
func filter(sp *spec) ([]unix.SockFilter, error) {
	a := &asm{labels: map[string]int{}}
	if err := start(a); err != nil {
		return nil, err
	}
	for _, nr := range []uintptr{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
		a.jmp(unix.BPF_JEQ, uint32(nr), "deny", "")
	}
	a.jmp(unix.BPF_JEQ, unix.SYS_IOCTL, "ioctl", "")
	a.jmp(unix.BPF_JEQ, unix.SYS_SOCKET, "socket", "")
	fastOpen := sp.Wall == Landlock && !sp.Network
	if fastOpen {
		a.jmp(unix.BPF_JEQ, unix.SYS_SENDTO, "flags3", "")
		a.jmp(unix.BPF_JEQ, unix.SYS_SENDMSG, "flags2", "")
		a.jmp(unix.BPF_JEQ, unix.SYS_SENDMMSG, "flags3", "")
	}
	a.ret(allow)

	a.label("socket")
	a.load(offArg(0))
	a.jmp(unix.BPF_JEQ, unix.AF_UNIX, "deny", "")
	switch {
	case sp.Network:
		a.ret(allow)
	case sp.Wall == Namespaces:
		// Its own network namespace: IP reaches only its own loopback.
		a.jmp(unix.BPF_JEQ, unix.AF_INET, "allow", "")
		a.jmp(unix.BPF_JEQ, unix.AF_INET6, "allow", "")
		a.jmp(unix.BPF_JEQ, unix.AF_NETLINK, "allow", "")
		a.ret(deny)
	case sp.ABI >= 4:
		a.jmp(unix.BPF_JEQ, unix.AF_INET, "type", "")
		a.jmp(unix.BPF_JEQ, unix.AF_INET6, "type", "")
		a.ret(deny)
		a.label("type")
		a.load(offArg(1))
		a.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, 0xf) // SOCK_NONBLOCK, SOCK_CLOEXEC off
		a.jmp(unix.BPF_JEQ, unix.SOCK_STREAM, "", "deny")
		// The protocol is an int: the kernel reads the low half alone.
		a.load(offArg(2))
		a.jmp(unix.BPF_JEQ, 0, "allow", "")
		a.jmp(unix.BPF_JEQ, unix.IPPROTO_TCP, "allow", "deny")
	default:
		a.ret(deny) // no Landlock TCP rules: no IP at all
	}
	if fastOpen {
		for _, f := range []struct {
			label string
			arg   int
		}{{"flags3", 3}, {"flags2", 2}} {
			a.label(f.label)
			a.load(offArg(f.arg))
			a.jmp(unix.BPF_JSET, unix.MSG_FASTOPEN, "deny", "allow")
		}
	}
	a.label("ioctl")
	ttyIoctls(a, "deny", "allow")
	a.label("allow")
	a.ret(allow)
	a.label("deny")
	a.ret(deny)
	a.label("kill")
	a.ret(kill)
	return a.build()
}

// installSeccomp loads the filter on the calling thread (the helper's
// locked one); exec keeps it for bash and everything bash starts.
func installSeccomp(sp *spec) error {
	prog, err := filter(sp)
	if err != nil {
		return err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0)
}
