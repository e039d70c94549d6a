package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// Publishing modes of the ratios scenario: one device pipelines
// message.send (each commits its message and the turn it owes; the child's
// agent parks every turn, so devices get one frame per send), or HTTP
// clients post to /api/send, and watcher devices count what reaches them.

// idBase is the request id of publish 0 (ids below it are the devices'
// own requests).
const idBase = 1_000

// perLane is how many sends go to one lane: a lane queues at most
// gateway.MaxQueuedTurns parked turns, so publishes rotate over lanes.
const perLane = 30

func lanesFor(publishes int) int { return publishes/perLane + 2 }

var keyPub = []byte(`"text":"pub `)

// pubText is publish seq's text, about 120 bytes (the frame about 300).
func pubText(seq int) string {
	return textOf("pub "+strconv.Itoa(seq)+" ", 120)
}

// pubSeq is the publish a frame carries, -1 for none.
func pubSeq(b []byte) int {
	i := bytes.Index(b, keyPub)
	if i < 0 {
		return -1
	}
	n, ok := leadingInt(b[i+len(keyPub):])
	if !ok {
		return -1
	}
	return int(n)
}

// pubClock holds when each publish was sent, as offsets from base.
type pubClock struct {
	base time.Time
	sent []atomic.Int64 // nanoseconds after base; written before the send
}

func newClock(n int) *pubClock { return &pubClock{base: time.Now(), sent: make([]atomic.Int64, n)} }

func (c *pubClock) now() time.Duration { return time.Since(c.base) }

func (c *pubClock) mark(seq int) { c.sent[seq].Store(int64(c.now())) }

// watcher is a device counting the publishes it receives.
type watcher struct {
	*rawDev
	got   atomic.Int64
	other atomic.Int64 // frames that are not publishes
	mu    sync.Mutex
	lat   []time.Duration
	last  time.Duration // receipt of the newest publish, after the clock's base
}

func (w *watcher) reset() {
	w.got.Store(0)
	w.other.Store(0)
	w.mu.Lock()
	w.lat, w.last = w.lat[:0], 0
	w.mu.Unlock()
}

// watch connects n watchers reporting against clock (offering
// permessage-deflate when deflate is set).
func watch(ctx context.Context, url string, n int, clock *atomic.Pointer[pubClock], deflate bool) ([]*watcher, error) {
	dial := dialRaw
	if deflate {
		dial = dialDeflate
	}
	raws, err := dialManyWith(ctx, url, n, 32, func(i int) string { return fmt.Sprintf("watch-%04d", i) }, dial)
	if err != nil {
		return nil, err
	}
	ws := make([]*watcher, n)
	for i, rd := range raws {
		w := &watcher{rawDev: rd}
		ws[i] = w
		w.serve(func(b []byte) {
			c := clock.Load()
			if c == nil {
				return
			}
			at := c.now()
			if s := pubSeq(b); s >= 0 && s < len(c.sent) && string(frameType(b)) == irisv1.TypeMessage {
				w.mu.Lock()
				w.lat = append(w.lat, at-time.Duration(c.sent[s].Load()))
				w.last = max(w.last, at)
				w.mu.Unlock()
				w.got.Add(1)
				return
			}
			w.other.Add(1)
		})
	}
	return ws, nil
}

func closeWatchers(ws []*watcher) {
	raws := make([]*rawDev, len(ws))
	for i, w := range ws {
		raws[i] = w.rawDev
	}
	closeAll(raws)
}

// waitGot waits until every watcher has n publishes.
func waitGot(ctx context.Context, ws []*watcher, n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, w := range ws {
		for w.got.Load() < n {
			select {
			case <-w.done:
				return fmt.Errorf("watcher %s disconnected with %d of %d publishes: %v", w.id, w.got.Load(), n, w.err)
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("watcher %s has %d of %d publishes after %v", w.id, w.got.Load(), n, limit)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return nil
}

// publisher is the device that pipelines message.send.
type publisher struct {
	*rawDev
	lanes  []string
	window chan struct{} // one token per send awaiting its answer
	acks   atomic.Int64
	errs   atomic.Int64
	mu     sync.Mutex
	first  string        // first error answer
	last   time.Duration // newest answer, after the clock's base
	early  time.Duration // oldest answer, after the clock's base
}

// dialPublisher connects the publisher; it learns the lanes from hello.ack.
func dialPublisher(ctx context.Context, url string, window int, clock *atomic.Pointer[pubClock]) (*publisher, error) {
	rd, _, ack, err := dialRawOpts(ctx, url, "publisher", nil)
	if err != nil {
		return nil, err
	}
	p := &publisher{rawDev: rd, lanes: laneIDs(ack.Channels), window: make(chan struct{}, window)}
	p.serve(func(b []byte) {
		if frameID(b) < idBase {
			return
		}
		if string(frameType(b)) == irisv1.TypeError {
			p.errs.Add(1)
			p.mu.Lock()
			if p.first == "" {
				p.first = string(b)
			}
			p.mu.Unlock()
		}
		if c := clock.Load(); c != nil {
			at := c.now()
			p.mu.Lock()
			p.last = max(p.last, at)
			if p.early == 0 || at < p.early {
				p.early = at
			}
			p.mu.Unlock()
		}
		p.acks.Add(1)
		select {
		case <-p.window:
		default:
		}
	})
	return p, nil
}

// publish sends publish seq (to lane seq mod lanes), waiting for room in
// the window first when wait is set.
func (p *publisher) publish(ctx context.Context, c *pubClock, seq int, wait bool) error {
	if wait {
		select {
		case p.window <- struct{}{}:
		case <-p.done:
			return fmt.Errorf("publisher disconnected: %v", p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(60 * time.Second):
			return fmt.Errorf("no send answered for 60s (%d answers so far)", p.acks.Load())
		}
	}
	if len(p.lanes) == 0 {
		return errors.New("the gateway offered no bench lanes")
	}
	c.mark(seq)
	return p.sendID(ctx, int64(idBase+seq), irisv1.TypeMessageSend, p.lanes[seq%len(p.lanes)], fmt.Appendf(nil, `{"text":%q}`, pubText(seq)))
}

func (p *publisher) waitAcks(ctx context.Context, n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for p.acks.Load() < n {
		select {
		case <-p.done:
			return fmt.Errorf("publisher disconnected after %d of %d answers: %v", p.acks.Load(), n, p.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sends answered after %v", p.acks.Load(), n, limit)
		}
		time.Sleep(time.Millisecond)
	}
	if e := p.errs.Load(); e > 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("%d sends answered with an error, the first: %.300s", e, p.first)
	}
	return nil
}

// pubStats is what one publishing run measured.
type pubStats struct {
	publishes  int64
	pubSpan    time.Duration // first send → last answer
	ackSpan    time.Duration // first answer → last answer
	delivered  int64
	other      int64         // frames besides the publishes the watchers got
	span       time.Duration // first send → last delivery
	lat        []time.Duration
	cpu        time.Duration // the child's CPU over the run
	clientCPU  time.Duration // this process's (the load client's) CPU over the run
	wantedRate float64       // paced runs: the rate asked for
	// batch is the writes the child's group commit put in a transaction,
	// on average over its life (0: not known).
	batch float64
}

func (s *pubStats) pubRate() float64 { return rate(s.publishes, s.pubSpan) }

// ackRate is the pace of the answers: a paced run that keeps up answers at
// the rate it sends.
func (s *pubStats) ackRate() float64 { return rate(s.publishes-1, s.ackSpan) }
func (s *pubStats) delRate() float64 { return rate(s.delivered, s.span) }

func collect(ws []*watcher, st *pubStats) {
	for _, w := range ws {
		w.mu.Lock()
		st.lat = append(st.lat, w.lat...)
		st.span = max(st.span, w.last)
		w.mu.Unlock()
		st.delivered += w.got.Load()
		st.other += w.other.Load()
	}
	slices.Sort(st.lat)
}

// pubRun starts a child with lanes for publishes, connects watchers and a
// publisher, and runs fn (which publishes against the clock) while it
// measures the child's CPU.
func pubRun(ctx context.Context, o *Options, watchers, publishes, window int, fn func(p *publisher, c *pubClock) error) (pubStats, error) {
	st := pubStats{publishes: int64(publishes)}
	child, err := startChild(ctx, o, childIrisgate, lanesFor(publishes))
	if err != nil {
		return st, err
	}
	defer child.stop()
	var clock atomic.Pointer[pubClock]
	ws, err := watch(ctx, child.url, watchers, &clock, o.RatioDeflate)
	if err != nil {
		return st, err
	}
	defer closeWatchers(ws)
	p, err := dialPublisher(ctx, child.url, window, &clock)
	if err != nil {
		return st, err
	}
	defer p.close()
	cpu0, self0 := child.cpu(), selfCPU()
	c := newClock(publishes)
	clock.Store(c)
	if err := fn(p, c); err != nil {
		return st, err
	}
	limit := 60*time.Second + time.Duration(publishes)*time.Millisecond
	if err := p.waitAcks(ctx, int64(publishes), limit); err != nil {
		return st, err
	}
	if err := waitGot(ctx, ws, int64(publishes), limit); err != nil {
		return st, err
	}
	st.cpu, st.clientCPU = child.cpu()-cpu0, selfCPU()-self0
	st.batch = metricBatch(ctx, child.base)
	p.mu.Lock()
	st.pubSpan, st.ackSpan = p.last, p.last-p.early
	p.mu.Unlock()
	collect(ws, &st)
	return st, nil
}

// burst publishes as fast as a window of sends in flight allows.
func burst(ctx context.Context, o *Options, watchers, publishes int) (pubStats, error) {
	return pubRun(ctx, o, watchers, publishes, 64, func(p *publisher, c *pubClock) error {
		for i := range publishes {
			if err := p.publish(ctx, c, i, true); err != nil {
				return err
			}
		}
		return nil
	})
}

// paced publishes perSec a second for d, on schedule, whatever the answers.
func paced(ctx context.Context, o *Options, watchers int, perSec float64, d time.Duration) (pubStats, error) {
	n := max(int(perSec*d.Seconds()), 1)
	st, err := pubRun(ctx, o, watchers, n, 1, func(p *publisher, c *pubClock) error {
		for i := range n {
			if w := time.Until(c.base.Add(time.Duration(float64(i) / perSec * float64(time.Second)))); w > 0 {
				time.Sleep(w)
			}
			if err := p.publish(ctx, c, i, false); err != nil {
				return err
			}
		}
		return nil
	})
	st.wantedRate = perSec
	return st, err
}

// httpPublish runs posters clients posting to /api/send for d while
// watchers count what reaches them.
func httpPublish(ctx context.Context, o *Options, watchers, posters int, d time.Duration) (pubStats, error) {
	var st pubStats
	child, err := startChild(ctx, o, childIrisgate, 0)
	if err != nil {
		return st, err
	}
	defer child.stop()
	var clock atomic.Pointer[pubClock]
	ws, err := watch(ctx, child.url, watchers, &clock, o.RatioDeflate)
	if err != nil {
		return st, err
	}
	defer closeWatchers(ws)
	tr := &http.Transport{MaxIdleConnsPerHost: posters, MaxConnsPerHost: posters}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next, posted atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	cpu0 := child.cpu()
	// Room for 50,000 posts a second.
	c := newClock(int(d.Seconds()*50_000) + 1_000)
	clock.Store(c)
	stopAt := c.base.Add(d)
	for range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) && ctx.Err() == nil {
				seq := int(next.Add(1) - 1)
				if seq >= len(c.sent) {
					return
				}
				c.mark(seq)
				err := postSend(ctx, hc, child.base, pubText(seq))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				posted.Add(1)
			}
		}()
	}
	wg.Wait()
	st.pubSpan = c.now()
	st.publishes = posted.Load()
	if firstErr != nil {
		return st, firstErr
	}
	if err := waitGot(ctx, ws, st.publishes, 60*time.Second); err != nil {
		return st, err
	}
	st.cpu = child.cpu() - cpu0
	collect(ws, &st)
	return st, nil
}

func postSend(ctx context.Context, hc *http.Client, base, text string) error {
	body := fmt.Sprintf(`{"text":%q}`, text)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/send", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+DeliverToken)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /api/send: %s: %.300s", resp.Status, b)
	}
	return nil
}
