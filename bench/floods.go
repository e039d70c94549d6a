package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// The floods scenario plays the attacks of issue 12 (§6) on a gateway
// subprocess, one fresh gateway per flood, and reports for each what the
// gateway held (peak goroutines and RSS, from its /metrics and /proc) and
// how a healthy device fared meanwhile (the round trip of its pings, and
// whether it stayed connected). With Options.BaselineCmd set, each flood
// runs against that gateway first (say, the previous release), then
// against this build, and every figure reads "baseline → this build".

// flood is one attack.
type flood struct {
	name string
	// run attacks the gateway at url (data in dir) until it is done or ctx
	// ends; its outcome is a line for the report.
	run func(ctx context.Context, o *Options, g *subGateway) (string, error)
}

// floodStats are one flood's figures against one gateway.
type floodStats struct {
	before, peak memSample
	healthy      []time.Duration // ping round trips of the healthy device
	failed       int             // its pings that got no answer, or reconnects
	outcome      string
	err          error
}

// subGateway is a gateway subprocess.
type subGateway struct {
	url, base, dir string
	pid            int
	stderr         *lockedBuffer
	stop           func()
}

func startSub(ctx context.Context, o *Options, cmdOf func(listen, dataDir, token string) (*exec.Cmd, error), name string) (*subGateway, error) {
	dir, err := os.MkdirTemp(o.TempDir, "irisgate-bench-flood-"+name+"-")
	if err != nil {
		return nil, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd, err := cmdOf(addr, dir, Token)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stderr := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	g := &subGateway{url: "ws://" + addr + "/ws", base: "http://" + addr, dir: dir, pid: cmd.Process.Pid, stderr: stderr}
	g.stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	if err := waitHealthy(ctx, g.base, exited); err != nil {
		g.stop()
		return nil, fmt.Errorf("%w; gateway stderr: %.500s", err, stderr.String())
	}
	return g, nil
}

func runFloods(ctx context.Context, o *Options) (r Result) {
	r.Title = "(i) Floods: what one client can make the gateway hold"
	type build struct {
		name string
		cmd  func(listen, dataDir, token string) (*exec.Cmd, error)
	}
	builds := []build{{"this build", o.GatewayCmd}}
	if o.BaselineCmd != nil {
		builds = append([]build{{"baseline", o.BaselineCmd}}, builds...)
	}
	r.setup("Each flood against a fresh gateway subprocess (serve, echo agent). Goroutines and RSS: the gateway's")
	r.setup("/metrics and /proc, sampled every 100 ms, before the flood and at its peak (the flood and 2 s after).")
	r.setup("Healthy device: another Iris device on 127.0.0.1 sending a ping every 20 ms throughout; its round trips,")
	r.setup("and the pings that got no answer within 5 s (a drop counts one and it reconnects).")
	if len(builds) == 2 {
		r.setup("Every figure: baseline gateway (--baseline-bin) → this build, each flood run against both in turn.")
	}
	for _, f := range floodList(o) {
		var stats []floodStats
		for _, b := range builds {
			o.progress("floods: %s against %s", f.name, b.name)
			stats = append(stats, runFlood(ctx, o, b.cmd, f))
		}
		join := func(fn func(s floodStats) string) string {
			parts := make([]string, len(stats))
			for i, s := range stats {
				parts[i] = fn(s)
				if s.err != nil {
					parts[i] = "error: " + s.err.Error()
				}
			}
			return strings.Join(parts, " → ")
		}
		r.fig(f.name+": goroutines", join(func(s floodStats) string {
			return fmt.Sprintf("%.0f → peak %.0f", s.before.goroutines, s.peak.goroutines)
		}), "", nil)
		r.fig(f.name+": RSS", join(func(s floodStats) string {
			return fmt.Sprintf("%s → peak %s", mib(float64(s.before.rss)), mib(float64(s.peak.rss)))
		}), "", nil)
		r.fig(f.name+": healthy ping p50/p99/max", join(func(s floodStats) string {
			slices.Sort(s.healthy)
			return fmt.Sprintf("%s/%s/%s, %d unanswered", ms(pct(s.healthy, 0.5)), ms(pct(s.healthy, 0.99)), ms(pct(s.healthy, 1)), s.failed)
		}), "", nil)
		r.fig(f.name+": outcome", join(func(s floodStats) string { return s.outcome }), "", nil)
	}
	return r
}

func runFlood(ctx context.Context, o *Options, cmdOf func(listen, dataDir, token string) (*exec.Cmd, error), f flood) (st floodStats) {
	g, err := startSub(ctx, o, cmdOf, "x")
	if err != nil {
		st.err = err
		return st
	}
	defer g.stop()
	if st.before, err = sample(ctx, g.pid, g.base); err != nil {
		st.err = err
		return st
	}
	st.peak = st.before

	hctx, stopHealthy := context.WithCancel(ctx)
	var mu sync.Mutex
	healthyDone := make(chan struct{})
	go func() {
		defer close(healthyDone)
		lat, failed := healthy(hctx, g.url)
		mu.Lock()
		st.healthy, st.failed = lat, failed
		mu.Unlock()
	}()
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan memSample, 1)
	go func() {
		peak := st.before
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				sampled <- peak
				return
			case <-t.C:
			}
			if s, err := sample(sctx, g.pid, g.base); err == nil {
				peak.rss = max(peak.rss, s.rss)
				peak.goroutines = max(peak.goroutines, s.goroutines)
				peak.heapInuse = max(peak.heapInuse, s.heapInuse)
			}
		}
	}()
	fctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	st.outcome, st.err = f.run(fctx, o, g)
	cancel()
	after := 2 * time.Second
	if o.Quick {
		after = 300 * time.Millisecond
	}
	select { // the gateway's state after the flood, while it digests it
	case <-time.After(after):
	case <-ctx.Done():
	}
	stopSampling()
	st.peak = <-sampled
	stopHealthy()
	<-healthyDone
	return st
}

// healthy is a device that pings the gateway every 20 ms until ctx ends,
// reconnecting when dropped. It returns the round trips and the pings
// that went unanswered.
func healthy(ctx context.Context, url string) (lat []time.Duration, failed int) {
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := dialRaw(dctx, url, "healthy")
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				failed++
			}
			continue
		}
		pongs := make(chan int64, 16)
		d.serve(func(b []byte) {
			if string(frameType(b)) == irisv1.TypePong {
				select {
				case pongs <- frameID(b):
				default:
				}
			}
		})
		for ctx.Err() == nil {
			start := time.Now()
			id, err := d.send(ctx, irisv1.TypePing, "", []byte(`{}`))
			if err != nil {
				break
			}
			ok := false
			wait := time.After(5 * time.Second)
		await:
			for {
				select {
				case got := <-pongs:
					if got == id {
						ok = true
						break await
					}
				case <-wait:
					break await
				case <-d.done:
					break await
				case <-ctx.Done():
					break await
				}
			}
			if !ok {
				if ctx.Err() == nil {
					failed++
				}
				break
			}
			lat = append(lat, time.Since(start))
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		d.close()
	}
	return lat, failed
}
