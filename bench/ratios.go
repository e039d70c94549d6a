package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The ratios scenario measures the modes of issue 17's table (fan-out,
// one person's devices, paced fan-out, HTTP publishers, handshakes,
// request round trips, recovery, a storm, idle memory, bytes per streamed
// reply), each against a fresh gateway in a child process, and prints each
// next to a baseline measured in the same run: the machine's raw cost of a
// loopback WebSocket write, of an SQLite commit of what a send writes, of
// a bare WebSocket round trip or dial. A ratio to the machine's limit
// survives a noisy machine better than an absolute.

// Ratio modes, in run order.
const (
	ModeBurst     = "burst"
	ModePerson    = "person"
	ModePaced     = "paced"
	ModeHTTP      = "http"
	ModeHandshake = "handshake"
	ModeRTT       = "rtt"
	ModeRecovery  = "recovery"
	ModeStorm     = "storm"
	ModeIdle      = "idle"
	ModeWire      = "wire"
)

// AllRatioModes lists the ratio modes in run order.
var AllRatioModes = []string{ModeBurst, ModePerson, ModePaced, ModeHTTP, ModeHandshake, ModeRTT, ModeRecovery, ModeStorm, ModeIdle, ModeWire}

// ParseRatioModes reads a comma list of ratio modes (or "all").
func ParseRatioModes(s string) ([]string, error) {
	want := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		switch {
		case p == "":
		case p == "all":
			for _, m := range AllRatioModes {
				want[m] = true
			}
		case contains(AllRatioModes, p):
			want[p] = true
		default:
			return nil, fmt.Errorf("unknown ratio mode %q (have %s, or all)", p, strings.Join(AllRatioModes, ", "))
		}
	}
	var out []string
	for _, m := range AllRatioModes {
		if want[m] {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no ratio mode selected")
	}
	return out, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Row is one figure of the ratios scenario and the baseline it is read
// against.
type Row struct {
	Mode   string
	Metric string
	Value  float64
	Unit   string  // "/s", "ms", "µs", "KiB" or "B"
	Base   float64 // in Unit; 0 when the row has none
	BaseOf string  // what the baseline is
	Note   string
	// Others is the share of the machine's CPU that other processes used
	// while the row's mode ran (-1: unknown), on the mode's first row.
	Others float64
}

// Ratio is Value / Base (0 without a baseline). For a rate, 1 is the
// machine's limit; for a time or a size, the limit is 1 and more is worse.
func (r Row) Ratio() float64 {
	if r.Base <= 0 {
		return 0
	}
	return r.Value / r.Base
}

func fmtUnit(v float64, unit string) string {
	switch unit {
	case "/s":
		return perSec(v)
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "µs":
		return fmt.Sprintf("%.2f µs", v)
	case "KiB":
		return fmt.Sprintf("%.1f KiB", v)
	case "B":
		return commas(int64(v+0.5)) + " B"
	}
	return fmt.Sprintf("%g %s", v, unit)
}

func fmtRatio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	case x >= 0.1:
		return fmt.Sprintf("%.2f×", x)
	}
	return fmt.Sprintf("%.2g×", x)
}

func writeRows(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  mode\tmetric\tvalue\tbaseline\tratio\tothers' CPU\t\n")
	last := ""
	for _, r := range rows {
		mode, others := r.Mode, ""
		if mode == last {
			mode = ""
		} else if r.Others >= 0 {
			others = fmt.Sprintf("%.0f%%", 100*r.Others)
		}
		last = r.Mode
		base, ratio := "—", "—"
		if r.Base > 0 {
			base = fmtUnit(r.Base, r.Unit) + " (" + r.BaseOf + ")"
			ratio = fmtRatio(r.Ratio())
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", mode, r.Metric, fmtUnit(r.Value, r.Unit), base, ratio, others, r.Note)
	}
	tw.Flush()
}

// othersShare is the share of the machine's CPU other processes used
// between a and b (-1 when unknown). This process's share counts its
// children once they have been waited for: a mode stops its child before
// it returns.
func othersShare(a, b cpuSnap) float64 {
	if !a.ok || !b.ok || b.total <= a.total {
		return -1
	}
	total := float64(b.total - a.total)
	busy := total - float64(b.idle-a.idle)
	return max(busy-float64(b.self-a.self), 0) / total
}

func usec(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func msec(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func perOne(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(time.Second) / float64(d)
}

func runRatios(ctx context.Context, o *Options) (r Result) {
	r.Title = "(j) Ratios: issue 17's modes, each next to this machine's limit measured in this run"
	b, err := measureBaselines(ctx, o)
	if err != nil {
		r.Err = err
		return r
	}
	r.setup("Baselines, measured in this process at the start of this run, with irisgate's libraries:")
	r.setup("  %d frames/write  %d-byte text frames built by hand, %d per write(2), to a peer that only drains: %.2f µs a frame", b.batch, b.frame, b.batch, usec(b.rawBatch))
	r.setup("                   (one per write(2) %.2f µs; through coder/websocket Conn.Write, one per call, %.2f µs)", usec(b.rawWrite), usec(b.wsWrite))
	r.setup("  64 sends/commit  SQLite through package store: 64 sends' rows (message, its search entry, owed turn, outbox) a transaction: %.1f µs a send", usec(b.commit64))
	r.setup("                   (one send a transaction p50 %.1f µs; outbox rows alone, 512 a transaction, %.1f µs; read back as sync does %.1f µs a frame)",
		usec(b.commit), usec(b.outbox), usec(b.scan))
	r.setup("  commit + write   one send's commit p50 + one Conn.Write: %.3f ms", msec(b.commit+b.wsWrite))
	r.setup("  bare echo        coder/websocket echo server, one device's round trips one at a time: %s (p50 %.1f µs)", perSec(b.rttRate), usec(b.rtt))
	r.setup("  bare dial        dial + upgrade + one round trip to it, p50 / p99 %s / %s", ms(b.dial50), ms(b.dial99))
	r.setup("  bare storm       %s such dials, %d in flight: %s", commas(int64(b.stormN)), stormPar, ms(b.storm))
	r.setup("  bare server      the echo server as a child process, RSS per idle connection (measured in the idle mode)")
	r.setup("Gateways: each mode a fresh one in a child process (irisgate bench --child) whose agent parks every turn, so a message.send")
	r.setup("commits its message and owed turn and devices get one frame per send; sends rotate over lanes (%d per lane). Devices: raw", perLane)
	r.setup("WebSockets in this process. Ratio = value / baseline: for a rate 1× is the limit; for a time or a size 1× is the limit, more is worse.")
	r.setup("Others' CPU: the share of the machine other processes took while the mode ran (the machine is shared).")
	if o.RatioHistory > 0 {
		r.setup("Each child's store holds %s messages before its mode (--ratio-history), imported over its channels.", commas(int64(o.RatioHistory)))
	}

	writeLimit := perOne(b.rawBatch)
	commitLimit := perOne(b.commit64)
	oneLatency := msec(b.commit + b.wsWrite)
	batchOf := fmt.Sprintf("%d frames/write", b.batch)
	for _, mode := range o.RatioModes {
		if ctx.Err() != nil {
			break
		}
		o.progress("ratios: %s", mode)
		cpu0 := readCPU()
		rows, err := runRatioMode(ctx, o, mode, &b, writeLimit, commitLimit, oneLatency, batchOf)
		others := othersShare(cpu0, readCPU())
		for i := range rows {
			rows[i].Others = others
		}
		r.Rows = append(r.Rows, rows...)
		if err != nil {
			r.note("%s failed: %v", mode, err)
			r.Err = errors.Join(r.Err, fmt.Errorf("%s: %w", mode, err))
		}
	}
	return r
}

func runRatioMode(ctx context.Context, o *Options, mode string, b *baselines, writeLimit, commitLimit, oneLatency float64, batchOf string) ([]Row, error) {
	n := o.RatioDevices
	const commitOf, latOf = "64 sends/commit", "commit + write"
	switch mode {
	case ModeBurst, ModePerson:
		watchers, name := n, fmt.Sprintf("fan-out burst, %d devices", n)
		if mode == ModePerson {
			watchers, name = 2, "one person's 3 devices, burst"
		}
		st, err := burst(ctx, o, watchers, o.RatioPublishes)
		if err != nil {
			return nil, err
		}
		rows := []Row{{Mode: name, Metric: "publishes/s", Value: st.pubRate(), Unit: "/s", Base: commitLimit, BaseOf: commitOf,
			Note: fmt.Sprintf("%s sends, 64 in flight; %.1f writes a commit", commas(st.publishes), st.batch)}}
		if mode == ModeBurst {
			rows = append(rows,
				Row{Mode: name, Metric: "deliveries/s", Value: st.delRate(), Unit: "/s", Base: writeLimit, BaseOf: batchOf},
				Row{Mode: name, Metric: "latency p50", Value: msec(pct(st.lat, 0.5)), Unit: "ms", Base: oneLatency, BaseOf: latOf},
				Row{Mode: name, Metric: "latency p99", Value: msec(pct(st.lat, 0.99)), Unit: "ms", Base: oneLatency, BaseOf: latOf},
				Row{Mode: name, Metric: "server CPU per delivery", Value: usec(st.cpu) / float64(max(st.delivered, 1)), Unit: "µs", Base: usec(b.rawBatch), BaseOf: batchOf,
					Note: fmt.Sprintf("child used %.2fs CPU over %.2fs", st.cpu.Seconds(), st.span.Seconds())})
		}
		return rows, nil
	case ModePaced:
		var rows []Row
		for _, pr := range o.RatioPacedRates {
			st, err := paced(ctx, o, n, pr, o.RatioDuration)
			if err != nil {
				return rows, err
			}
			name := fmt.Sprintf("fan-out paced %s msg/s × %d", commas(int64(pr)), n)
			note := fmt.Sprintf("kept up: answers at %s", perSec(st.ackRate()))
			if st.ackRate() < 0.95*pr {
				note = fmt.Sprintf("SATURATED: answers at %s", perSec(st.ackRate()))
			}
			rows = append(rows,
				Row{Mode: name, Metric: "latency p50", Value: msec(pct(st.lat, 0.5)), Unit: "ms", Base: oneLatency, BaseOf: latOf, Note: note},
				Row{Mode: name, Metric: "latency p99", Value: msec(pct(st.lat, 0.99)), Unit: "ms", Base: oneLatency, BaseOf: latOf},
				// The gateway's own cost, which the machine's noise moves
				// far less than a tail latency. Against one frame a
				// write(2): a device's frames come a pace apart here, so
				// none can share a write without waiting for the next
				// (a burst's limit, frames/write, is not this one's).
				Row{Mode: name, Metric: "server CPU per delivery", Value: usec(st.cpu) / float64(max(st.delivered, 1)), Unit: "µs", Base: usec(b.rawWrite), BaseOf: "1 frame/write",
					Note: fmt.Sprintf("child used %.2fs CPU", st.cpu.Seconds())})
		}
		return rows, nil
	case ModeHTTP:
		posters := o.RatioPosters
		st, err := httpPublish(ctx, o, n, posters, o.RatioDuration)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%d HTTP publishers (/api/send), %d devices", posters, n)
		perPost := float64(st.delivered+st.other) / float64(max(st.publishes*int64(n), 1))
		return []Row{
			{Mode: name, Metric: "posts/s", Value: st.pubRate(), Unit: "/s", Base: commitLimit, BaseOf: commitOf},
			{Mode: name, Metric: "deliveries/s", Value: st.delRate(), Unit: "/s", Base: writeLimit, BaseOf: batchOf, Note: fmt.Sprintf("%.1f frames a post to each device", perPost)},
		}, nil
	case ModeHandshake:
		lat, err := handshakes(ctx, o, o.RatioHandshakes)
		if err != nil {
			return nil, err
		}
		name := "handshake (dial → hello.ack)"
		return []Row{
			{Mode: name, Metric: "p50", Value: msec(pct(lat, 0.5)), Unit: "ms", Base: msec(b.dial50), BaseOf: "bare dial", Note: fmt.Sprintf("%d new devices, one at a time", len(lat))},
			{Mode: name, Metric: "p99", Value: msec(pct(lat, 0.99)), Unit: "ms", Base: msec(b.dial99), BaseOf: "bare dial"},
		}, nil
	case ModeRTT:
		h, p, err := roundTrips(ctx, o, o.RatioDuration)
		if err != nil {
			return nil, err
		}
		return []Row{
			{Mode: "request round trip", Metric: "history of 10", Value: h.rate(), Unit: "/s", Base: b.rttRate, BaseOf: "bare echo", Note: "p50 " + ms(pct(h.lat, 0.5))},
			{Mode: "request round trip", Metric: "ping", Value: p.rate(), Unit: "/s", Base: b.rttRate, BaseOf: "bare echo", Note: "p50 " + ms(pct(p.lat, 0.5))},
		}, nil
	case ModeRecovery:
		rounds := 3
		if o.Quick {
			rounds = 1
		}
		lat, back, replayed, err := recovery(ctx, o, o.RatioMissed, rounds)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("recovery of %s missed frames", commas(int64(o.RatioMissed)))
		// The gateway replays recent frames from memory, so the floor is
		// writing them (reading them back from SQLite is in the header).
		frames := msec(b.rawBatch) * float64(o.RatioMissed)
		return []Row{
			{Mode: name, Metric: "sync → sync.done", Value: msec(pct(lat, 0.5)), Unit: "ms", Base: frames + msec(b.rtt), BaseOf: "frames at " + batchOf + " + echo",
				Note: fmt.Sprintf("median of %d; %.0f frames replayed a round", rounds, float64(replayed)/float64(rounds))},
			{Mode: name, Metric: "dial → sync.done", Value: msec(pct(back, 0.5)), Unit: "ms", Base: frames + msec(b.dial50) + msec(b.rtt), BaseOf: "the same + bare dial"},
		}, nil
	case ModeStorm:
		fresh, warm, err := stormRun(ctx, o, o.RatioStorm)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("storm: %s devices connect + sync", commas(int64(o.RatioStorm)))
		of := "bare storm"
		return []Row{
			{Mode: name, Metric: "fresh", Value: msec(fresh), Unit: "ms", Base: msec(b.storm), BaseOf: of},
			{Mode: name, Metric: "warm", Value: msec(warm), Unit: "ms", Base: msec(b.storm), BaseOf: of, Note: "the same devices again"},
		}, nil
	case ModeIdle:
		gwm, err := idleMem(ctx, o, childIrisgate, o.RatioIdle, false)
		if err != nil {
			return nil, err
		}
		gwdm, err := idleMem(ctx, o, childIrisgate, o.RatioIdle, true)
		if err != nil {
			return nil, err
		}
		gw, gwDeflate := float64(gwm.rss), float64(gwdm.rss)
		split := func(m memSample) string {
			return fmt.Sprintf("; Go heap %.1f KiB, stacks %.1f KiB, %.1f goroutines a connection", m.heapInuse/1024, m.stackInuse/1024, m.goroutines)
		}
		bare, err := idleRSS(ctx, o, childBare, o.RatioIdle, false)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("idle connections (%s)", commas(int64(o.RatioIdle)))
		return []Row{{Mode: name, Metric: "RSS per connection", Value: gw / 1024, Unit: "KiB",
			Base: bare / 1024, BaseOf: "bare server", Note: "the bare server is a naive one, not a floor" + split(gwm)},
			{Mode: name, Metric: "RSS per connection, deflate offered", Value: gwDeflate / 1024, Unit: "KiB",
				Base: bare / 1024, BaseOf: "bare server", Note: "each device offers permessage-deflate, as browsers do" + split(gwdm)}}, nil
	case ModeWire:
		child, err := startChild(ctx, o, childIrisgate, 0)
		if err != nil {
			return nil, err
		}
		defer child.stop()
		// The bench's fast stream (8 KB/s), and a model's pace: 300 B/s,
		// which pacing by time alone sent many times over.
		fast := streamAsk{events: max(o.RatioReply/8, 1), chunk: 8, rate: 1000}
		slow := streamAsk{events: max(min(o.RatioReply, 6000)/8, 1), chunk: 8, rate: 300.0 / 8}
		var rows []Row
		for _, ask := range []streamAsk{fast, slow} {
			more, err := wireRows(ctx, child.url, ask)
			rows = append(rows, more...)
			if err != nil {
				return rows, err
			}
		}
		return rows, nil
	}
	return nil, fmt.Errorf("unknown mode %q", mode)
}

// wireRows streams one reply to a device without deflate and then to one
// that offers it, and counts the bytes on each one's wire.
func wireRows(ctx context.Context, url string, ask streamAsk) ([]Row, error) {
	name := fmt.Sprintf("streamed reply (%s B, %d updates at %.0f B/s)", commas(int64(ask.events*ask.chunk)), ask.events, ask.rate*float64(ask.chunk))
	var rows []Row
	for _, deflate := range []bool{false, true} {
		st, err := replyBytes(ctx, url, ask, deflate)
		if err != nil {
			return rows, err
		}
		row := Row{Mode: name, Metric: "bytes on the wire, no deflate", Value: float64(st.bytes), Unit: "B", Base: float64(st.reply), BaseOf: "reply size",
			Note: fmt.Sprintf("%d message.update frames, at most %.2fs apart", st.updates, st.longest.Seconds())}
		if deflate {
			row.Metric = "bytes on the wire, deflate offered"
			if st.negotiated {
				row.Note += "; negotiated: " + st.ext
			} else {
				row.Note += "; NOT NEGOTIATED: the server answered the offer without permessage-deflate, so this is uncompressed too"
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
