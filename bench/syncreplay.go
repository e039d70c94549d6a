package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// fillLanes is how many lanes the outbox is filled through.
const fillLanes = 16

func runSync(ctx context.Context, o *Options) (r Result) {
	want := int64(o.SyncFrames)
	r.Title = fmt.Sprintf("(c) Sync replay: one device syncs a %s-frame outbox from cursor 0", commas(want))
	g, err := startGateway(o, "sync", nullAgent{}, func(c *server.AppConfig) { c.OutboxKeep = want*2 + 10_000 })
	if err != nil {
		r.Err = err
		return r
	}
	defer g.close()

	o.progress("sync: filling the outbox with %s frames", commas(want))
	fillFrames, fillTime, err := fillOutbox(ctx, g, want)
	if err != nil {
		r.Err = fmt.Errorf("filling the outbox: %w", err)
		return r
	}
	head := g.head(ctx)
	var rows, rowBytes int64
	g.db.ScanOutbox(ctx, 0, head, func(row store.OutboxRow) error {
		rows++
		rowBytes += int64(len(row.Body))
		return nil
	})

	o.progress("sync: replaying")
	dev, err := dialRaw(ctx, g.url, "sync-reader")
	if err != nil {
		r.Err = err
		return r
	}
	defer dev.close()
	var (
		got, wireBytes, outOfOrder atomic.Int64
		last                       int64
		doneCursor                 atomic.Int64
		done                       = make(chan time.Time, 1)
		syncID                     = dev.newID()
	)
	dev.serve(func(b []byte) {
		if c := envCursor(b); c > 0 {
			got.Add(1)
			wireBytes.Add(int64(len(b)))
			if c <= last {
				outOfOrder.Add(1)
			}
			last = c
			return
		}
		if frameID(b) == syncID {
			doneCursor.Store(payloadCursor(b))
			done <- time.Now()
		}
	})
	start := time.Now()
	if err := dev.sendID(ctx, syncID, irisv1.TypeSync, "", []byte(`{"cursor":0}`)); err != nil {
		r.Err = err
		return r
	}
	var end time.Time
	select {
	case end = <-done:
	case <-dev.done:
		r.Err = fmt.Errorf("connection ended during the replay: %v", dev.err)
		return r
	case <-ctx.Done():
		r.Err = ctx.Err()
		return r
	case <-time.After(2 * time.Minute):
		r.Err = fmt.Errorf("no sync.done within 2 minutes (%d frames so far)", got.Load())
		return r
	}
	span := end.Sub(start)
	fps := rate(got.Load(), span)
	missing := rows - got.Load()
	if missing > 0 {
		r.Lost = missing
	}

	r.setup("Outbox filled through the gateway itself: gateway.Send (as message.send does) from %d goroutines into %d lanes,", fillLanes, fillLanes)
	r.setup("no device connected; agent returns at once, so each send commits message + agent.busy + agent.idle.")
	r.setup("Then a new device (raw WebSocket, nothing proven) sends sync {cursor:0}; timed from the request to sync.done.")
	r.fig("frames replayed", perSec(fps), ">= 200,000/s", ptr(fps >= 200_000))
	r.fig("replay", fmt.Sprintf("%s frames, %s on the wire, in %.2fs (%s/s)", commas(got.Load()), mib(float64(wireBytes.Load())), span.Seconds(), mib(rate(wireBytes.Load(), span))), "", nil)
	r.check("frames missing from the replay", fmt.Sprint(max(missing, 0)), "0", missing <= 0)
	r.check("frames out of cursor order", fmt.Sprint(outOfOrder.Load()), "0", outOfOrder.Load() == 0)
	r.fig("sync.done cursor", fmt.Sprintf("%s (outbox head %s)", commas(doneCursor.Load()), commas(head)), "", nil)
	r.fig("fill: durable frames committed, no devices", fmt.Sprintf("%s (%s frames in %.2fs)", perSec(rate(fillFrames, fillTime)), commas(fillFrames), fillTime.Seconds()), "", nil)
	r.note("Outbox: %s rows, %s of stored bodies (the core's JSON form; each replayed frame is decoded and re-encoded as Iris).", commas(rows), mib(float64(rowBytes)))
	r.Notes = append(r.Notes, g.logs.summary()...)
	return r
}

// fillOutbox commits about want frames through gateway.Send and waits for
// every turn to finish. It returns the frames committed and the time taken.
func fillOutbox(ctx context.Context, g *gw, want int64) (int64, time.Duration, error) {
	var lanes []core.Lane
	for i := range fillLanes {
		if err := g.app.GW.CreateChannel(ctx, gateway.Caller{}, fmt.Sprintf("fill lane %d", i), core.KindChannel, ""); err != nil {
			return 0, 0, err
		}
	}
	chs, err := g.app.Store.Channels(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, c := range chs {
		if c.Kind == core.KindChannel {
			lanes = append(lanes, c.Lane())
		}
	}
	before := g.head(ctx)
	start := time.Now()
	sends, err := coreSends(ctx, g, lanes, len(lanes), time.Time{}, (want-before+2)/3, textOf("sync replay benchmark message", 120))
	if err != nil {
		return 0, 0, err
	}
	if err := waitHead(ctx, g, before+3*sends, 2*time.Minute); err != nil {
		return 0, 0, err
	}
	return g.head(ctx) - before, time.Since(start), nil
}

// coreSends calls gateway.Send (what message.send does, minus the socket)
// from workers goroutines spread over lanes, until stopAt (when not zero)
// or until limit sends (when > 0). It returns the number of sends.
func coreSends(ctx context.Context, g *gw, lanes []core.Lane, workers int, stopAt time.Time, limit int64, text string) (int64, error) {
	var claimed, sent atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		l := lanes[w%len(lanes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && (stopAt.IsZero() || time.Now().Before(stopAt)) {
				if limit > 0 && claimed.Add(1) > limit {
					return
				}
				err := g.app.GW.Send(ctx, gateway.Caller{}, gateway.SendRequest{Lane: l, Text: text})
				if core.AsError(err).Code == core.CodeRateLimited {
					// The lane's queue is full (gateway.MaxQueuedTurns):
					// wait for its turns, as a person would.
					claimed.Add(-1)
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	return sent.Load(), firstErr
}

// waitHead waits until the outbox head reaches target: the turns queued by
// the sends have all committed their agent.idle.
func waitHead(ctx context.Context, g *gw, target int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for g.head(ctx) < target {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("outbox head %d, want %d: turns did not finish", g.head(ctx), target)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
