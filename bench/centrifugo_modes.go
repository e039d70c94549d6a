package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The Centrifugo side of each of the ratio modes: the same load as the
// irisgate functions (pubsub.go, requests.go, wirebytes.go) beside which
// they stand, spoken in Centrifugo's protocol. Every device is one
// person's, subscribed to the one channel (cfChannel), so each publication
// reaches every device, the publisher's included, as an irisgate
// broadcast frame reaches every device of the person.

var (
	keyCfPush  = []byte(`{"push":{`)
	keyCfPub   = []byte(`"pub":{`)
	keyCfError = []byte(`"error":{`)
)

// cfWatch connects n subscribed watchers reporting against clock.
func cfWatch(ctx context.Context, url, token string, n int, clock *atomic.Pointer[pubClock]) ([]*watcher, error) {
	raws, err := dialManyWith(ctx, url, n, 32, func(i int) string { return fmt.Sprintf("watch-%04d", i) }, cfDialSub(token))
	if err != nil {
		return nil, err
	}
	ws := make([]*watcher, n)
	for i, rd := range raws {
		w := &watcher{rawDev: rd}
		ws[i] = w
		cfServe(rd, func(b []byte) {
			c := clock.Load()
			if c == nil {
				return
			}
			at := c.now()
			if bytes.HasPrefix(b, keyCfPush) && bytes.Contains(b, keyCfPub) {
				if s := pubSeq(b); s >= 0 && s < len(c.sent) {
					w.mu.Lock()
					w.lat = append(w.lat, at-time.Duration(c.sent[s].Load()))
					w.last = max(w.last, at)
					w.mu.Unlock()
					w.got.Add(1)
					return
				}
			}
			w.other.Add(1)
		})
	}
	return ws, nil
}

// cfDialPublisher connects the publishing client (subscribed, as a device
// of the person is) with a window of publishes in flight.
func cfDialPublisher(ctx context.Context, url, token string, window int, clock *atomic.Pointer[pubClock]) (*publisher, error) {
	rd, err := cfDialSub(token)(ctx, url, "publisher")
	if err != nil {
		return nil, err
	}
	p := &publisher{rawDev: rd, window: make(chan struct{}, window)}
	cfServe(rd, func(b []byte) {
		if cfID(b) < idBase {
			return
		}
		if bytes.Contains(b, keyCfError) {
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

// cfPublish sends publish seq, waiting for room in the window first when
// wait is set (publisher.publish's rule).
func cfPublish(ctx context.Context, p *publisher, c *pubClock, seq int, wait bool) error {
	if wait {
		select {
		case p.window <- struct{}{}:
		case <-p.done:
			return fmt.Errorf("publisher disconnected: %v", p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(60 * time.Second):
			return fmt.Errorf("no publish answered for 60s (%d answers so far)", p.acks.Load())
		}
	}
	c.mark(seq)
	return cfWrite(ctx, p.rawDev, fmt.Appendf(nil, `{"id":%d,"publish":{"channel":%q,"data":{"text":%q}}}`, idBase+seq, cfChannel, pubText(seq)))
}

// cfPubRun is pubRun against a fresh Centrifugo child.
func cfPubRun(ctx context.Context, o *Options, watchers, publishes, window int, fn func(p *publisher, c *pubClock) error) (pubStats, error) {
	st := pubStats{publishes: int64(publishes)}
	child, token, err := startCentrifugo(ctx, o, publishes+16)
	if err != nil {
		return st, err
	}
	defer child.stop()
	var clock atomic.Pointer[pubClock]
	ws, err := cfWatch(ctx, child.url, token, watchers, &clock)
	if err != nil {
		return st, err
	}
	defer closeWatchers(ws)
	p, err := cfDialPublisher(ctx, child.url, token, window, &clock)
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
	p.mu.Lock()
	st.pubSpan, st.ackSpan = p.last, p.last-p.early
	p.mu.Unlock()
	collect(ws, &st)
	return st, nil
}

// cfBurst is burst: publishes as fast as 64 in flight allow.
func cfBurst(ctx context.Context, o *Options, watchers, publishes int) (pubStats, error) {
	return cfPubRun(ctx, o, watchers, publishes, 64, func(p *publisher, c *pubClock) error {
		for i := range publishes {
			if err := cfPublish(ctx, p, c, i, true); err != nil {
				return err
			}
		}
		return nil
	})
}

// cfPaced is paced: perSec publishes a second for d, on schedule.
func cfPaced(ctx context.Context, o *Options, watchers int, perSec float64, d time.Duration) (pubStats, error) {
	n := max(int(perSec*d.Seconds()), 1)
	st, err := cfPubRun(ctx, o, watchers, n, 1, func(p *publisher, c *pubClock) error {
		for i := range n {
			if w := time.Until(c.base.Add(time.Duration(float64(i) / perSec * float64(time.Second)))); w > 0 {
				time.Sleep(w)
			}
			if err := cfPublish(ctx, p, c, i, false); err != nil {
				return err
			}
		}
		return nil
	})
	st.wantedRate = perSec
	return st, err
}

// cfHTTPPublish is httpPublish: posters clients post to the server API's
// publish for d while watchers count what reaches them.
func cfHTTPPublish(ctx context.Context, o *Options, watchers, posters int, d time.Duration) (pubStats, error) {
	var st pubStats
	// Room for 50,000 posts a second, as httpPublish has.
	room := int(d.Seconds()*50_000) + 1_000
	child, token, err := startCentrifugo(ctx, o, room)
	if err != nil {
		return st, err
	}
	defer child.stop()
	var clock atomic.Pointer[pubClock]
	ws, err := cfWatch(ctx, child.url, token, watchers, &clock)
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
	c := newClock(room)
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
				_, err := cfAPI(ctx, hc, child.base, "publish", fmt.Appendf(nil, `{"channel":%q,"data":{"text":%q}}`, cfChannel, pubText(seq)))
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

// cfHandshakes is handshakes: dial → connect reply, n new clients one
// after another.
func cfHandshakes(ctx context.Context, o *Options, n int) ([]time.Duration, error) {
	child, token, err := startCentrifugo(ctx, o, 16)
	if err != nil {
		return nil, err
	}
	defer child.stop()
	lat := make([]time.Duration, 0, n)
	for i := range n + 5 {
		t := time.Now()
		d, err := cfDial(ctx, child.url, token, fmt.Sprintf("hs-%05d", i))
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

// cfRoundTrips is roundTrips: history of 10 (from 12 publications in
// memory) and the RPC ping extension, one at a time, d each.
func cfRoundTrips(ctx context.Context, o *Options, d time.Duration) (history, ping rttStats, err error) {
	child, token, err := startCentrifugo(ctx, o, 16)
	if err != nil {
		return history, ping, err
	}
	defer child.stop()
	for i := range 12 {
		if _, err := cfAPI(ctx, http.DefaultClient, child.base, "publish", fmt.Appendf(nil, `{"channel":%q,"data":{"text":%q}}`, cfChannel, pubText(i))); err != nil {
			return history, ping, err
		}
	}
	dev, err := cfDial(ctx, child.url, token, "rtt-device")
	if err != nil {
		return history, ping, err
	}
	defer dev.close()
	replies := make(chan []byte, 1)
	cfServe(dev, func(b []byte) {
		if cfID(b) != 0 {
			replies <- bytes.Clone(b)
		}
	})
	run := func(what, format string, check func([]byte) error) (rttStats, error) {
		var s rttStats
		start := time.Now()
		for first := true; first || time.Since(start) < d; first = false {
			t := time.Now()
			id := dev.newID()
			if err := cfWrite(ctx, dev, fmt.Appendf(nil, format, id)); err != nil {
				return s, err
			}
			var b []byte
			select {
			case b = <-replies:
			case <-dev.done:
				return s, fmt.Errorf("%s: connection ended: %v", what, dev.err)
			case <-time.After(10 * time.Second):
				return s, fmt.Errorf("%s: no answer in 10s", what)
			}
			s.lat = append(s.lat, time.Since(t))
			if cfID(b) != id {
				return s, fmt.Errorf("%s: answer to request %d, want %d", what, cfID(b), id)
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
	history, err = run("history", `{"id":%d,"history":{"channel":"`+cfChannel+`","limit":10}}`, func(b []byte) error {
		if bytes.Contains(b, keyCfError) || bytes.Count(b, []byte(`"data":`)) != 10 {
			return fmt.Errorf("history: want 10 publications, got %.300s", b)
		}
		return nil
	})
	if err != nil {
		return history, ping, err
	}
	ping, err = run("rpc ping", `{"id":%d,"rpc":{"method":"ping"}}`, func(b []byte) error {
		if bytes.Contains(b, keyCfError) || !bytes.Contains(b, []byte(`"rpc":{`)) {
			return fmt.Errorf("rpc ping: want an rpc reply, got %.300s", b)
		}
		return nil
	})
	return history, ping, err
}

// cfRecovery is recovery: a client misses `missed` publications while
// away, rounds times, and comes back subscribing with recover from its
// position: subscribe → its reply with the publications (lat), and dial →
// that reply (back).
func cfRecovery(ctx context.Context, o *Options, missed, rounds int) (lat, back []time.Duration, recovered int64, err error) {
	child, token, err := startCentrifugo(ctx, o, missed*rounds+16)
	if err != nil {
		return nil, nil, 0, err
	}
	defer child.stop()
	var clock atomic.Pointer[pubClock]
	p, err := cfDialPublisher(ctx, child.url, token, 64, &clock)
	if err != nil {
		return nil, nil, 0, err
	}
	defer p.close()
	c := newClock(missed * rounds)
	clock.Store(c)
	for r := range rounds {
		d, err := cfDial(ctx, child.url, token, "recovering")
		if err != nil {
			return nil, nil, 0, err
		}
		pos, _, err := cfSubscribe(ctx, d, nil)
		d.ws.CloseNow()
		if err != nil {
			return nil, nil, 0, err
		}
		for i := range missed {
			if err := cfPublish(ctx, p, c, r*missed+i, true); err != nil {
				return nil, nil, 0, err
			}
		}
		if err := p.waitAcks(ctx, int64((r+1)*missed), 60*time.Second); err != nil {
			return nil, nil, 0, err
		}
		t := time.Now()
		d, err = cfDial(ctx, child.url, token, "recovering")
		if err != nil {
			return nil, nil, 0, err
		}
		asked := time.Now()
		got, at, err := cfSubscribe(ctx, d, &pos)
		d.ws.CloseNow()
		if err != nil {
			return nil, nil, 0, err
		}
		lat = append(lat, at.Sub(asked))
		back = append(back, at.Sub(t))
		recovered += int64(len(got.Pubs))
		if !got.Recovered || len(got.Pubs) < missed {
			return nil, nil, 0, fmt.Errorf("round %d: recovered %v with %d publications, want %d", r, got.Recovered, len(got.Pubs), missed)
		}
	}
	slices.Sort(lat)
	slices.Sort(back)
	return lat, back, recovered, nil
}

// cfStorm is stormRun: n clients connect and subscribe at once (stormPar
// dialling at a time), fresh; all drop; and they come back recovering
// from their positions, warm.
func cfStorm(ctx context.Context, o *Options, n int) (fresh, warm time.Duration, err error) {
	child, token, err := startCentrifugo(ctx, o, 16)
	if err != nil {
		return 0, 0, err
	}
	defer child.stop()
	positions := make([]*cfPosition, n)
	phase := func() (time.Duration, error) {
		devs := make([]*rawDev, n)
		defer func() {
			for _, d := range devs {
				if d != nil {
					d.ws.CloseNow()
				}
			}
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
				d, err := cfDial(ctx, child.url, token, fmt.Sprintf("storm-%04d", i))
				if err == nil {
					devs[i] = d
					var pos cfPosition
					if pos, _, err = cfSubscribe(ctx, d, positions[i]); err == nil {
						if positions[i] != nil && !pos.Recovered {
							err = fmt.Errorf("client %d: not recovered", i)
						}
						positions[i] = &pos
					}
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
	// Warm as stormRun means it: the server has let every client go.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := cfClients(ctx, child)
		if err != nil {
			return fresh, 0, err
		}
		if v == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fresh, 0, fmt.Errorf("%d clients still connected 30s after they closed", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	warm, err = phase()
	return fresh, warm, err
}

// cfIdleRSS is idleRSS: n idle clients, each connected and subscribed,
// and the child's resident memory per connection (bytes).
func cfIdleRSS(ctx context.Context, o *Options, n int) (float64, error) {
	child, token, err := startCentrifugo(ctx, o, 16)
	if err != nil {
		return 0, err
	}
	defer child.stop()
	dial := cfDialSub(token)
	settle := time.Second
	if o.Quick {
		settle = 200 * time.Millisecond
	}
	pid := child.cmd.Process.Pid
	if w, err := dialManyWith(ctx, child.url, 10, 10, func(i int) string { return fmt.Sprintf("warm-%d", i) }, dial); err == nil {
		for _, d := range w {
			cfServe(d, nil)
		}
		closeAll(w)
	}
	time.Sleep(settle / 2)
	before, err := sample(ctx, pid, child.base)
	if err != nil {
		return 0, err
	}
	devs, err := dialManyWith(ctx, child.url, n, 64, func(i int) string { return fmt.Sprintf("idle-%05d", i) }, dial)
	if err != nil {
		return 0, err
	}
	defer closeAll(devs)
	for _, d := range devs {
		cfServe(d, nil)
	}
	time.Sleep(settle)
	after, err := sample(ctx, pid, child.base)
	if err != nil {
		return 0, err
	}
	time.Sleep(settle)
	if a2, err := sample(ctx, pid, child.base); err == nil && a2.rss > after.rss {
		after = a2
	}
	for _, d := range devs {
		select {
		case <-d.done:
			return 0, fmt.Errorf("client %s dropped while idle: %v", d.id, d.err)
		default:
		}
	}
	if after.rss <= before.rss {
		return 0, errors.New("resident memory did not grow with the connections")
	}
	return float64(after.rss-before.rss) / float64(n), nil
}
