package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// chunkOf is what each text event adds to the reply: n bytes that need no
// JSON escaping, ending in a space like a token.
func chunkOf(n int) string {
	if n <= 1 {
		return "x"
	}
	return strings.Repeat("t", n-1) + " "
}

type fanRec struct {
	n  int32         // text length of the update
	at time.Duration // receive time, offset from the agent's base
}

type fanDev struct {
	*rawDev
	mu    sync.Mutex
	recs  []fanRec
	last  int  // longest text seen
	stops int  // message.stop frames
	slow  bool // closed by the gateway
	idle  chan struct{}
}

type phaseStats struct {
	name       string
	plan       streamPlan
	delivered  int64
	offered    int64
	span       time.Duration   // first emission to last delivery
	emitSpan   time.Duration   // first to last emission
	lat        []time.Duration // per delivered update
	vis        []time.Duration // per event and device: until the device showed it
	incomplete int             // devices that missed the final text or the stop
	pings      int64           // WebSocket pings the gateway sent meanwhile
}

func (p *phaseStats) pct(q float64) time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	i := int(q * float64(len(p.lat)-1))
	return p.lat[i]
}

func runFanout(ctx context.Context, o *Options) (r Result) {
	n := o.FanoutDevices
	events := int(o.FanoutRate * o.FanoutDuration.Seconds())
	fanoutChunk := chunkOf(o.FanoutChunk)
	r.Title = fmt.Sprintf("(a) Fan-out: one streaming turn to %d devices", n)
	ag := &streamAgent{base: time.Now()}
	g, err := startGateway(o, "fanout", ag, nil)
	if err != nil {
		r.Err = err
		return r
	}
	defer g.close()

	o.progress("fan-out: connecting %d devices", n)
	raws, err := dialMany(ctx, g.url, n, 32, func(i int) string { return fmt.Sprintf("fan-%04d", i) })
	if err != nil {
		r.Err = err
		return r
	}
	defer closeAll(raws)
	devs := make([]*fanDev, n)
	for i, rd := range raws {
		d := &fanDev{rawDev: rd, idle: make(chan struct{}, 8)}
		devs[i] = d
		d.serve(func(b []byte) {
			switch string(frameType(b)) {
			case irisv1.TypeMessageUpdate:
				at := time.Since(ag.base)
				l := textLen(b)
				d.mu.Lock()
				d.recs = append(d.recs, fanRec{n: int32(l), at: at})
				d.last = max(d.last, l)
				d.mu.Unlock()
			case irisv1.TypeMessageStop:
				d.mu.Lock()
				d.stops++
				d.mu.Unlock()
			case irisv1.TypeAgentIdle:
				select {
				case d.idle <- struct{}{}:
				default:
				}
			}
		})
	}

	r.setup("%d devices (raw WebSockets) watch one lane; device 0's message.send starts each turn; gateway in-process.", n)
	r.setup("Each agent.Text event adds %q (%d bytes); message.update carries the whole text so far, so", fanoutChunk, len(fanoutChunk))
	r.setup("frames grow to %s bytes and a frame's text length names the event it shows.", commas(int64(events*len(fanoutChunk))))
	r.setup("Latency: device receive time − agent emit time, for each update actually delivered. Deliveries/s: updates")
	r.setup("received by all devices per second of streaming (paced), or from first emission to last receipt (tight loop).")

	phases := []streamPlan{
		{events: events, rate: o.FanoutRate, chunk: fanoutChunk},
		{events: events, rate: 0, chunk: fanoutChunk},
	}
	var stats []phaseStats
	for pi, plan := range phases {
		name := fmt.Sprintf("paced %s updates/s", commas(int64(plan.rate)))
		if plan.rate == 0 {
			name = "tight loop"
		}
		o.progress("fan-out: %s, %d events", name, plan.events)
		pings := g.pings()
		st, err := fanPhase(ctx, ag, devs, plan, pi)
		st.pings = g.pings() - pings
		if err != nil {
			r.Err = fmt.Errorf("%s: %w", name, err)
			return r
		}
		st.name = name
		stats = append(stats, st)
	}

	for i, st := range stats {
		dps := rate(st.delivered, st.span)
		tag := st.name
		r.fig(tag+": text events emitted", fmt.Sprintf("%s in %s (%s)", commas(int64(st.plan.events)), ms(st.emitSpan), perSec(rate(int64(st.plan.events), st.emitSpan))), "", nil)
		if i == 0 {
			r.fig(tag+": deliveries", perSec(dps), ">= 200,000/s", ptr(dps >= 200_000))
			r.fig(tag+": latency p50", ms(st.pct(0.50)), "", nil)
			r.fig(tag+": latency p99", ms(st.pct(0.99)), "<= 5 ms", ptr(st.pct(0.99) <= 5*time.Millisecond))
		} else {
			r.fig(tag+": deliveries", perSec(dps), "", nil)
			r.fig(tag+": latency p50", ms(st.pct(0.50)), "", nil)
			r.fig(tag+": latency p99", ms(st.pct(0.99)), "", nil)
		}
		r.fig(tag+": latency max", ms(st.pct(1)), "", nil)
		r.fig(tag+": every event shown, p50 / p99", ms(pct(st.vis, 0.5))+" / "+ms(pct(st.vis, 0.99)), "", nil)
		r.fig(tag+": WebSocket pings (proofs of delivery)", fmt.Sprintf("%s (%s, %.4f per delivery)", commas(st.pings), perSec(rate(st.pings, st.span)), float64(st.pings)/float64(max(st.delivered, 1))), "", nil)
		coalesced := st.offered - st.delivered
		r.fig(tag+": updates coalesced", fmt.Sprintf("%s of %s (%.1f%%)", commas(coalesced), commas(st.offered), 100*float64(coalesced)/float64(max(st.offered, 1))), "", nil)
		r.Lost += int64(st.incomplete)
	}
	slow := 0
	for _, d := range devs {
		if d.slow {
			slow++
		}
	}
	r.check("devices dropped as too slow", fmt.Sprint(slow+g.logs.count("too slowly")), "0", slow+g.logs.count("too slowly") == 0)
	r.check("devices missing the final text or message.stop", fmt.Sprint(r.Lost), "0", r.Lost == 0)
	r.note("Latency figures are per delivered update (emit of the newest event it shows → receipt). \"Every event shown\" counts each event on each device until an update including it arrived, so it also charges the wait of coalesced events.")
	r.note("Coalesced = updates replaced in a device's queue by a newer one before its writer got to it (the protocol allows it: each update carries the whole text). No update is dropped otherwise; a device whose queue overflows would be closed, and none was.")
	r.note("The paced phase is the target run: %s events/s × %d devices offers %s deliveries/s; the tight-loop phase shows how many the gateway writes when the agent outruns it.", commas(int64(o.FanoutRate)), n, commas(int64(o.FanoutRate)*int64(n)))
	r.Notes = append(r.Notes, g.logs.summary()...)
	return r
}

func fanPhase(ctx context.Context, ag *streamAgent, devs []*fanDev, plan streamPlan, turn int) (phaseStats, error) {
	for _, d := range devs {
		d.mu.Lock()
		d.recs = make([]fanRec, 0, plan.events)
		d.last, d.stops = 0, 0
		d.mu.Unlock()
	}
	finished := ag.arm(plan)
	if _, err := devs[0].send(ctx, irisv1.TypeMessageSend, "default", fmt.Appendf(nil, `{"text":"stream %d please"}`, turn)); err != nil {
		return phaseStats{}, err
	}
	budget := 30*time.Second + time.Duration(float64(plan.events)/max(plan.rate, 1000)*float64(time.Second))
	select {
	case <-finished:
	case <-ctx.Done():
		return phaseStats{}, ctx.Err()
	case <-time.After(budget):
		return phaseStats{}, errors.New("the agent's turn did not run to its end")
	}
	deadline := time.After(30 * time.Second)
	for _, d := range devs {
		select {
		case <-d.idle:
		case <-d.done:
			d.slow = true
		case <-deadline:
			return phaseStats{}, fmt.Errorf("device %s got no agent.idle within 30s", d.id)
		case <-ctx.Done():
			return phaseStats{}, ctx.Err()
		}
	}
	emits := ag.emitted()
	st := phaseStats{plan: plan, offered: int64(plan.events) * int64(len(devs))}
	st.emitSpan = emits[len(emits)-1] - emits[0]
	chunk := len(plan.chunk)
	full := plan.events * chunk
	var lastAt time.Duration
	for _, d := range devs {
		d.mu.Lock()
		next := 0 // the first event this device has not shown yet
		for _, rc := range d.recs {
			idx := int(rc.n)/chunk - 1
			if idx < 0 || idx >= len(emits) {
				continue
			}
			st.lat = append(st.lat, rc.at-emits[idx])
			lastAt = max(lastAt, rc.at)
			for ; next <= idx; next++ {
				st.vis = append(st.vis, rc.at-emits[next])
			}
		}
		st.delivered += int64(len(d.recs))
		if d.last != full || d.stops != 1 {
			st.incomplete++
		}
		d.mu.Unlock()
	}
	// Paced: deliveries per second of streaming (emission window), so a
	// gateway that delivers every update scores exactly the offered rate.
	// Tight loop: over first emission → last delivery.
	st.span = lastAt - emits[0]
	if plan.rate > 0 {
		st.span = st.emitSpan + time.Duration(float64(time.Second)/plan.rate)
	}
	slices.Sort(st.lat)
	slices.Sort(st.vis)
	return st, nil
}
