package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/fleet"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
)

// The replicas scenario (issue 18): durable frames committed per second
// and fan-out deliveries per second with 1, 2 and 3 gateway replicas on
// one PostgreSQL database kept in step through NATS, beside the single
// SQLite node, in one run. Replicas run in this process on loopback ports
// (their CPU is shared with the devices'), each with its own data
// directory and a shared media directory.

// replicaSet is the gateways of one mode.
type replicaSet struct {
	apps   []*server.App
	urls   []string
	lns    []net.Listener
	dirs   []string
	served sync.WaitGroup
}

func startReplicas(o *Options, n int, media string) (*replicaSet, error) {
	s := &replicaSet{}
	for i := range n {
		dir, err := os.MkdirTemp(o.TempDir, fmt.Sprintf("irisgate-bench-replica%d-", i))
		if err != nil {
			s.close()
			return nil, err
		}
		s.dirs = append(s.dirs, dir)
		logs := &logCounter{w: o.GatewayLog, counts: map[string]int{}}
		cfg := server.AppConfig{DataDir: dir, Token: Token, Log: slog.New(logs), MediaDir: media}
		if o.ReplicasStore != "" {
			cfg.Store, cfg.NATS = o.ReplicasStore, o.ReplicasNATS
		}
		cfg.Agent, cfg.Bounds = nullAgent{}, gateway.Bounds{ConnsPerToken: 1 << 20, PerToken: 1 << 20, InAll: 1 << 20}
		app, err := server.Open(cfg)
		if err != nil {
			s.close()
			return nil, err
		}
		s.apps = append(s.apps, app)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, err
		}
		s.lns = append(s.lns, ln)
		s.urls = append(s.urls, "ws://"+ln.Addr().String()+"/ws")
		s.served.Add(1)
		go func() { defer s.served.Done(); app.Serve(ln) }()
	}
	return s, nil
}

func (s *replicaSet) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, a := range s.apps {
		a.Close(ctx)
	}
	for _, ln := range s.lns {
		ln.Close()
	}
	s.served.Wait()
	for _, d := range s.dirs {
		os.RemoveAll(d)
	}
}

// replicaFigures is what one mode measured.
type replicaFigures struct {
	frames, deliveries float64 // per second
	sends              int64
	fleet              fleet.Stats // summed over the replicas
}

// measureReplicas drives a set: senders spread over the replicas, each in
// its own lane with DurableInflight sends in flight, and watchers spread
// over them counting every frame they get.
func measureReplicas(ctx context.Context, o *Options, s *replicaSet, tag string) (replicaFigures, error) {
	var f replicaFigures
	nSend, nWatch := o.ReplicasSenders, o.ReplicasWatchers
	app0 := s.apps[0]
	var lanes []string
	for i := range nSend {
		name := fmt.Sprintf("%s lane %d", tag, i)
		if err := app0.GW.CreateChannel(ctx, gateway.Caller{}, name, core.KindChannel, ""); err != nil {
			return f, err
		}
	}
	chs, err := app0.Store.Channels(ctx)
	if err != nil {
		return f, err
	}
	for _, c := range chs {
		if c.Kind == core.KindChannel && len(c.Name) > len(tag) && c.Name[:len(tag)+1] == tag+" " {
			lanes = append(lanes, c.ChatID)
		}
	}
	if len(lanes) != nSend {
		return f, fmt.Errorf("%d lanes made, %d found", nSend, len(lanes))
	}
	var watchers, senders []*rawDev
	defer func() { closeAll(watchers); closeAll(senders) }()
	for i := range nWatch {
		d, err := dialRaw(ctx, s.urls[i%len(s.urls)], fmt.Sprintf("%s-watch-%d", tag, i))
		if err != nil {
			return f, err
		}
		watchers = append(watchers, d)
	}
	var delivered atomic.Int64
	for _, d := range watchers {
		d.serve(func([]byte) { delivered.Add(1) })
	}
	type sender struct {
		*rawDev
		lane        []byte
		sem         chan struct{}
		sends, errs atomic.Int64
		idles       atomic.Int64
	}
	var sds []*sender
	for i := range nSend {
		d, err := dialRaw(ctx, s.urls[i%len(s.urls)], fmt.Sprintf("%s-send-%d", tag, i))
		if err != nil {
			return f, err
		}
		senders = append(senders, d)
		sd := &sender{rawDev: d, lane: []byte(lanes[i]), sem: make(chan struct{}, o.DurableInflight)}
		sds = append(sds, sd)
		d.serve(func(b []byte) {
			typ := string(frameType(b))
			if frameID(b) != 0 && typ == irisv1.TypeError {
				sd.errs.Add(1)
				<-sd.sem
				return
			}
			if typ == irisv1.TypeAgentIdle && string(chatID(b)) == string(sd.lane) {
				sd.idles.Add(1)
				<-sd.sem
			}
		})
	}
	text := []byte(`{"text":"` + textOf("replicas benchmark", 120) + `"}`)
	before, err := app0.Store.OutboxHead(ctx)
	if err != nil {
		return f, err
	}
	got0 := delivered.Load()
	start := time.Now()
	stopAt := start.Add(o.ReplicasDuration)
	var wg sync.WaitGroup
	for _, sd := range sds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) && ctx.Err() == nil {
				select {
				case sd.sem <- struct{}{}:
				case <-sd.done:
					return
				case <-ctx.Done():
					return
				}
				sd.sends.Add(1)
				if _, err := sd.send(ctx, irisv1.TypeMessageSend, string(sd.lane), text); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	// Every turn ended, and every watcher has every frame committed.
	deadline := time.Now().Add(time.Minute)
	for {
		done := true
		for _, sd := range sds {
			done = done && sd.idles.Load()+sd.errs.Load() >= sd.sends.Load()
		}
		if done {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f, errors.New("turns still running a minute after sending stopped")
		}
		time.Sleep(2 * time.Millisecond)
	}
	after, err := app0.Store.OutboxHead(ctx)
	if err != nil {
		return f, err
	}
	want := (after - before) * int64(nWatch)
	for delivered.Load()-got0 < want && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	span := time.Since(start)
	for _, sd := range sds {
		f.sends += sd.sends.Load()
		if sd.errs.Load() > 0 {
			return f, fmt.Errorf("%d sends refused", sd.errs.Load())
		}
	}
	for _, a := range s.apps {
		if a.Fleet != nil {
			st := a.Fleet.Stats()
			f.fleet.Reads += st.Reads
			f.fleet.FramesRead += st.FramesRead
			f.fleet.Gaps += st.Gaps
		}
	}
	f.frames = rate(after-before, span)
	f.deliveries = rate(delivered.Load()-got0, span)
	return f, nil
}

func runReplicas(ctx context.Context, o *Options) (r Result) {
	r.Title = "(l) Replicas: durable frames and fan-out with 1, 2, 3 replicas on PostgreSQL + NATS, beside one SQLite node"
	media, err := os.MkdirTemp(o.TempDir, "irisgate-bench-media-")
	if err != nil {
		r.Err = err
		return r
	}
	defer os.RemoveAll(media)
	type mode struct {
		name string
		n    int
		pg   bool
	}
	modes := []mode{{"SQLite, one node", 1, false}}
	if o.ReplicasStore != "" && o.ReplicasNATS != "" {
		modes = append(modes, mode{"PostgreSQL + NATS, 1 replica", 1, true}, mode{"2 replicas", 2, true}, mode{"3 replicas", 3, true})
	} else {
		r.note("PostgreSQL rows skipped: give --replicas-store postgres://… and --replicas-nats nats://… (or run go test ./bench -run TestReplicasScenario -v, which starts both)")
	}
	var base replicaFigures
	for i, m := range modes {
		o.progress("replicas: %s", m.name)
		save := o.ReplicasStore
		if !m.pg {
			o.ReplicasStore = ""
		}
		s, err := startReplicas(o, m.n, media)
		o.ReplicasStore = save
		if err != nil {
			r.Err = fmt.Errorf("%s: %w", m.name, err)
			return r
		}
		f, err := measureReplicas(ctx, o, s, fmt.Sprintf("mode%d", i))
		s.close()
		if err != nil {
			r.Err = fmt.Errorf("%s: %w", m.name, err)
			return r
		}
		if i == 0 {
			base = f
		}
		r.fig(m.name+": durable frames committed", fmt.Sprintf("%s (%.2f× SQLite)", perSec(f.frames), f.frames/max(base.frames, 1)), "", nil)
		r.fig(m.name+": deliveries to watchers", fmt.Sprintf("%s (%.2f× SQLite)", perSec(f.deliveries), f.deliveries/max(base.deliveries, 1)), "", nil)
		if m.n > 1 {
			r.note("%s: %s frames of other replicas read from the store in %s reads (%.1f a read), %d gaps read after the hold",
				m.name, commas(f.fleet.FramesRead), commas(f.fleet.Reads), float64(f.fleet.FramesRead)/float64(max(f.fleet.Reads, 1)), f.fleet.Gaps)
		}
	}
	r.setup("%d senders spread over the replicas, each in its own lane keeping %d message.send in flight for %v (agent: returns at once:", o.ReplicasSenders, o.DurableInflight, o.ReplicasDuration)
	r.setup("3 frames a send); %d watchers spread over the replicas count every frame they get. Rates over first send → every", o.ReplicasWatchers)
	r.setup("turn ended and every watcher holding every frame. Gateways in this process, on loopback; PostgreSQL durable (its default).")
	return r
}
