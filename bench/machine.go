package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPU        string
	Cores      int // logical CPUs the OS reports
	GOMAXPROCS int
	MemTotal   int64 // bytes, 0 when unknown
	Kernel     string
	Go         string
	OSArch     string
	NoFile     uint64 // open-file limit
}

// DescribeMachine reads /proc for the CPU model, memory and kernel.
func DescribeMachine() Machine {
	m := Machine{
		CPU: "unknown", Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				m.MemTotal = kb << 10
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		m.NoFile = lim.Cur
	}
	return m
}

func writeMachine(w io.Writer) {
	m := DescribeMachine()
	fmt.Fprintln(w, "Machine")
	fmt.Fprintln(w, "───────")
	fmt.Fprintf(w, "  CPU      %s\n", m.CPU)
	fmt.Fprintf(w, "  cores    %d logical (GOMAXPROCS %d); clients and gateway share them\n", m.Cores, m.GOMAXPROCS)
	if m.MemTotal > 0 {
		fmt.Fprintf(w, "  memory   %.1f GiB\n", float64(m.MemTotal)/(1<<30))
	}
	fmt.Fprintf(w, "  system   %s, kernel %s, open-file limit %d\n", m.OSArch, m.Kernel, m.NoFile)
	fmt.Fprintf(w, "  Go       %s\n", m.Go)
	fmt.Fprintf(w, "  load     %s (1/5/15-minute averages at start; the machine may be shared)\n\n", loadAvg())
}

// cpuSnap is a reading of the machine's and this process's CPU time, to
// tell in the report how much of the machine others used meanwhile (the
// benchmark shares its cores with whatever else runs).
type cpuSnap struct {
	total, idle uint64 // all CPUs, clock ticks
	self        uint64 // this process and its waited-for children, ticks
	ok          bool
}

func readCPU() cpuSnap {
	var s cpuSnap
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return s
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		s.total += n
		if i == 3 || i == 4 { // idle, iowait
			s.idle += n
		}
	}
	b, err = os.ReadFile("/proc/self/stat")
	if err != nil {
		return s
	}
	// Fields after the command (which may hold spaces) start at ')'.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	g := strings.Fields(rest)
	if len(g) < 15 {
		return s
	}
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		n, _ := strconv.ParseUint(g[i], 10, 64)
		s.self += n
	}
	s.ok = true
	return s
}

// cpuNote says how busy the machine was between a and b.
func cpuNote(a, b cpuSnap) string {
	if !a.ok || !b.ok || b.total <= a.total {
		return ""
	}
	total := float64(b.total - a.total)
	busy := total - float64(b.idle-a.idle)
	self := float64(b.self - a.self)
	other := max(busy-self, 0)
	return fmt.Sprintf("CPU while it ran: this process (gateway and devices; with its subprocesses) used %.0f%% of the machine, other processes %.0f%%, idle %.0f%%.",
		100*min(self, busy)/total, 100*other/total, 100*(total-busy)/total)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
