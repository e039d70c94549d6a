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

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/store"

	"github.com/irisgate/irisgate/proto/irisv1"
)

type stormDev struct {
	id string
	c  *client.Client

	connected chan struct{} // closed at the first connect
	once      sync.Once
	connects  atomic.Int32
	start     int64 // the cursor its first session started at

	mu       sync.Mutex
	ids      map[string]int // message_id → times received
	replayed int            // frames received with a cursor (sync replays)
	synced   time.Time      // first sync.done after the drop covering the drop's head
	syncErrs int
}

func runStorm(ctx context.Context, o *Options) (r Result) {
	n := o.StormDevices
	r.Title = fmt.Sprintf("(d) Reconnect storm: %s devices drop and reconnect at once", commas(int64(n)))
	g, err := startGateway(o, "storm", replyAgent{}, nil)
	if err != nil {
		r.Err = err
		return r
	}
	defer g.close()
	warm := time.Second
	if o.Quick {
		warm = 200 * time.Millisecond
	}

	// A first frame before anyone connects: client.Client takes a cursor
	// of 0 to mean "new device" (see the note in the report).
	if err := g.app.GW.Send(ctx, gateway.Caller{}, gateway.SendRequest{Lane: core.Lane{ChatID: core.DefaultChatID}, Text: "storm warm-up"}); err != nil {
		r.Err = err
		return r
	}
	if err := waitStable(ctx, g, 200*time.Millisecond, 10*time.Second); err != nil {
		r.Err = err
		return r
	}

	cctx, cancelClients := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer func() {
		cancelClients()
		running.Wait()
	}()
	var dropped atomic.Bool
	var dropHead atomic.Int64
	devs := make([]*stormDev, n)
	o.progress("storm: connecting %d devices (client.Client)", n)
	connStart := time.Now()
	for i := range n {
		d := &stormDev{id: fmt.Sprintf("storm-%04d", i), connected: make(chan struct{}), ids: map[string]int{}}
		d.c = client.New(g.url, client.Options{Token: Token, DeviceID: d.id, DeviceName: d.id, EventBuffer: 64}, 0)
		d.c.OnState = func(up bool, err error) {
			if up {
				d.connects.Add(1)
				d.once.Do(func() { close(d.connected) })
			}
		}
		devs[i] = d
		running.Add(2)
		go func() { defer running.Done(); d.c.Run(cctx) }()
		go func() {
			defer running.Done()
			for f := range d.c.Events() {
				switch f.Type {
				case irisv1.TypeMessage, irisv1.TypeMessageStop:
					id := messageIDOf(f)
					d.mu.Lock()
					d.ids[id]++
					if f.Cursor > 0 {
						d.replayed++
					}
					d.mu.Unlock()
				case irisv1.TypeSyncDone:
					p, _ := client.Payload[irisv1.SyncDone](f)
					if dropped.Load() && p.Cursor >= dropHead.Load() {
						d.mu.Lock()
						if d.synced.IsZero() {
							d.synced = time.Now()
						}
						d.mu.Unlock()
					}
				case irisv1.TypeError:
					d.mu.Lock()
					d.syncErrs++
					d.mu.Unlock()
				default:
					if f.Cursor > 0 {
						d.mu.Lock()
						d.replayed++
						d.mu.Unlock()
					}
				}
			}
		}()
		// Come online in waves, as devices do, not all in one instant.
		if i%100 == 99 {
			if err := waitConnected(ctx, devs[i-99:i+1], 60*time.Second); err != nil {
				r.Err = err
				return r
			}
		}
	}
	if err := waitConnected(ctx, devs, 60*time.Second); err != nil {
		r.Err = err
		return r
	}
	connTime := time.Since(connStart)
	for _, d := range devs {
		d.start = d.c.Cursor()
	}

	// Produce frames throughout: message.send through the gateway core
	// at StormRate, each answered by the agent (message + agent.busy +
	// message.stop + agent.idle committed).
	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	var sent atomic.Int64
	var prodErr atomic.Value
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		t := time.NewTicker(time.Duration(float64(time.Second) / o.StormRate))
		defer t.Stop()
		for {
			select {
			case <-prodCtx.Done():
				return
			case <-t.C:
			}
			n := sent.Add(1)
			if err := g.app.GW.Send(prodCtx, gateway.Caller{}, gateway.SendRequest{Lane: core.Lane{ChatID: core.DefaultChatID}, Text: fmt.Sprintf("storm message %d", n)}); err != nil && prodCtx.Err() == nil {
				prodErr.Store(err)
			}
		}
	}()
	o.progress("storm: producing for %v before the drop", warm)
	sleepCtx(ctx, warm)

	// Each device pings once, as the app's keepalive would, so the
	// gateway holds proof of what it received before the drop.
	pingAll(ctx, devs)

	o.progress("storm: dropping all %d connections", n)
	dropHead.Store(g.head(ctx))
	dropped.Store(true)
	conns := make([]*client.Conn, 0, n)
	for _, d := range devs {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		if c, err := d.c.Conn(gctx); err == nil {
			conns = append(conns, c)
		}
		cancel()
	}
	t0 := time.Now()
	var closing sync.WaitGroup
	for _, c := range conns {
		closing.Add(1)
		go func() {
			defer closing.Done()
			if o.StormClose == "clean" {
				c.Close()
			} else {
				c.CloseNow()
			}
		}()
	}
	closing.Wait()
	dropTime := time.Since(t0)

	// Wait until every device has caught up past the head at the drop.
	deadline := time.Now().Add(60 * time.Second)
	var waits []time.Duration
	for {
		waits = waits[:0]
		for _, d := range devs {
			d.mu.Lock()
			if !d.synced.IsZero() {
				waits = append(waits, d.synced.Sub(t0))
			}
			d.mu.Unlock()
		}
		if len(waits) == n || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	slices.Sort(waits)
	current := len(waits)

	o.progress("storm: all current; producing a little longer, then checking every device")
	sleepCtx(ctx, warm/2)
	stopProducing()
	<-prodDone
	if err := waitStable(ctx, g, 300*time.Millisecond, 30*time.Second); err != nil {
		r.Err = err
		return r
	}

	// Every message and message.stop in the outbox after a device's first
	// cursor must reach it, live or by sync.
	type want struct {
		cursor int64
		id     string
	}
	var wants []want
	head := g.head(ctx)
	g.db.ScanOutbox(ctx, 0, head, func(row store.OutboxRow) error {
		if (row.Type == string(core.EvMessage) || row.Type == string(core.EvMessageStop)) && row.MessageID != "" {
			wants = append(wants, want{row.Cursor, row.MessageID})
		}
		return nil
	})
	missingOf := func(d *stormDev) []want {
		d.mu.Lock()
		defer d.mu.Unlock()
		var miss []want
		for _, w := range wants {
			if w.cursor > d.start && d.ids[w.id] == 0 {
				miss = append(miss, w)
			}
		}
		return miss
	}
	var lost int64
	var lostDevs int
	var examples []string
	settle := time.Now().Add(10 * time.Second)
	for {
		lost, lostDevs, examples = 0, 0, examples[:0]
		for _, d := range devs {
			if miss := missingOf(d); len(miss) > 0 {
				lost += int64(len(miss))
				lostDevs++
				if len(examples) < 5 {
					examples = append(examples, fmt.Sprintf("%s missed cursor %d (%s; it started at %d, reconnected %d×)", d.id, miss[0].cursor, miss[0].id, d.start, d.connects.Load()-1))
				}
			}
		}
		if lost == 0 || time.Now().After(settle) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Lost = lost

	var dups, replayed, expected int64
	reconnects := map[int32]int{}
	for _, d := range devs {
		d.mu.Lock()
		for _, c := range d.ids {
			if c > 1 {
				dups += int64(c - 1)
			}
		}
		replayed += int64(d.replayed)
		d.mu.Unlock()
		for _, w := range wants {
			if w.cursor > d.start {
				expected++
			}
		}
		reconnects[d.connects.Load()-1]++
	}

	total := time.Duration(0)
	if current > 0 {
		total = waits[current-1]
	}
	r.setup("%s devices use client.Client (reconnects with jittered backoff, then sync from its cursor), gateway in-process.", commas(int64(n)))
	r.setup("Frames are produced throughout at %.0f message.send/s (agent answers each: message, agent.busy, message.stop, agent.idle).", o.StormRate)
	if o.StormClose == "clean" {
		r.setup("Each device pings once before the drop; then every client closes at once with a close handshake (Conn.Close).")
	} else {
		r.setup("Each device pings once before the drop; then every client closes its socket at once (CloseNow: no close handshake, like a lost network).")
	}
	r.setup("Current = the device got a sync.done whose cursor is at or past the outbox head at the drop.")
	r.fig("time until all are current", fmt.Sprintf("%.2fs", total.Seconds()), "<= 10 s", ptr(current == n && total <= 10*time.Second))
	r.check("devices current", fmt.Sprintf("%s of %s", commas(int64(current)), commas(int64(n))), "all", current == n)
	r.fig("per-device catch-up p50 / p99", fmt.Sprintf("%s / %s", ms(pct(waits, 0.5)), ms(pct(waits, 0.99))), "", nil)
	r.check("frames lost", fmt.Sprintf("%s of %s expected (on %d devices)", commas(lost), commas(expected), lostDevs), "0", lost == 0)
	r.fig("frames replayed by sync", commas(replayed), "", nil)
	r.fig("duplicates received (at-least-once)", commas(dups), "", nil)
	r.fig("initial connect", fmt.Sprintf("%.2fs for %s devices (waves of 100)", connTime.Seconds(), commas(int64(n))), "", nil)
	r.fig("messages produced", fmt.Sprintf("%s (outbox head %s)", commas(sent.Load()), commas(head)), "", nil)
	var rc []string
	for k, v := range reconnects {
		rc = append(rc, fmt.Sprintf("%d× by %d", k, v))
	}
	sort.Strings(rc)
	r.note("closing all sockets took %s; reconnects per device: %s.", ms(dropTime), strings.Join(rc, ", "))
	for _, e := range examples {
		r.note("LOST: %s", e)
	}
	if err, _ := prodErr.Load().(error); err != nil {
		r.note("producer error: %v", err)
	}
	r.Notes = append(r.Notes, g.logs.summary()...)
	if current < n {
		r.Err = fmt.Errorf("%d devices never caught up", n-current)
	}
	return r
}

func waitConnected(ctx context.Context, devs []*stormDev, limit time.Duration) error {
	deadline := time.After(limit)
	for _, d := range devs {
		select {
		case <-d.connected:
		case <-deadline:
			return fmt.Errorf("device %s did not connect within %v", d.id, limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func pingAll(ctx context.Context, devs []*stormDev) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100)
	for _, d := range devs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			ts := time.Now().UnixMilli()
			d.c.Request(pctx, irisv1.TypePing, client.Lane{}, irisv1.Ping{TS: &ts})
		}()
	}
	wg.Wait()
}

// waitStable waits until the outbox head has not moved for quiet.
func waitStable(ctx context.Context, g *gw, quiet, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, since := g.head(ctx), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			return errors.New("the outbox kept growing: turns did not finish")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
		if h := g.head(ctx); h != last {
			last, since = h, time.Now()
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// messageIDOf is the id of the message a message or message.stop frame
// carries ("" when it does not decode).
func messageIDOf(f client.Frame) string {
	if f.Type == irisv1.TypeMessageStop {
		p, _ := client.Payload[irisv1.MessageStop](f)
		return p.MessageID
	}
	p, _ := client.Payload[irisv1.Message](f)
	return p.MessageID
}
