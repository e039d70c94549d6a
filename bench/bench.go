// Package bench measures a gateway with simulated devices over loopback
// WebSockets: fan-out of a streaming turn, durable frames committed per
// second, sync replay, a reconnect storm and memory per idle connection.
// Each scenario starts its own gateway (in-process, or as a subprocess for
// memory) in a temporary data directory and prints one section of a
// report, each figure next to its target.
//
// Everything is bounded: device counts come from Options, every wait has a
// deadline, and only loopback addresses are used.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"
)

// Scenario names, in the order they run.
const (
	Fanout  = "fanout"
	Durable = "durable"
	Sync    = "sync"
	Storm   = "storm"
	Memory  = "memory"
	Search  = "search"
	Media   = "media"
	Model   = "model"
	Floods  = "floods"
	Ratios  = "ratios"
	// SideBySide is issue 17's table against Centrifugo (sidebyside.go).
	SideBySide = "sidebyside"
	// Replicas needs a PostgreSQL database and a NATS server
	// (ReplicasStore, ReplicasNATS) for all but its SQLite row.
	Replicas = "replicas"
)

// All lists every scenario in run order.
var All = []string{Fanout, Durable, Sync, Storm, Memory, Search, Media, Model, Floods, Ratios, SideBySide, Replicas}

var letters = map[string]string{"a": Fanout, "b": Durable, "c": Sync, "d": Storm, "e": Memory, "f": Search, "g": Media, "h": Model, "i": Floods, "j": Ratios, "k": SideBySide, "l": Replicas}

// ParseScenarios reads a comma list of scenario names (or their letters a–l,
// or "all") and returns them in run order.
func ParseScenarios(s string) ([]string, error) {
	want := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		if p == "all" {
			for _, n := range All {
				want[n] = true
			}
			continue
		}
		if n, ok := letters[p]; ok {
			p = n
		}
		known := false
		for _, n := range All {
			known = known || n == p
		}
		if !known {
			return nil, fmt.Errorf("unknown scenario %q (have %s, or a–l, or all)", p, strings.Join(All, ", "))
		}
		want[p] = true
	}
	var out []string
	for _, n := range All {
		if want[n] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scenario selected")
	}
	return out, nil
}

// Options size and steer a run. Zero values take the defaults of a full
// run, or of a quick run when Quick is set.
type Options struct {
	Scenarios []string // default: All
	Quick     bool     // small, fast sizes (the smoke test uses them)

	FanoutDevices  int           // devices watching the stream (100; quick 10)
	FanoutRate     float64       // paced phase: text events per second (2000; quick 1000)
	FanoutDuration time.Duration // paced phase length (1s; quick 200ms)
	FanoutChunk    int           // bytes each text event adds (4: about a token)

	DurableDevices  int           // devices sending message.send (50; quick 5)
	DurableDuration time.Duration // how long they send (3s; quick 300ms)
	DurableInflight int           // requests in flight per device (2)

	SyncFrames int // outbox frames to fill and replay (100,000; quick 1,000)

	StormDevices int     // devices that drop and reconnect (1,000; quick 20)
	StormRate    float64 // message.send per second produced throughout (10)
	// StormClose is how devices drop: "abrupt" (default: the socket just
	// closes, like a lost network) or "clean" (a WebSocket close
	// handshake, like an app going to the background).
	StormClose string

	MemoryConns int // idle connections for the memory figure (5,000; quick 50)

	SearchMessages int // messages searched (1,000,000; quick 2,000)
	SearchQueries  int // timed searches (2,000; quick 100)
	MediaSize      int // bytes of the file uploaded and pulled (64 MiB; quick 8 MiB)

	ModelTurns  int           // model latency: turns measured (200; quick 20)
	ModelChunks int           // model latency: SSE text chunks per reply (32)
	ModelGap    time.Duration // model latency: pause between chunks in the paced phase (2ms)

	// The ratios scenario (issue 17's modes). Durations and counts are
	// per mode; quick sizes in brackets.
	RatioModes      []string      // default AllRatioModes
	RatioDevices    int           // devices watching fan-out and HTTP posts (100; quick 5)
	RatioPublishes  int           // sends of a burst (3,000; quick 300)
	RatioPacedRates []float64     // paced fan-out: sends a second, one run each (1,000 and 500; quick 200)
	RatioDuration   time.Duration // paced fan-out, HTTP posting, each round trip (2s; quick 300ms)
	RatioPosters    int           // parallel HTTP publishers (16; quick 4)
	RatioHandshakes int           // dials timed one after another (300; quick 20)
	RatioMissed     int           // frames a device misses, then recovers (1,000; quick 100)
	RatioStorm      int           // devices connecting at once (1,000; quick 50)
	RatioIdle       int           // idle connections for RSS (5,000; quick 50)
	RatioReply      int           // bytes of the streamed reply (12,000; quick 1,200)
	RatioDeflate    bool          // fan-out and HTTP watchers offer permessage-deflate
	RatioHistory    int           // messages each child gateway's store holds before a mode (0: a fresh store)
	SideBySide      SideOptions   // the sidebyside scenario: Centrifugo, runs (it uses the ratio sizes)
	// The replicas scenario: a PostgreSQL database the replicas share (its
	// outbox grows) and a NATS server; without both only its SQLite row runs.
	ReplicasStore, ReplicasNATS string
	ReplicasSenders             int           // devices sending (12; quick 3)
	ReplicasWatchers            int           // devices counting deliveries (30; quick 6)
	ReplicasDuration            time.Duration // how long they send, per mode (2s; quick 300ms)
	// ChildCmd makes the command of a child gateway of the ratios
	// scenario from its spec (default: this executable's "bench --child").
	ChildCmd func(spec string) (*exec.Cmd, error)

	// GatewayCmd makes the command of the subprocess gateway the memory
	// scenario measures; it must serve Iris on listen (host:port) with
	// data in dataDir and accept token. Default: this executable's
	// "serve" command.
	GatewayCmd func(listen, dataDir, token string) (*exec.Cmd, error)
	// BaselineCmd, when set, is a second gateway the floods scenario runs
	// each flood against first (say, the last release), for before/after
	// figures from one run.
	BaselineCmd func(listen, dataDir, token string) (*exec.Cmd, error)

	// TempDir holds the scenarios' data directories (default os.TempDir()).
	TempDir string
	// Progress, when set, gets a line as each step starts.
	Progress io.Writer
	// GatewayLog, when set, gets the in-process gateways' warnings and
	// errors; they are counted in the report either way.
	GatewayLog io.Writer
	// ScenarioTimeout bounds one scenario (default 15 minutes).
	ScenarioTimeout time.Duration
	// ProfileDir, when set, gets a CPU profile of each scenario
	// (NAME.cpu.pprof) and a heap profile taken at its end (NAME.heap.pprof).
	// In-process scenarios profile gateway and devices together; each
	// child gateway of the ratios scenario writes its own
	// (child-NN-MODE.cpu.pprof), the gateway alone.
	ProfileDir string

	children int // child gateways started so far, naming their profiles
}

func (o *Options) defaults() {
	q := func(full, quick int) int {
		if o.Quick {
			return quick
		}
		return full
	}
	setInt := func(p *int, full, quick int) {
		if *p <= 0 {
			*p = q(full, quick)
		}
	}
	setDur := func(p *time.Duration, full, quick time.Duration) {
		if *p <= 0 {
			*p = full
			if o.Quick {
				*p = quick
			}
		}
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = All
	}
	setInt(&o.FanoutDevices, 100, 10)
	if o.FanoutRate <= 0 {
		o.FanoutRate = float64(q(2000, 1000))
	}
	setDur(&o.FanoutDuration, time.Second, 200*time.Millisecond)
	setInt(&o.FanoutChunk, 4, 4)
	setInt(&o.DurableDevices, 50, 5)
	setDur(&o.DurableDuration, 3*time.Second, 300*time.Millisecond)
	setInt(&o.ReplicasSenders, 12, 3)
	setInt(&o.ReplicasWatchers, 30, 6)
	setDur(&o.ReplicasDuration, 2*time.Second, 300*time.Millisecond)
	setInt(&o.DurableInflight, 2, 2)
	setInt(&o.SyncFrames, 100_000, 1_000)
	setInt(&o.StormDevices, 1000, 20)
	if o.StormRate <= 0 {
		o.StormRate = 10
	}
	if o.StormClose == "" {
		o.StormClose = "abrupt"
	}
	setInt(&o.MemoryConns, 5000, 50)
	setInt(&o.SearchMessages, 1_000_000, 2_000)
	setInt(&o.SearchQueries, 2000, 100)
	setInt(&o.MediaSize, 64<<20, 8<<20)
	setInt(&o.ModelTurns, 200, 20)
	setInt(&o.ModelChunks, 32, 32)
	setDur(&o.ModelGap, 2*time.Millisecond, 2*time.Millisecond)
	if len(o.RatioModes) == 0 {
		o.RatioModes = AllRatioModes
	}
	setInt(&o.RatioDevices, 100, 5)
	setInt(&o.RatioPublishes, 3000, 300)
	if len(o.RatioPacedRates) == 0 {
		o.RatioPacedRates = []float64{1000, 500}
		if o.Quick {
			o.RatioPacedRates = []float64{200}
		}
	}
	setDur(&o.RatioDuration, 2*time.Second, 300*time.Millisecond)
	setInt(&o.RatioPosters, 16, 4)
	setInt(&o.RatioHandshakes, 300, 20)
	setInt(&o.RatioMissed, 1000, 100)
	setInt(&o.RatioStorm, 1000, 50)
	setInt(&o.RatioIdle, 5000, 50)
	setInt(&o.RatioReply, 12_000, 1_200)
	if o.ChildCmd == nil {
		o.ChildCmd = selfChild
	}
	if o.GatewayCmd == nil {
		o.GatewayCmd = selfServe
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	// The search scenario fills a million messages first: minutes on a
	// small, shared machine.
	setDur(&o.ScenarioTimeout, 15*time.Minute, 2*time.Minute)
}

// selfServe runs this executable's serve command.
func selfServe(listen, dataDir, token string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return ServeCmd(exe)(listen, dataDir, token)
}

// ServeCmd runs the serve command of the irisgate binary at exe (for
// Options.BaselineCmd).
func ServeCmd(exe string) func(listen, dataDir, token string) (*exec.Cmd, error) {
	return func(listen, dataDir, token string) (*exec.Cmd, error) {
		cmd := exec.Command(exe, "serve", "--listen", listen, "--data", dataDir, "--log-level", "warn")
		// Every bench device says hello with the one token: its bound on
		// live connections is lifted (an older build ignores the setting).
		cmd.Env = append(os.Environ(), "IRISGATE_TOKEN="+token, "IRISGATE_MAX_CONNECTIONS_PER_TOKEN=1000000")
		return cmd, nil
	}
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "bench: "+format+"\n", args...)
	}
}

// Figure is one measured value and the target it is held against.
type Figure struct {
	Label  string
	Value  string
	Target string // "" when the figure has no target
	Met    *bool  // nil when there is nothing to judge
	// Check marks a correctness figure (nothing lost, nothing dropped),
	// judged in every run; the others are performance targets, judged
	// only at full size.
	Check bool
}

// Result is one scenario's section of the report.
type Result struct {
	Name    string
	Title   string
	Setup   []string // how the scenario ran
	Figures []Figure
	Notes   []string // what limits the figures, warnings, checks
	// Rows are the ratios scenario's figures, each with its baseline.
	Rows []Row
	// Table is preformatted lines printed after the figures (sidebyside).
	Table []string
	// Lost counts durable frames a device should have and never got
	// (storm), final updates or stops missing (fan-out), replayed frames
	// missing (sync): anything the gateway must never lose.
	Lost    int64
	Err     error
	Elapsed time.Duration
}

func (r *Result) fig(label, value, target string, met *bool) {
	r.Figures = append(r.Figures, Figure{Label: label, Value: value, Target: target, Met: met})
}

// check adds a correctness figure.
func (r *Result) check(label, value, target string, met bool) {
	r.Figures = append(r.Figures, Figure{Label: label, Value: value, Target: target, Met: &met, Check: true})
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *Result) setup(format string, args ...any) {
	r.Setup = append(r.Setup, fmt.Sprintf(format, args...))
}

func ptr(b bool) *bool { return &b }

// Run runs the selected scenarios one after another, writing the report to
// w as each finishes. It returns the results; a scenario's failure is in
// its Result.Err and does not stop the others.
func Run(ctx context.Context, o Options, w io.Writer) ([]Result, error) {
	o.defaults()
	for _, s := range o.Scenarios {
		if _, err := ParseScenarios(s); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(w, "irisgate bench — %s%s\n\n", time.Now().Format("2006-01-02 15:04:05 MST"), map[bool]string{true: " (quick)"}[o.Quick])
	writeMachine(w)
	var results []Result
	for _, name := range o.Scenarios {
		if ctx.Err() != nil {
			break
		}
		o.progress("scenario %s", name)
		sctx, cancel := context.WithTimeout(ctx, o.ScenarioTimeout)
		start := time.Now()
		stopProfile := o.startProfile(name)
		cpu0 := readCPU()
		var r Result
		switch name {
		case Fanout:
			r = runFanout(sctx, &o)
		case Durable:
			r = runDurable(sctx, &o)
		case Sync:
			r = runSync(sctx, &o)
		case Storm:
			r = runStorm(sctx, &o)
		case Memory:
			r = runMemory(sctx, &o)
		case Search:
			r = runSearch(sctx, &o)
		case Media:
			r = runMedia(sctx, &o)
		case Model:
			r = runModel(sctx, &o)
		case Floods:
			r = runFloods(sctx, &o)
		case Ratios:
			r = runRatios(sctx, &o)
		case SideBySide:
			r = runSideBySide(sctx, &o)
		case Replicas:
			r = runReplicas(sctx, &o)
		}
		stopProfile()
		timedOut := errors.Is(sctx.Err(), context.DeadlineExceeded)
		cancel()
		r.Name = name
		r.Elapsed = time.Since(start)
		if n := cpuNote(cpu0, readCPU()); n != "" {
			r.Notes = append(r.Notes, n)
		}
		if o.Quick {
			for i, f := range r.Figures {
				if !f.Check && f.Met != nil {
					r.Figures[i].Met = nil
					r.Figures[i].Target += " (full size only)"
				}
			}
		}
		if r.Err == nil && timedOut {
			r.Err = fmt.Errorf("scenario timed out after %v", o.ScenarioTimeout)
		}
		results = append(results, r)
		writeResult(w, &r)
		runtime.GC() // leave the next scenario a clean heap
	}
	writeSummary(w, results)
	return results, ctx.Err()
}

// startProfile starts a CPU profile of one scenario when ProfileDir is set;
// the returned func stops it (and writes a heap profile).
func (o *Options) startProfile(name string) func() {
	if o.ProfileDir == "" {
		return func() {}
	}
	if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
		o.progress("profile: %v", err)
		return func() {}
	}
	stop, err := profileTo(filepath.Join(o.ProfileDir, name))
	if err != nil {
		o.progress("profile: %v", err)
		return func() {}
	}
	return stop
}

// profileTo starts a CPU profile into PREFIX.cpu.pprof; the returned func
// stops it and writes a heap profile to PREFIX.heap.pprof.
func profileTo(prefix string) (func(), error) {
	f, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if h, err := os.Create(prefix + ".heap.pprof"); err == nil {
			pprof.WriteHeapProfile(h)
			h.Close()
		}
	}, nil
}

func writeResult(w io.Writer, r *Result) {
	fmt.Fprintf(w, "%s\n%s\n", r.Title, strings.Repeat("─", len([]rune(r.Title))))
	for _, s := range r.Setup {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if len(r.Setup) > 0 {
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range r.Figures {
		verdict := ""
		if f.Met != nil {
			verdict = "ok"
			if !*f.Met {
				verdict = "MISSED"
			}
		}
		target := ""
		if f.Target != "" {
			target = "target " + f.Target
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Label, f.Value, target, verdict)
	}
	tw.Flush()
	if len(r.Rows) > 0 {
		writeRows(w, r.Rows)
	}
	for _, l := range r.Table {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  · %s\n", n)
		}
	}
	if r.Err != nil {
		fmt.Fprintf(w, "\n  ERROR: %v\n", r.Err)
	}
	fmt.Fprintf(w, "  (scenario took %.1fs)\n\n", r.Elapsed.Seconds())
}

func writeSummary(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "Summary")
	fmt.Fprintln(w, "───────")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rs {
		var met, missed, failed []string
		for _, f := range r.Figures {
			switch {
			case f.Met == nil:
			case f.Check && !*f.Met:
				failed = append(failed, f.Label)
			case f.Check:
			case *f.Met:
				met = append(met, f.Label)
			default:
				missed = append(missed, f.Label)
			}
		}
		state := "targets met: " + orNone(met) + "; missed: " + orNone(missed)
		if len(met)+len(missed) == 0 {
			state = "targets not judged (quick run, or none)"
		}
		checks := "checks passed"
		if len(failed) > 0 {
			checks = "CHECKS FAILED: " + strings.Join(failed, ", ")
		}
		if r.Err != nil {
			checks = "FAILED: " + r.Err.Error()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Name, state, checks)
	}
	tw.Flush()
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// The figures are printed with thousands separators and fixed units.

func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func perSec(v float64) string { return commas(int64(v+0.5)) + "/s" }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
