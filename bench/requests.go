package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// Request modes of the ratios scenario: handshakes, request round trips,
// recovery of missed frames by sync, and a storm of devices connecting.

// handshakes dials n devices one after another, each new, and times dial →
// hello.ack.
func handshakes(ctx context.Context, o *Options, n int) ([]time.Duration, error) {
	child, err := startChild(ctx, o, childIrisgate, 0)
	if err != nil {
		return nil, err
	}
	defer child.stop()
	lat := make([]time.Duration, 0, n)
	for i := range n + 5 {
		t := time.Now()
		d, err := dialRaw(ctx, child.url, fmt.Sprintf("hs-%05d", i))
		if err != nil {
			return nil, err
		}
		if i >= 5 { // the first few pay one-time costs
			lat = append(lat, time.Since(t))
		}
		d.ws.CloseNow()
	}
	slices.Sort(lat)
	return lat, nil
}

// rttStats is one request's sequential round trips.
type rttStats struct {
	n   int64
	d   time.Duration
	lat []time.Duration
}

func (s rttStats) rate() float64 { return rate(s.n, s.d) }

// roundTrips times history (10 messages) and ping requests of one device,
// one at a time, d each.
func roundTrips(ctx context.Context, o *Options, d time.Duration) (history, ping rttStats, err error) {
	child, err := startChild(ctx, o, childIrisgate, 0)
	if err != nil {
		return history, ping, err
	}
	defer child.stop()
	// Twelve messages in the default lane (their turns park).
	var clock atomic.Pointer[pubClock]
	p, err := dialPublisher(ctx, child.url, 16, &clock)
	if err != nil {
		return history, ping, err
	}
	c := newClock(12)
	clock.Store(c)
	p.lanes = []string{core.DefaultChatID}
	for i := range 12 {
		if err := p.publish(ctx, c, i, true); err != nil {
			p.close()
			return history, ping, err
		}
	}
	err = p.waitAcks(ctx, 12, 30*time.Second)
	p.close()
	if err != nil {
		return history, ping, err
	}
	dev, err := dialRaw(ctx, child.url, "rtt-device")
	if err != nil {
		return history, ping, err
	}
	defer dev.close()
	replies := make(chan []byte, 1)
	dev.serve(func(b []byte) {
		if frameID(b) != 0 {
			replies <- bytes.Clone(b)
		}
	})
	run := func(typ, chat string, payload []byte, check func([]byte) error) (rttStats, error) {
		var s rttStats
		start := time.Now()
		for first := true; first || time.Since(start) < d; first = false {
			t := time.Now()
			id, err := dev.send(ctx, typ, chat, payload)
			if err != nil {
				return s, err
			}
			var b []byte
			select {
			case b = <-replies:
			case <-dev.done:
				return s, fmt.Errorf("%s: connection ended: %v", typ, dev.err)
			case <-time.After(10 * time.Second):
				return s, fmt.Errorf("%s: no answer in 10s", typ)
			}
			s.lat = append(s.lat, time.Since(t))
			if frameID(b) != id {
				return s, fmt.Errorf("%s: answer to request %d, want %d", typ, frameID(b), id)
			}
			if first {
				if err := check(b); err != nil {
					return s, err
				}
			}
			s.n++
		}
		s.d = time.Since(start)
		slices.Sort(s.lat)
		return s, nil
	}
	history, err = run(irisv1.TypeHistory, core.DefaultChatID, []byte(`{"limit":10}`), func(b []byte) error {
		if string(frameType(b)) != irisv1.TypeHistory || bytes.Count(b, keyMessageID) != 10 {
			return fmt.Errorf("history: want 10 messages, got %.300s", b)
		}
		return nil
	})
	if err != nil {
		return history, ping, err
	}
	ping, err = run(irisv1.TypePing, "", []byte(`{"ts":1}`), func(b []byte) error {
		if string(frameType(b)) != irisv1.TypePong {
			return fmt.Errorf("ping: want pong, got %.300s", b)
		}
		return nil
	})
	return history, ping, err
}

// syncDev is a device that syncs once and counts the replay.
type syncDev struct {
	*rawDev
	replayed atomic.Int64
	done     chan int64 // sync.done's cursor
	asked    time.Time  // just before the sync request was written
	doneAt   time.Time  // when sync.done was read; set before done is sent to
}

// dialSync connects deviceID and asks sync from cursor (the hello.ack's
// sync_cursor when cursor < 0); it returns at once, done tells the end.
func dialSync(ctx context.Context, url, deviceID string, cursor int64) (*syncDev, error) {
	rd, _, ack, err := dialRawOpts(ctx, url, deviceID, nil)
	if err != nil {
		return nil, err
	}
	if cursor < 0 {
		cursor = ack.SyncCursor
	}
	d := &syncDev{rawDev: rd, done: make(chan int64, 1)}
	id := d.newID()
	d.serve(func(b []byte) {
		if envCursor(b) > 0 {
			d.replayed.Add(1)
		} else if frameID(b) == id && string(frameType(b)) == irisv1.TypeSyncDone {
			d.doneAt = time.Now()
			d.done <- payloadCursor(b)
		}
	})
	d.asked = time.Now()
	if err := d.sendID(ctx, id, irisv1.TypeSync, "", fmt.Appendf(nil, `{"cursor":%d}`, cursor)); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *syncDev) wait(ctx context.Context, limit time.Duration) (int64, error) {
	select {
	case c := <-d.done:
		return c, nil
	case <-d.rawDev.done:
		return 0, fmt.Errorf("device %s: connection ended before sync.done: %v", d.id, d.err)
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(limit):
		return 0, fmt.Errorf("device %s: no sync.done in %v", d.id, limit)
	}
}

// recovery has a device miss `missed` frames while away, rounds times,
// and times its return: sync request → sync.done (lat), and dial →
// sync.done (back).
func recovery(ctx context.Context, o *Options, missed, rounds int) (lat, back []time.Duration, replayed int64, err error) {
	child, err := startChild(ctx, o, childIrisgate, lanesFor(missed*rounds))
	if err != nil {
		return nil, nil, 0, err
	}
	defer child.stop()
	var clock atomic.Pointer[pubClock]
	p, err := dialPublisher(ctx, child.url, 64, &clock)
	if err != nil {
		return nil, nil, 0, err
	}
	defer p.close()
	c := newClock(missed * rounds)
	clock.Store(c)
	for r := range rounds {
		d, err := dialSync(ctx, child.url, "recovering", -1)
		if err != nil {
			return nil, nil, 0, err
		}
		cursor, err := d.wait(ctx, 30*time.Second)
		d.close()
		if err != nil {
			return nil, nil, 0, err
		}
		for i := range missed {
			if err := p.publish(ctx, c, r*missed+i, true); err != nil {
				return nil, nil, 0, err
			}
		}
		if err := p.waitAcks(ctx, int64((r+1)*missed), 60*time.Second); err != nil {
			return nil, nil, 0, err
		}
		t := time.Now()
		d, err = dialSync(ctx, child.url, "recovering", cursor)
		if err != nil {
			return nil, nil, 0, err
		}
		_, err = d.wait(ctx, 60*time.Second)
		if err == nil {
			lat = append(lat, d.doneAt.Sub(d.asked))
			back = append(back, d.doneAt.Sub(t))
		}
		replayed += d.replayed.Load()
		d.close()
		if err != nil {
			return nil, nil, 0, err
		}
		if got := d.replayed.Load(); got < int64(missed) {
			return nil, nil, 0, fmt.Errorf("round %d: %d frames replayed, want at least %d", r, got, missed)
		}
	}
	slices.Sort(lat)
	slices.Sort(back)
	return lat, back, replayed, nil
}

// stormRun has n devices connect and sync at once (stormPar dialling at a
// time), fresh; drops them all; and has them do it again, warm.
func stormRun(ctx context.Context, o *Options, n int) (fresh, warm time.Duration, err error) {
	child, err := startChild(ctx, o, childIrisgate, 0)
	if err != nil {
		return 0, 0, err
	}
	defer child.stop()
	cursors := make([]int64, n)
	for i := range cursors {
		cursors[i] = -1
	}
	phase := func() (time.Duration, error) {
		devs := make([]*syncDev, n)
		defer func() {
			var raws []*rawDev
			for _, d := range devs {
				if d != nil {
					raws = append(raws, d.rawDev)
				}
			}
			closeAll(raws)
		}()
		sem := make(chan struct{}, stormPar)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		start := time.Now()
		for i := range n {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := dialSync(ctx, child.url, fmt.Sprintf("storm-%04d", i), cursors[i])
				if err == nil {
					devs[i] = d
					cursors[i], err = d.wait(ctx, 60*time.Second)
				}
				<-sem
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return time.Since(start), firstErr
	}
	if fresh, err = phase(); err != nil {
		return fresh, 0, err
	}
	// Warm means the devices are known, not that their old connections
	// still count: wait until the gateway has let them all go.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := child.metric(ctx, "irisgate_connections")
		if err != nil {
			return fresh, 0, err
		}
		if v == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fresh, 0, fmt.Errorf("%v connections still open 30s after the devices closed", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	warm, err = phase()
	return fresh, warm, err
}
