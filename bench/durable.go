package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"

	"github.com/irisgate/irisgate/proto/irisv1"
)

type durDev struct {
	*rawDev
	lane string
	sem  chan struct{} // one token per request in flight

	mu       sync.Mutex
	sentAt   map[int64]time.Time
	echoLat  []time.Duration
	errs     int
	firstErr string
	sends    int
	idles    int       // agent.idle frames of its own lane
	lastIdle time.Time // when the last of them arrived
}

func runDurable(ctx context.Context, o *Options) (r Result) {
	n := o.DurableDevices
	r.Title = fmt.Sprintf("(b) Durable frames: %d devices sending message.send at once", n)
	// Turns running at once are not bounded either (the default is 16,
	// for the model's sake): a turn here is only bookkeeping, and with
	// 16 places the rate measured was the bound's (16 turns over the
	// commits a turn waits for), not the commit path's.
	g, err := startGateway(o, "durable", nullAgent{}, func(c *server.AppConfig) { c.Bounds.Running = 1 << 20 })
	if err != nil {
		r.Err = err
		return r
	}
	defer g.close()

	// One lane per device: turns of one lane run one after another, so a
	// shared lane would measure the queue of one lane, not the gateway.
	o.progress("durable: creating %d lanes, connecting %d devices", n, n)
	for i := range n {
		if err := g.app.GW.CreateChannel(ctx, gateway.Caller{}, fmt.Sprintf("bench lane %d", i), core.KindChannel, ""); err != nil {
			r.Err = err
			return r
		}
	}
	chs, err := g.app.Store.Channels(ctx)
	if err != nil {
		r.Err = err
		return r
	}
	var lanes []string
	for _, c := range chs {
		if c.Kind == core.KindChannel {
			lanes = append(lanes, c.ChatID)
		}
	}
	if len(lanes) < n {
		r.Err = fmt.Errorf("created %d lanes, found %d", n, len(lanes))
		return r
	}
	raws, err := dialMany(ctx, g.url, n, 32, func(i int) string { return fmt.Sprintf("dur-%04d", i) })
	if err != nil {
		r.Err = err
		return r
	}
	defer closeAll(raws)

	var delivered atomic.Int64
	devs := make([]*durDev, n)
	for i, rd := range raws {
		d := &durDev{rawDev: rd, lane: lanes[i], sem: make(chan struct{}, o.DurableInflight), sentAt: map[int64]time.Time{}}
		devs[i] = d
		lane := []byte(d.lane)
		d.serve(func(b []byte) {
			delivered.Add(1)
			if id := frameID(b); id != 0 {
				now := time.Now()
				typ := frameType(b)
				d.mu.Lock()
				if t, ok := d.sentAt[id]; ok {
					delete(d.sentAt, id)
					d.echoLat = append(d.echoLat, now.Sub(t))
					failed := string(typ) == irisv1.TypeError
					if failed {
						d.errs++
						if d.firstErr == "" {
							d.firstErr = string(b)
						}
					}
					d.mu.Unlock()
					if failed {
						<-d.sem // no turn: its agent.idle will not come
					}
					return
				}
				d.mu.Unlock()
				return
			}
			if string(frameType(b)) == irisv1.TypeAgentIdle && string(chatID(b)) == string(lane) {
				d.mu.Lock()
				d.idles++
				d.lastIdle = time.Now()
				d.mu.Unlock()
				<-d.sem // its turn is done: room for the next message
			}
		})
	}

	text := []byte(`{"text":"` + textOf("durable frame benchmark", 120) + `"}`)
	before := g.head(ctx)
	pings := g.pings()
	o.progress("durable: sending for %v", o.DurableDuration)
	start := time.Now()
	stopAt := start.Add(o.DurableDuration)
	var wg sync.WaitGroup
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) && ctx.Err() == nil {
				select {
				case d.sem <- struct{}{}:
				case <-d.done:
					return
				case <-ctx.Done():
					return
				}
				id := d.newID()
				d.mu.Lock()
				d.sentAt[id] = time.Now()
				d.sends++
				d.mu.Unlock()
				if err := d.sendID(ctx, id, irisv1.TypeMessageSend, d.lane, text); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	sendEnd := time.Now()

	// Wait for every reply and for every turn's agent.idle.
	deadline := time.Now().Add(60 * time.Second)
	for {
		pending := 0
		for _, d := range devs {
			d.mu.Lock()
			if len(d.sentAt) > 0 || d.idles < d.sends-d.errs {
				pending++
			}
			d.mu.Unlock()
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.Err = fmt.Errorf("%d devices still wait for replies or agent.idle 60s after sending stopped", pending)
			return r
		}
		time.Sleep(2 * time.Millisecond)
	}
	var end time.Time
	var sends, errs int
	var lat []time.Duration
	var firstErr string
	for _, d := range devs {
		d.mu.Lock()
		if d.lastIdle.After(end) {
			end = d.lastIdle
		}
		sends += d.sends
		errs += d.errs
		lat = append(lat, d.echoLat...)
		if firstErr == "" {
			firstErr = d.firstErr
		}
		d.mu.Unlock()
	}
	after := g.head(ctx)
	batch := g.commitBatch(ctx)
	pings = g.pings() - pings
	frames := after - before
	span := end.Sub(start)
	slices.Sort(lat)

	// What one message.send committed.
	byType := map[string]int64{}
	g.db.ScanOutbox(ctx, before, after, func(row store.OutboxRow) error {
		byType[row.Type]++
		return nil
	})
	var comp []string
	for t, c := range byType {
		comp = append(comp, fmt.Sprintf("%s %.2f", t, float64(c)/float64(max(sends, 1))))
	}
	sort.Strings(comp)

	fps := rate(frames, span)

	// The same load through the core alone: devices gone, gateway.Send
	// from as many goroutines as there were requests in flight.
	closeAll(raws)
	for deadline := time.Now().Add(10 * time.Second); g.app.Hub.Count() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	o.progress("durable: the same load through gateway.Send, no devices")
	var coreLanes []core.Lane
	for _, l := range lanes[:n] {
		coreLanes = append(coreLanes, core.Lane{ChatID: l})
	}
	before2 := g.head(ctx)
	start2 := time.Now()
	coreN, err := coreSends(ctx, g, coreLanes, n*o.DurableInflight, start2.Add(o.DurableDuration), 0, textOf("durable frame benchmark", 120))
	if err == nil {
		err = waitHead(ctx, g, before2+3*coreN, time.Minute)
	}
	coreSpan := time.Since(start2)
	coreFrames := g.head(ctx) - before2
	coreFPS := rate(coreFrames, coreSpan)

	r.setup("%d devices (raw WebSockets), each in its own lane (channel), each keeping %d message.send in flight (sent, its turn", n, o.DurableInflight)
	r.setup("not yet ended by agent.idle: a lane queues at most %d) for %v;", gateway.MaxQueuedTurns, o.DurableDuration)
	r.setup("agent: returns at once (no text), so a turn is only the gateway's own bookkeeping, and every lane's runs at once")
	r.setup("(the bound on turns running at once, 16 by default for the model's sake, is lifted). Gateway in-process.")
	r.setup("Rate = outbox head after − before (App.Store.OutboxHead), over first send → last agent.idle received.")
	r.setup("Then the devices leave and the same load goes through gateway.Send directly: the commit path without fan-out.")
	r.fig("durable frames committed", perSec(fps), ">= 20,000/s", ptr(fps >= 20_000))
	r.fig("frames committed", fmt.Sprintf("%s in %.2fs (sending stopped at %.2fs)", commas(frames), span.Seconds(), sendEnd.Sub(start).Seconds()), "", nil)
	if batch > 0 {
		r.fig("writes a group commit", fmt.Sprintf("%.1f on average (since the gateway started)", batch), "", nil)
	}
	r.fig("message.send completed", fmt.Sprintf("%s (%s)", commas(int64(sends)), perSec(rate(int64(sends), span))), "", nil)
	r.fig("echo (reply) latency p50 / p99", ms(pct(lat, 0.5))+" / "+ms(pct(lat, 0.99)), "", nil)
	r.fig("frames delivered to devices", fmt.Sprintf("%s (%s)", commas(delivered.Load()), perSec(rate(delivered.Load(), span))), "", nil)
	r.fig("WebSocket pings (proofs of delivery)", fmt.Sprintf("%s (%s, %.4f per frame delivered)", commas(pings), perSec(rate(pings, span)), float64(pings)/float64(max(delivered.Load(), 1))), "", nil)
	r.check("request errors", fmt.Sprint(errs), "0", errs == 0)
	if err != nil {
		r.note("core-only phase failed: %v", err)
	} else {
		r.fig("same load, core only (no sockets)", fmt.Sprintf("%s (%s frames in %.2fs; %d goroutines calling gateway.Send)", perSec(coreFPS), commas(coreFrames), coreSpan.Seconds(), n*o.DurableInflight), "", nil)
	}
	r.note("One message.send commits (outbox frames per send): %s — the user message (also a messages row) and the turn's agent.busy and agent.idle. Not committed but sent: read.receipt to the sender, typing on/off to every device.", strings.Join(comp, ", "))
	r.note("Every committed frame is also broadcast to all %d devices (no per-lane subscription), so each send costs about %.0f socket writes.", n, float64(delivered.Load())/float64(max(sends, 1)))
	if firstErr != "" {
		r.note("first error reply: %.300s", firstErr)
	}
	if int64(sends)*3 != frames {
		r.note("expected 3 frames per send (%s), outbox grew by %s", commas(int64(sends)*3), commas(frames))
	}
	r.Notes = append(r.Notes, g.logs.summary()...)
	if errs > 0 {
		r.Err = errors.New("some message.send failed")
	}
	return r
}

func pct(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[int(q*float64(len(s)-1))]
}
