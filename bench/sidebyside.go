package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The sidebyside scenario is issue 17's table as code: every row measured
// against Centrifugo and irisgate by the same load client, in one run,
// each run a fresh server in a child process, the two interleaved
// (Centrifugo, irisgate, Centrifugo, irisgate…), medians of accepted runs.
// A run during which other processes took more than MaxOthers of the
// machine is redone, a bounded number of times; one that stays noisy is
// kept (the least noisy attempt) and marked.

// SideOptions steer the sidebyside scenario; zero values take defaults.
type SideOptions struct {
	// Centrifugo is the Centrifugo v6 binary (default "centrifugo" on
	// PATH). Without one the scenario is skipped, not failed, unless a
	// path was given.
	Centrifugo string
	Runs       int     // accepted runs per row and server (3; quick 1)
	Redo       int     // attempts beyond the first for a noisy run (2; quick 0; < 0 none)
	MaxOthers  float64 // others' share of the CPU above which a run is noisy (0.15)
}

// Sides of a row.
const (
	sideCF = iota
	sideIG
)

var sideNames = [2]string{"Centrifugo", "irisgate"}

// sbMetric is one printed row of a cell.
type sbMetric struct {
	key, unit    string
	higherBetter bool
}

// sbCell is one of the rows (or a group of them), measured by one
// run function per side.
type sbCell struct {
	name    string
	metrics []sbMetric
	run     [2]func(ctx context.Context) (map[string]float64, error)
}

// sbRun is one accepted run of one side of a cell.
type sbRun struct {
	vals   map[string]float64
	others float64 // -1 when unknown
	noisy  bool    // above MaxOthers after every attempt
}

// sbLine is one row of the table: the medians of each side.
type sbLine struct {
	cell, metric, unit string
	higherBetter       bool
	value              [2]float64 // NaN when the side has no run
	others             [2]float64 // median others' share of its runs (-1: unknown)
	runs, noisy        [2]int
}

// ratio is irisgate / Centrifugo (NaN when either is missing).
func (l sbLine) ratio() float64 {
	if math.IsNaN(l.value[sideCF]) || math.IsNaN(l.value[sideIG]) || l.value[sideCF] == 0 {
		return math.NaN()
	}
	return l.value[sideIG] / l.value[sideCF]
}

// better says whether irisgate's figure is the better one, by more than
// 2 % (a paced rate both keep up with is a tie).
func (l sbLine) better() bool {
	r := l.ratio()
	return !math.IsNaN(r) && ((l.higherBetter && r > 1.02) || (!l.higherBetter && r < 0.98))
}

func (o *Options) sideDefaults() {
	s := &o.SideBySide
	if s.Runs <= 0 {
		s.Runs = 3
		if o.Quick {
			s.Runs = 1
		}
	}
	switch {
	case s.Redo < 0: // asked for none
		s.Redo = 0
	case s.Redo == 0 && !o.Quick:
		s.Redo = 2
	}
	if s.MaxOthers <= 0 {
		s.MaxOthers = 0.15
	}
}

func runSideBySide(ctx context.Context, o *Options) Result {
	r, _ := sideBySide(ctx, o)
	return r
}

// sideBySide runs the scenario and returns its table's rows as well.
func sideBySide(ctx context.Context, o *Options) (r Result, lines []sbLine) {
	r.Title = "(k) Side by side with Centrifugo: issue 17's table, one load client, interleaved runs"
	o.sideDefaults()
	bin, ok, err := FindCentrifugo(o.SideBySide.Centrifugo)
	if err != nil {
		r.Err = err
		return r, nil
	}
	if !ok {
		r.note("SKIPPED: no Centrifugo binary (give --centrifugo PATH, or put centrifugo on PATH;")
		r.note("GOBIN=/tmp/cf/bin go install github.com/centrifugal/centrifugo/v6@v6.9.1 builds one).")
		return r, nil
	}
	o.SideBySide.Centrifugo = bin
	s := o.SideBySide
	r.setup("Centrifugo: %s (its version: %s; a build from the module proxy prints 0.0.0) in a child process with a fresh config:",
		bin, centrifugoVersion(ctx, bin))
	r.setup("  memory engine and broker; channel %s in a namespace with history_size ≥ the run's publications, history_ttl 600s,", cfChannel)
	r.setup("  force_recovery and force_positioning; clients connect with an HS256 JWT (one user) and subscribe, publish and read")
	r.setup("  history; the server HTTP API with a key; the RPC ping extension. It commits nothing to disk: its history is memory only.")
	r.setup("irisgate: a child gateway (irisgate bench --child) on a fresh SQLite data directory; every frame committed (the message,")
	r.setup("  its search entry, the owed turn, the outbox row; WAL, synchronous=NORMAL) before it is sent; the agent parks each turn.")
	r.setup("Load: one client in this process for both: raw WebSockets; every device is one person's and gets every publication (Iris:")
	r.setup("  the person's broadcast; Centrifugo: all subscribed to %s, the publisher too). Publisher: one device pipelining", cfChannel)
	r.setup("  message.send / one client pipelining publish, 64 in flight. HTTP: POST /api/send (bearer) / POST /api/publish (X-API-Key).")
	r.setup("  Minimal round trip: Iris ping / Centrifugo rpc \"ping\" (protocol v2 has no client ping command; the extension is its")
	r.setup("  cheapest request with a reply). Recovery: sync from a cursor / subscribe with recover from an offset and epoch.")
	r.setup("  On the wire: an Iris frame is one WebSocket message (the spec), about 300 bytes here; Centrifugo puts several replies")
	r.setup("  and pushes in one message, a line each, a push about 190 bytes. Deliveries count publications that reached a device.")
	r.setup("Runs: %d accepted per row and server, interleaved Centrifugo, irisgate…; medians. A run while other processes took > %.0f%% of", s.Runs, 100*s.MaxOthers)
	r.setup("  the CPU is redone up to %d times, then kept marked *. Ratio = irisgate / Centrifugo; others' CPU: Centrifugo's / irisgate's runs.", s.Redo)

	if contains(o.RatioModes, ModeWire) {
		r.note("the wire row (bytes per streamed reply) is irisgate's alone: Centrifugo streams no agent replies; see --scenarios ratios.")
	}
	for _, c := range sideCells(o) {
		if ctx.Err() != nil {
			break
		}
		runs, attempts, errs := runCell(ctx, o, c)
		r.note("%s, %s, each run: %s; %d attempts for %d runs", c.name, c.metrics[0].key, spread(runs, c.metrics[0]), attempts, len(runs[0])+len(runs[1]))
		for _, e := range errs {
			r.note("%s: %v", c.name, e)
			r.Err = errors.Join(r.Err, fmt.Errorf("%s: %w", c.name, e))
		}
		for _, m := range c.metrics {
			l := sbLine{cell: c.name, metric: m.key, unit: m.unit, higherBetter: m.higherBetter}
			for side := range 2 {
				var vals, others []float64
				for _, run := range runs[side] {
					if v, ok := run.vals[m.key]; ok {
						vals = append(vals, v)
					}
					if run.others >= 0 {
						others = append(others, run.others)
					}
					if run.noisy {
						l.noisy[side]++
					}
				}
				l.value[side], l.others[side], l.runs[side] = median(vals), median(others), len(vals)
				if math.IsNaN(l.others[side]) {
					l.others[side] = -1
				}
			}
			lines = append(lines, l)
		}
	}
	r.Table = sideTable(lines)
	sideGoals(&r, lines)
	return r, lines
}

// spread lists one metric's value in each run of each side.
func spread(runs [2][]sbRun, m sbMetric) string {
	var b strings.Builder
	for side := range 2 {
		if side > 0 {
			b.WriteString(" · ")
		}
		b.WriteString(sideNames[side])
		for i, run := range runs[side] {
			sep := ", "
			if i == 0 {
				sep = " "
			}
			b.WriteString(sep + fmtUnit(run.vals[m.key], m.unit))
			if run.noisy {
				b.WriteString("*")
			}
		}
	}
	return b.String()
}

// runCell runs a cell's sides interleaved until each has s.Runs runs; it
// returns them and how many runs it made in all.
func runCell(ctx context.Context, o *Options, c sbCell) (runs [2][]sbRun, attempts int, errs []error) {
	s := o.SideBySide
	for i := range s.Runs {
		for side := range 2 {
			var best *sbRun
			for attempt := 0; attempt <= s.Redo && ctx.Err() == nil; attempt++ {
				// A redo needs time left in the scenario's bound.
				if dl, ok := ctx.Deadline(); attempt > 0 && ok && time.Until(dl) < 3*time.Minute {
					break
				}
				o.progress("sidebyside: %s, %s, run %d/%d, attempt %d", c.name, sideNames[side], i+1, s.Runs, attempt+1)
				attempts++
				cpu0 := readCPU()
				vals, err := c.run[side](ctx)
				others := othersShare(cpu0, readCPU())
				if err != nil {
					errs = append(errs, fmt.Errorf("%s run %d: %w", sideNames[side], i+1, err))
					break
				}
				run := &sbRun{vals: vals, others: others, noisy: others > s.MaxOthers}
				if best == nil || (others >= 0 && others < best.others) {
					best = run
				}
				if !run.noisy {
					break
				}
				o.progress("sidebyside: others took %.0f%% of the CPU: noisy", 100*others)
			}
			if best != nil {
				runs[side] = append(runs[side], *best)
			}
		}
	}
	return runs, attempts, errs
}

// sideCells are the rows, sized by the ratio options.
func sideCells(o *Options) []sbCell {
	n := o.RatioDevices
	var cells []sbCell
	want := func(m string) bool { return contains(o.RatioModes, m) }
	pubVals := func(st pubStats) map[string]float64 {
		return map[string]float64{
			"deliveries/s": st.delRate(), "publishes/s": st.pubRate(),
			"latency p50": msec(pct(st.lat, 0.5)), "latency p99": msec(pct(st.lat, 0.99)),
			"server CPU per delivery": usec(st.cpu) / float64(max(st.delivered, 1)), "answers/s": st.ackRate(),
			"load client CPU per delivery": usec(st.clientCPU) / float64(max(st.delivered, 1)),
			"posts/s":                      st.pubRate(),
		}
	}
	wrap := func(f func(ctx context.Context) (pubStats, error)) func(ctx context.Context) (map[string]float64, error) {
		return func(ctx context.Context) (map[string]float64, error) {
			st, err := f(ctx)
			return pubVals(st), err
		}
	}
	if want(ModeBurst) {
		cells = append(cells, sbCell{name: fmt.Sprintf("fan-out burst, %d devices", n),
			metrics: []sbMetric{{"deliveries/s", "/s", true}, {"publishes/s", "/s", true}, {"latency p50", "ms", false},
				{"latency p99", "ms", false}, {"server CPU per delivery", "µs", false}, {"load client CPU per delivery", "µs", false}},
			run: [2]func(context.Context) (map[string]float64, error){
				wrap(func(ctx context.Context) (pubStats, error) { return cfBurst(ctx, o, n, o.RatioPublishes) }),
				wrap(func(ctx context.Context) (pubStats, error) { return burst(ctx, o, n, o.RatioPublishes) }),
			}})
	}
	if want(ModePerson) {
		cells = append(cells, sbCell{name: "one person's 3 devices, burst",
			metrics: []sbMetric{{"publishes/s", "/s", true}, {"latency p99", "ms", false}},
			run: [2]func(context.Context) (map[string]float64, error){
				wrap(func(ctx context.Context) (pubStats, error) { return cfBurst(ctx, o, 2, o.RatioPublishes) }),
				wrap(func(ctx context.Context) (pubStats, error) { return burst(ctx, o, 2, o.RatioPublishes) }),
			}})
	}
	if want(ModePaced) {
		for _, pr := range o.RatioPacedRates {
			cells = append(cells, sbCell{name: fmt.Sprintf("paced %s msg/s × %d devices", commas(int64(pr)), n),
				metrics: []sbMetric{{"latency p50", "ms", false}, {"latency p99", "ms", false}, {"answers/s", "/s", true}},
				run: [2]func(context.Context) (map[string]float64, error){
					wrap(func(ctx context.Context) (pubStats, error) { return cfPaced(ctx, o, n, pr, o.RatioDuration) }),
					wrap(func(ctx context.Context) (pubStats, error) { return paced(ctx, o, n, pr, o.RatioDuration) }),
				}})
		}
	}
	if want(ModeHTTP) {
		cells = append(cells, sbCell{name: fmt.Sprintf("%d parallel HTTP publishers, %d devices", o.RatioPosters, n),
			metrics: []sbMetric{{"posts/s", "/s", true}, {"deliveries/s", "/s", true}},
			run: [2]func(context.Context) (map[string]float64, error){
				wrap(func(ctx context.Context) (pubStats, error) {
					return cfHTTPPublish(ctx, o, n, o.RatioPosters, o.RatioDuration)
				}),
				wrap(func(ctx context.Context) (pubStats, error) {
					return httpPublish(ctx, o, n, o.RatioPosters, o.RatioDuration)
				}),
			}})
	}
	if want(ModeHandshake) {
		hs := func(f func(context.Context, *Options, int) ([]time.Duration, error)) func(ctx context.Context) (map[string]float64, error) {
			return func(ctx context.Context) (map[string]float64, error) {
				lat, err := f(ctx, o, o.RatioHandshakes)
				return map[string]float64{"p50": msec(pct(lat, 0.5)), "p99": msec(pct(lat, 0.99))}, err
			}
		}
		cells = append(cells, sbCell{name: "handshake (dial → connect reply / hello.ack)",
			metrics: []sbMetric{{"p50", "ms", false}, {"p99", "ms", false}},
			run:     [2]func(context.Context) (map[string]float64, error){hs(cfHandshakes), hs(handshakes)}})
	}
	if want(ModeRTT) {
		rt := func(f func(context.Context, *Options, time.Duration) (rttStats, rttStats, error)) func(ctx context.Context) (map[string]float64, error) {
			return func(ctx context.Context) (map[string]float64, error) {
				h, p, err := f(ctx, o, o.RatioDuration)
				return map[string]float64{"history of 10": h.rate(), "minimal (ping)": p.rate()}, err
			}
		}
		cells = append(cells, sbCell{name: "request round trip, one at a time",
			metrics: []sbMetric{{"history of 10", "/s", true}, {"minimal (ping)", "/s", true}},
			run:     [2]func(context.Context) (map[string]float64, error){rt(cfRoundTrips), rt(roundTrips)}})
	}
	if want(ModeRecovery) {
		rounds := 3
		if o.Quick {
			rounds = 1
		}
		rec := func(f func(context.Context, *Options, int, int) ([]time.Duration, []time.Duration, int64, error)) func(ctx context.Context) (map[string]float64, error) {
			return func(ctx context.Context) (map[string]float64, error) {
				lat, back, _, err := f(ctx, o, o.RatioMissed, rounds)
				return map[string]float64{"request → done": msec(pct(lat, 0.5)), "dial → done": msec(pct(back, 0.5))}, err
			}
		}
		cells = append(cells, sbCell{name: fmt.Sprintf("recovery of %s missed frames", commas(int64(o.RatioMissed))),
			metrics: []sbMetric{{"request → done", "ms", false}, {"dial → done", "ms", false}},
			run:     [2]func(context.Context) (map[string]float64, error){rec(cfRecovery), rec(recovery)}})
	}
	if want(ModeStorm) {
		st := func(f func(context.Context, *Options, int) (time.Duration, time.Duration, error)) func(ctx context.Context) (map[string]float64, error) {
			return func(ctx context.Context) (map[string]float64, error) {
				fresh, warm, err := f(ctx, o, o.RatioStorm)
				return map[string]float64{"fresh": msec(fresh), "warm": msec(warm)}, err
			}
		}
		cells = append(cells, sbCell{name: fmt.Sprintf("storm: %s devices connect + subscribe / sync", commas(int64(o.RatioStorm))),
			metrics: []sbMetric{{"fresh", "ms", false}, {"warm", "ms", false}},
			run:     [2]func(context.Context) (map[string]float64, error){st(cfStorm), st(stormRun)}})
	}
	if want(ModeIdle) {
		cells = append(cells, sbCell{name: fmt.Sprintf("idle connections (%s)", commas(int64(o.RatioIdle))),
			metrics: []sbMetric{{"RSS per connection", "KiB", false}},
			run: [2]func(context.Context) (map[string]float64, error){
				func(ctx context.Context) (map[string]float64, error) {
					v, err := cfIdleRSS(ctx, o, o.RatioIdle)
					return map[string]float64{"RSS per connection": v / 1024}, err
				},
				func(ctx context.Context) (map[string]float64, error) {
					v, err := idleRSS(ctx, o, childIrisgate, o.RatioIdle, false)
					return map[string]float64{"RSS per connection": v / 1024}, err
				},
			}})
	}
	return cells
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// sideTable prints the table: metric | Centrifugo | irisgate | ratio |
// others' CPU.
func sideTable(lines []sbLine) []string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "row\tmetric\tCentrifugo\tirisgate\tirisgate / Centrifugo\tothers' CPU\t\n")
	last, marked := "", false
	for _, l := range lines {
		cell := l.cell
		if cell == last {
			cell = "—"
		}
		last = l.cell
		var v [2]string
		for side := range 2 {
			v[side] = "failed"
			if !math.IsNaN(l.value[side]) {
				v[side] = fmtUnit(l.value[side], l.unit)
			}
			if l.noisy[side] > 0 {
				v[side] += "*"
				marked = true
			}
		}
		ratio := "—"
		if x := l.ratio(); !math.IsNaN(x) {
			ratio = fmtRatio(x)
			if l.better() {
				ratio += " (irisgate better)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s / %s\t\n", cell, l.metric, v[sideCF], v[sideIG], ratio, pctOr(l.others[sideCF]), pctOr(l.others[sideIG]))
	}
	tw.Flush()
	out := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if marked {
		out = append(out, "* at least one of the runs behind this median stayed above the others' CPU limit after its redos.")
	}
	return out
}

func pctOr(x float64) string {
	if x < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// sideGoals judges issue 17's goals that are stated against Centrifugo
// (or in absolute figures), from the medians.
func sideGoals(r *Result, lines []sbLine) {
	find := func(cellPrefix, metric string) (sbLine, bool) {
		for _, l := range lines {
			if strings.HasPrefix(l.cell, cellPrefix) && l.metric == metric && !math.IsNaN(l.ratio()) {
				return l, true
			}
		}
		return sbLine{}, false
	}
	rel := func(label, cellPrefix, metric string) {
		if l, ok := find(cellPrefix, metric); ok {
			target := "≥ 1× Centrifugo's"
			met := l.ratio() >= 1
			if !l.higherBetter {
				target, met = "≤ 1× Centrifugo's", l.ratio() <= 1
			}
			r.fig(label, fmtRatio(l.ratio())+" of Centrifugo's", target, ptr(met))
		}
	}
	abs := func(label, cellPrefix, metric string, limit float64) {
		if l, ok := find(cellPrefix, metric); ok {
			v := l.value[sideIG]
			r.fig(label, fmtUnit(v, l.unit), fmtUnit(limit, l.unit), ptr(v <= limit))
		}
	}
	rel("fan-out burst deliveries/s", "fan-out burst", "deliveries/s")
	rel("fan-out burst latency p99", "fan-out burst", "latency p99")
	rel("3 devices publishes/s", "one person's", "publishes/s")
	abs("paced 1,000 msg/s p99", "paced 1,000 ", "latency p99", 5)
	rel("handshake p50", "handshake", "p50")
	rel("request round trip req/s", "request round trip", "history of 10")
	abs("recovery of 1,000", "recovery of 1,000 ", "request → done", 9)
	abs("storm of 1,000, fresh", "storm: 1,000 ", "fresh", 380)
	abs("idle RSS per connection", "idle connections", "RSS per connection", 16)
}
