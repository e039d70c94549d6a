package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// Token is the fixed device token of the gateways the benchmark starts.
const Token = "irisgate-bench-token"

// gw is an in-process gateway on a loopback port.
type gw struct {
	app    *server.App
	db     *store.Store // the app's store: the benchmarks read SQLite's own methods
	url    string
	addr   string
	dir    string
	logs   *logCounter
	served chan struct{}
}

// startGateway opens a gateway with ag in a fresh data directory and serves
// it on 127.0.0.1.
func startGateway(o *Options, name string, ag agent.Agent, edit func(*server.AppConfig)) (*gw, error) {
	dir, err := os.MkdirTemp(o.TempDir, "irisgate-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	logs := &logCounter{w: o.GatewayLog, counts: map[string]int{}}
	// Every bench device says hello with the one token: its bounds on live
	// connections and on turns queued and running are lifted (50 durable
	// devices keep 100 turns in flight; a token may otherwise hold 64).
	cfg := server.AppConfig{DataDir: dir, Token: Token, Log: slog.New(logs)}
	cfg.Agent, cfg.Bounds = ag, gateway.Bounds{ConnsPerToken: 1 << 20, PerToken: 1 << 20, InAll: 1 << 20}
	if edit != nil {
		edit(&cfg)
	}
	app, err := server.Open(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	db, ok := app.Store.(*store.Store)
	if !ok {
		app.Close(context.Background())
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the benchmarks run on SQLite, not %T", app.Store)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		app.Close(context.Background())
		os.RemoveAll(dir)
		return nil, err
	}
	g := &gw{app: app, db: db, url: "ws://" + ln.Addr().String() + "/ws", addr: ln.Addr().String(), dir: dir, logs: logs, served: make(chan struct{})}
	go func() { defer close(g.served); app.Serve(ln) }()
	return g, nil
}

// close shuts the gateway down and removes its data.
func (g *gw) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	g.app.Close(ctx)
	select {
	case <-g.served:
	case <-ctx.Done():
	}
	os.RemoveAll(g.dir)
}

// pings is how many WebSocket pings the gateway has sent so far
// (keepalives and proofs of delivery).
func (g *gw) pings() int64 {
	var m dto.Metric
	if err := g.app.Metrics.Pings.Write(&m); err != nil {
		return 0
	}
	return int64(m.GetCounter().GetValue())
}

func (g *gw) head(ctx context.Context) int64 {
	h, _ := g.app.Store.OutboxHead(ctx)
	return h
}

// logCounter is the in-process gateways' log handler: it counts warnings
// and errors by message (the report lists them) and copies them to w.
type logCounter struct {
	w     io.Writer
	mu    sync.Mutex
	attrs []slog.Attr

	counts map[string]int
}

func (l *logCounter) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }

func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[r.Level.String()+": "+r.Message]++
	if l.w != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "gateway %s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		fmt.Fprintln(l.w, b.String())
	}
	return nil
}

func (l *logCounter) WithAttrs(as []slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler         { return l }

// summary lists what was logged, most frequent first.
func (l *logCounter) summary() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for m, n := range l.counts {
		out = append(out, fmt.Sprintf("gateway logged %d× %q", n, m))
	}
	sort.Strings(out)
	return out
}

func (l *logCounter) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for m, c := range l.counts {
		if strings.Contains(m, substr) {
			n += c
		}
	}
	return n
}

// commitBatch is the writes the gateway's group commit put in one
// transaction, on average since it started (0: not known).
func (g *gw) commitBatch(ctx context.Context) float64 {
	return metricBatch(ctx, "http://"+g.addr)
}

// metricBatch reads the average group-commit batch off a gateway's
// /metrics at base (0: not known).
func metricBatch(ctx context.Context, base string) float64 {
	m, err := scrape(ctx, base+"/metrics")
	if err != nil || m["irisgate_commit_batch_writes_count"] == 0 {
		return 0
	}
	return m["irisgate_commit_batch_writes_sum"] / m["irisgate_commit_batch_writes_count"]
}
