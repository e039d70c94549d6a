package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/wire/mobile"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// The ratios scenario runs each gateway it measures as a child process, so
// the gateway's CPU and memory are its own (/proc/PID) and not mixed with
// the simulated devices', and each mode gets a fresh server. The child is
// this binary again: "irisgate bench --child SPEC" (ChildCmd), or the test
// binary under go test.

// DeliverToken is the delivery token (POST /api/send) of the child
// gateways.
const DeliverToken = "irisgate-bench-deliver-token"

// Child modes.
const (
	childIrisgate = "irisgate" // a whole gateway, with childAgent
	childBare     = "bare"     // a bare coder/websocket echo server: the baseline
)

// childSpec says what a child serves. It travels as a URL query.
type childSpec struct {
	Mode   string
	Listen string // 127.0.0.1:port
	Dir    string // data directory (irisgate)
	Lanes  int    // channels created before serving (irisgate)
	// History is how many messages the store holds before serving
	// (irisgate): imported over the lanes and the default channel.
	History int
	// Profile, when set, is a path prefix: the child writes a CPU profile
	// of its whole life (PREFIX.cpu.pprof) and a heap profile at its end
	// (PREFIX.heap.pprof), so the gateway's own costs can be read apart
	// from the simulated devices'.
	Profile string
}

func (s childSpec) encode() string {
	v := url.Values{"mode": {s.Mode}, "listen": {s.Listen}, "dir": {s.Dir}, "lanes": {strconv.Itoa(s.Lanes)}}
	if s.Profile != "" {
		v.Set("profile", s.Profile)
	}
	if s.History > 0 {
		v.Set("history", strconv.Itoa(s.History))
	}
	return v.Encode()
}

func parseChildSpec(s string) (childSpec, error) {
	v, err := url.ParseQuery(s)
	if err != nil {
		return childSpec{}, err
	}
	c := childSpec{Mode: v.Get("mode"), Listen: v.Get("listen"), Dir: v.Get("dir"), Profile: v.Get("profile")}
	if l := v.Get("lanes"); l != "" {
		if c.Lanes, err = strconv.Atoi(l); err != nil || c.Lanes < 0 || c.Lanes > 4000 {
			return c, fmt.Errorf("lanes %q: want 0–4000", l)
		}
	}
	if h := v.Get("history"); h != "" {
		if c.History, err = strconv.Atoi(h); err != nil || c.History < 0 || c.History > maxChildHistory {
			return c, fmt.Errorf("history %q: want 0–%d", h, maxChildHistory)
		}
	}
	// The child accepts a token everyone can read in this source: it must
	// never listen beyond this machine.
	ap, err := netip.ParseAddrPort(c.Listen)
	if err != nil || !ap.Addr().IsLoopback() {
		return c, fmt.Errorf("listen %q: a benchmark child listens on a loopback address only", c.Listen)
	}
	switch c.Mode {
	case childIrisgate:
		if c.Dir == "" {
			return c, errors.New("no data directory")
		}
	case childBare:
	default:
		return c, fmt.Errorf("unknown child mode %q", c.Mode)
	}
	return c, nil
}

// RunChild serves what spec describes until SIGTERM or SIGINT: the gateway
// side of the ratios scenario. It is not for people: irisgate bench starts
// it itself.
func RunChild(spec string) error {
	c, err := parseChildSpec(spec)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	if c.Profile != "" {
		// Fine-grained heap samples, and a heap profile on SIGUSR1
		// (PREFIX.NN.heap.pprof) so a mode can take one mid-run, while
		// its connections are open.
		runtime.MemProfileRate = 512
		stop, err := profileTo(c.Profile)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
		usr := make(chan os.Signal, 1)
		signal.Notify(usr, syscall.SIGUSR1)
		defer signal.Stop(usr)
		done := make(chan struct{})
		defer close(done)
		go func() {
			for n := 1; ; n++ {
				select {
				case <-usr:
				case <-done:
					return
				}
				if f, err := os.Create(fmt.Sprintf("%s.%02d.heap.pprof", c.Profile, n)); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}()
	}
	if c.Mode == childBare {
		srv := &http.Server{Handler: bareMux(), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		<-sig
		return srv.Close()
	}
	cfg := server.AppConfig{
		DataDir: c.Dir, Token: Token,
		Log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Server: server.Config{Mobile: mobile.Settings{DeliverTokens: []string{DeliverToken}}},
	}
	// One token drives every simulated device, and a parked turn holds
	// its slot: the bounds of one token are lifted, as in the in-process
	// scenarios.
	cfg.Agent, cfg.Bounds = childAgent{}, gateway.Bounds{PerToken: 1 << 20, InAll: 1 << 20, ConnsPerToken: 1 << 20}
	app, err := server.Open(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	for i := range c.Lanes {
		if err := app.GW.CreateChannel(context.Background(), gateway.Caller{}, fmt.Sprintf("lane %04d", i), core.KindChannel, ""); err != nil {
			ln.Close()
			app.Close(context.Background())
			return fmt.Errorf("creating lane %d: %w", i, err)
		}
	}
	if c.History > 0 {
		// Filled, then closed and opened again: the import's one
		// transaction left a WAL as large as the store, and a lived-in
		// store does not serve with that still to checkpoint.
		err := fillHistory(app, c.History)
		if cerr := app.Close(context.Background()); err == nil {
			err = cerr
		}
		if err == nil {
			app, err = server.Open(cfg)
		}
		if err != nil {
			ln.Close()
			return fmt.Errorf("filling the history: %w", err)
		}
	}
	go app.Serve(ln)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return app.Close(ctx)
}

// bareMux is the bare server: /healthz, and /ws echoing each message back.
// It is the least a WebSocket server can do per connection with the
// library irisgate uses.
func bareMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, b); err != nil {
				return
			}
		}
	})
	return mux
}

// childAgent parks every turn (it ends only when the gateway stops), so a
// message.send commits exactly its message and the turn it owes, and the
// devices see one frame per send — unless the text asks for a stream
// ("bench-stream events=N chunk=C rate=R"), which it streams.
type childAgent struct{}

func (childAgent) Name() string { return "bench-child" }

func (childAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	p, ok := parseStreamAsk(t.Input)
	if !ok {
		<-ctx.Done()
		return ctx.Err()
	}
	text := replyText(p.events * p.chunk)
	start := time.Now()
	for i := range p.events {
		if p.rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		emit(agent.Event{Kind: agent.Text, Text: text[i*p.chunk : (i+1)*p.chunk]})
	}
	emit(agent.Event{Kind: agent.Usage, Model: "bench-child", Tokens: p.events})
	return nil
}

type streamAsk struct {
	events, chunk int
	rate          float64
}

func (s streamAsk) text() string {
	return fmt.Sprintf("bench-stream events=%d chunk=%d rate=%g", s.events, s.chunk, s.rate)
}

func parseStreamAsk(s string) (streamAsk, bool) {
	f := strings.Fields(s)
	if len(f) != 4 || f[0] != "bench-stream" {
		return streamAsk{}, false
	}
	var p streamAsk
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "events":
			p.events, err = strconv.Atoi(v)
		case "chunk":
			p.chunk, err = strconv.Atoi(v)
		case "rate":
			p.rate, err = strconv.ParseFloat(v, 64)
		default:
			return streamAsk{}, false
		}
		if err != nil {
			return streamAsk{}, false
		}
	}
	// Bounded: at most 1 MiB of reply.
	if p.events < 1 || p.chunk < 1 || p.events*p.chunk > 1<<20 || p.rate < 0 {
		return streamAsk{}, false
	}
	return p, true
}

// replyText is n bytes of English-like ASCII (no JSON escaping), the same
// every time: words drawn from a small vocabulary by a fixed generator, so
// a compressor sees text about as repetitive as a model's reply.
func replyText(n int) string {
	words := strings.Fields(`the a of to and in is that for it with as was on be by this are or from at
		an but not have which they you one all we can their has been more if will would there
		what when so no about up out into than them then these some its only other time new
		could may first also after any like our over such how most even well because through
		gateway device message stream reply token socket commit frame latency durable agent
		channel history server client network phone update queue limit write read batch`)
	var b strings.Builder
	b.Grow(n + 16)
	x := uint32(2463534242)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		w := words[x%uint32(len(words))]
		if x%11 == 0 {
			w += "."
		}
		b.WriteString(w)
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// childProc is a running child.
type childProc struct {
	cmd    *exec.Cmd
	addr   string
	url    string // ws://…/ws
	base   string // http://…
	dir    string
	stderr *lockedBuffer
	exited chan error
}

// ChildCmd runs "exe bench --child SPEC" (the default Options.ChildCmd).
func ChildCmd(exe string) func(spec string) (*exec.Cmd, error) {
	return func(spec string) (*exec.Cmd, error) {
		return exec.Command(exe, "bench", "--child", spec), nil
	}
}

func selfChild(spec string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return ChildCmd(exe)(spec)
}

// startChild starts a child of mode (with lanes channels) and waits until
// it answers /healthz.
func startChild(ctx context.Context, o *Options, mode string, lanes int) (*childProc, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	c := &childProc{addr: addr, url: "ws://" + addr + "/ws", base: "http://" + addr, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	spec := childSpec{Mode: mode, Listen: addr, Lanes: lanes}
	if mode == childIrisgate {
		spec.History = o.RatioHistory
	}
	if o.ProfileDir != "" {
		o.children++
		spec.Profile = filepath.Join(o.ProfileDir, fmt.Sprintf("child-%02d-%s", o.children, mode))
		o.progress("child profile: %s.cpu.pprof", spec.Profile)
	}
	if mode == childIrisgate {
		if c.dir, err = os.MkdirTemp(o.TempDir, "irisgate-bench-ratios-"); err != nil {
			return nil, err
		}
		spec.Dir = c.dir
	}
	if c.cmd, err = o.ChildCmd(spec.encode()); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	c.cmd.Stdout = io.Discard
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("starting %s: %w", c.cmd.Path, err)
	}
	go func() { c.exited <- c.cmd.Wait() }()
	if err := waitHealthy(ctx, c.base, c.exited); err != nil {
		c.stop()
		return nil, fmt.Errorf("%s child: %w; stderr: %.500s", mode, err, c.stderr.String())
	}
	return c, nil
}

// stop ends the child (SIGTERM, then SIGKILL after a few seconds: a parked
// turn may hold a graceful shutdown up) and removes its data.
func (c *childProc) stop() {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// cpu is the CPU time the child has used (user + system, all threads).
func (c *childProc) cpu() time.Duration { return procCPU(strconv.Itoa(c.cmd.Process.Pid)) }

// selfCPU is the CPU time this process (the load client) has used.
func selfCPU() time.Duration { return procCPU("self") }

// procCPU is the CPU time process pid ("self" for this one) has used, from
// /proc (0 where there is none).
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	g := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(g) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(g[11], 10, 64)
	st, _ := strconv.ParseInt(g[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / userHZ)
}

// userHZ is the unit of /proc/PID/stat times (USER_HZ, 100 on Linux).
const userHZ = 100

// metric reads one unlabelled series of the child's /metrics.
func (c *childProc) metric(ctx context.Context, name string) (float64, error) {
	m, err := scrape(ctx, c.base+"/metrics")
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("no %s in /metrics", name)
	}
	return v, nil
}

// laneIDs are the chat ids of the lanes the child made ("lane NNNN").
func laneIDs(chs []irisv1.Channel) []string {
	var out []string
	for _, c := range chs {
		if c.Kind == core.KindChannel && strings.HasPrefix(c.Name, "lane ") {
			out = append(out, c.ChatID)
		}
	}
	return out
}

// maxChildHistory bounds --ratio-history (about 32 s of import a million).
const maxChildHistory = 10_000_000

// fillHistory imports n finished messages of Zipf-distributed words (the
// search scenario's vocabulary) into the gateway's store, spread over
// its channels, in one transaction: a mode then runs against a store
// that has lived, where a cost that grows with the history shows.
func fillHistory(app *server.App, n int) error {
	db, ok := app.Store.(*store.Store)
	if !ok {
		return errors.New("the store is not SQLite's")
	}
	ctx := context.Background()
	chs, err := db.Channels(ctx)
	if err != nil {
		return err
	}
	rnd := rand.New(rand.NewSource(1))
	vocab := searchVocab(rnd, searchVocabSize)
	zipf := rand.NewZipf(rnd, 1.07, 2, uint64(len(vocab)-1))
	ts := time.Now().Add(-time.Duration(n) * time.Second).UnixMilli()
	i := 0
	_, err = db.ImportMessages(ctx, func() (core.Message, bool) {
		if i >= n {
			return core.Message{}, false
		}
		i++
		w := make([]string, 5+rnd.Intn(36))
		for k := range w {
			w[k] = vocab[zipf.Uint64()]
		}
		return core.Message{ID: fmt.Sprintf("m_hist%08d", i), Lane: core.Lane{ChatID: chs[i%len(chs)].ChatID},
			Role: []string{core.RoleUser, core.RoleAssistant}[i%2], Text: strings.Join(w, " "), TS: ts + int64(i)*1000}, true
	})
	return err
}
