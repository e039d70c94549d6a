package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/fleet"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/internal/version"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/store"
)

// AppConfig is everything a running gateway needs: the packages' own
// configurations, each with its zero fields taking that package's
// defaults.
type AppConfig struct {
	DataDir string
	Token   string // a fixed token, valid besides the stored ones
	Log     *slog.Logger
	// Durability is the SQLite store's: how commits reach the disk
	// (PostgreSQL keeps its own synchronous_commit setting).
	Durability store.Durability

	// Store is where the state is kept: "" for the SQLite file in DataDir,
	// or a PostgreSQL database's URL (postgres://…). DataDir holds the
	// rest either way: media files, Web Push keys, the lock.
	Store string
	// Replica makes this gateway one of several serving one PostgreSQL
	// database (issue 18): it shares the database's hold with the other
	// replicas instead of taking it alone. Refused with SQLite.
	Replica bool
	// MediaDir holds the media files: DataDir/media unless set. Replicas
	// share one directory (a volume every replica mounts): a file one
	// replica stored is pulled through another.
	MediaDir string
	// LeaseTTL and LeaseSweep are a replica's lane leases' (turn.Leasing:
	// turn.DefaultLeaseTTL, turn.DefaultLeaseSweep unless set).
	LeaseTTL, LeaseSweep time.Duration
	// NATS, when set (nats://host:4222), makes the gateway a replica kept
	// in step with the others through that NATS server (package fleet):
	// Replica is implied.
	NATS string
	// Fleet tunes the link to the other replicas; its URL is NATS, its
	// Key the database's (postgres.Store.FleetKey).
	Fleet fleet.Config

	// Config is the gateway's (the agent, outbox retention, …). Open sets
	// its Pusher, Media and Metrics: they are made from the rest.
	gateway.Config
	QueueLimits hub.Limits
	Server      Config
	Push        PushConfig
	// Media bounds uploads and the files the agent sends; the files live
	// in MediaDir. (It shadows gateway.Config's Media, the store
	// Open makes with these limits.)
	Media media.Limits
	// AuthLimits bound token guessing.
	AuthLimits gateway.AuthLimits
	// Version is what the admin socket reports (irisgate version), with
	// Listen (the address served on) and PublicURL, for irisgate pair.
	Version           string
	Listen, PublicURL string
}

// App is a whole gateway: store, hub, core and server, wired together.
type App struct {
	cfg   AppConfig
	Store Store // SQLite's *store.Store or PostgreSQL's *postgres.Store
	Hub   *hub.Hub
	GW    *gateway.Gateway
	Srv   *Server
	Push  *push.Pusher
	Cron  *cron.Scheduler
	Media *media.Store
	// Fleet links this replica to the others (nil: no NATS).
	Fleet *fleet.Fleet
	// Metrics are the gateway's Prometheus series (benchmarks read them).
	Metrics *gateway.Metrics
	// FirstToken is set when Open minted the first device token because
	// none existed; it is shown once.
	FirstToken string

	http   *http.Server
	admin  *http.Server // the admin socket's (admin.go)
	lock   *datadir.Lock
	opened *openedStore // Store, with PostgreSQL's hold on its database
	stop   context.CancelFunc
	gw     atomic.Pointer[gateway.Gateway] // GW, for the fleet's goroutines
	wg     sync.WaitGroup
	closed sync.Once
}

// DBFile is the database's name inside the data directory.
const DBFile = datadir.DBFile

// MediaDir is the content store's directory inside the data directory
// (unless AppConfig.MediaDir names another).
const MediaDir = "media"

func (c AppConfig) mediaDir() string {
	if c.MediaDir != "" {
		return c.MediaDir
	}
	return filepath.Join(c.DataDir, MediaDir)
}

// Open opens the data directory (creating it), takes its lock (a second
// gateway on one directory is refused with a *datadir.InUseError), opens
// the store (store.go), opens the admin socket and starts the gateway's
// background work; Serve then accepts connections.
func Open(cfg AppConfig) (*App, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.QueueLimits.MaxItems == 0 {
		cfg.QueueLimits = hub.DefaultLimits
	}
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs
	}
	kind, err := datadir.ParseStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	if cfg.NATS != "" {
		cfg.Replica = true
	}
	if cfg.Replica && !kind.Postgres() {
		return nil, errReplicaNeedsPostgres
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	lock, err := prepareDataDir(cfg, kind)
	if err != nil {
		return nil, err
	}
	opened, err := openStore(cfg, kind)
	if err != nil {
		lock.Release()
		return nil, err
	}
	st := opened.Store
	a := &App{cfg: cfg, Store: st, lock: lock, opened: opened}
	fail := func(err error) (*App, error) {
		opened.Close()
		lock.Release()
		return nil, err
	}
	if cfg.Token == "" {
		toks, err := st.Tokens(context.Background())
		if err != nil {
			return fail(err)
		}
		if len(toks) == 0 {
			if a.FirstToken, _, err = gateway.CreateToken(context.Background(), st, "first device", ""); err != nil {
				return fail(err)
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	m := gateway.NewMetrics(reg)
	a.Metrics = m
	backends, vapid, err := cfg.Push.backends(cfg.DataDir)
	if err != nil {
		return fail(err)
	}
	a.Hub = hub.New(st, cfg.Log, cfg.QueueLimits)
	if cfg.NATS != "" {
		fc := cfg.Fleet
		fc.URL, fc.Metrics, fc.Log = cfg.NATS, reg, cfg.Log
		// The replicas sign their messages with the database's key.
		if fc.Key, err = fleetKey(st); err != nil {
			return fail(err)
		}
		// Another replica's channel changes reach the directory the
		// gateway holds (made below: until then it holds none).
		fc.Remote = func(ev *core.Event) {
			if g := a.gw.Load(); g != nil {
				g.Remote(ev)
			}
		}
		// Picker answers and stops for a turn this replica runs.
		fc.Command = func(c fleet.Command) {
			g := a.gw.Load()
			switch {
			case g == nil:
			case c.Stop:
				g.StopForwarded(c.Lane)
			case c.Started:
				g.StartedForwarded(c.Lane, c.MessageID)
			default:
				g.SelectForwarded(c.Device, c.Picker, c.Value)
			}
		}
		if a.Fleet, err = fleet.New(st, a.Hub, fc); err != nil {
			return fail(err)
		}
	}
	a.Push = push.New(st, cfg.Log, push.Config{Backends: backends, Content: cfg.Push.Content, Online: a.Hub.Reachable,
		Hold: cfg.Push.Hold, Timeout: cfg.Push.Timeout, Metrics: reg})
	cfg.Server.Push = a.Push.Kind()
	// hello.ack's push_ntfy_server is "empty when the backend is not
	// ntfy" (the schema): with FCM configured too, push names fcm.
	if cfg.Server.Push == "ntfy" {
		cfg.Server.NtfyServer = cfg.Push.NtfyServer
	}
	cfg.Server.WebPushKey = vapid
	if a.Media, err = media.Open(cfg.mediaDir(), st, cfg.Media, cfg.Log); err != nil {
		if a.Fleet != nil {
			a.Fleet.Close()
		}
		return fail(fmt.Errorf("media directory: %w", err))
	}
	gcfg := cfg.Config
	gcfg.Metrics, gcfg.Pusher, gcfg.Media = m, a.Push, a.Media
	gcfg.SharedStore = cfg.Replica
	if cfg.Replica {
		gcfg.Leasing = replicaLeasing(cfg, st)
		if a.Fleet != nil {
			gcfg.Leasing.Forward = a.Fleet
		}
	}
	a.GW = gateway.New(st, a.Hub, cfg.Log, gcfg)
	a.gw.Store(a.GW)
	a.Cron = cron.New(st, a.GW.RunCron, cfg.Log)
	a.Cron.Replica = cfg.Replica
	auth := gateway.NewAuthWith(st, gateway.AuthConfig{Fixed: cfg.Token, Limits: cfg.AuthLimits, Log: cfg.Log})
	reg.MustRegister(auth.Collectors()...)
	a.Srv = New(cfg.Server, a.GW, auth, cfg.Log, reg, m)
	// Made here, not in Serve: Close may run on another goroutine at any
	// time and must find it (a Serve after Close then returns at once).
	// Connections that send no request, or idle between requests, are
	// bounded in time (the timeouts) and in number (ConnState).
	a.http = &http.Server{Handler: a.Srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ConnState: a.Srv.ConnState, ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelWarn)}

	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.Media.Run(ctx) }() // expires unused uploads, removes unused files
	if a.Fleet != nil {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.Fleet.Run(ctx) }()
	}
	a.wg.Add(5)
	go func() { defer a.wg.Done(); a.Push.Run(ctx) }()
	go func() { defer a.wg.Done(); a.Cron.Run(ctx) }()
	go func() {
		defer a.wg.Done()
		if err := a.GW.Run(ctx); err != nil {
			cfg.Log.Error("gateway core stopped", "err", err)
		}
	}()
	go func() { defer a.wg.Done(); a.Hub.Run(ctx, proofSaveEvery) }()
	go func() { defer a.wg.Done(); a.Srv.Run(ctx) }()
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.Srv.watchTokens(ctx, time.Second) }()
	// Serve only once what the last run left open is settled: a turn
	// started before would be taken for one a crash left behind.
	<-a.GW.Recovered()
	if err := a.GW.RecoverErr(); err != nil {
		a.Close(context.Background())
		return nil, fmt.Errorf("recovering the last run's state: %w", err)
	}
	if err := a.openAdmin(); err != nil {
		a.Close(context.Background())
		return nil, err
	}
	return a, nil
}

// Serve accepts connections on ln until Close.
func (a *App) Serve(ln net.Listener) error {
	err := a.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close shuts down gracefully: running turns end with their text kept,
// devices are told the gateway is restarting and their sockets close with
// 1001, then the store closes. ctx bounds the wait for slow peers.
func (a *App) Close(ctx context.Context) error {
	var err error
	a.closed.Do(func() {
		a.closeAdmin(ctx)
		a.Srv.Shutdown(ctx)
		a.http.Shutdown(ctx)
		a.stop()
		a.wg.Wait()
		if a.Fleet != nil {
			a.Fleet.Close() // once the gateway's last frames are announced
		}
		if c, ok := a.cfg.Agent.(interface{ Close() }); ok {
			c.Close() // e.g. idle connections to Hermes
		}
		err = a.opened.Close()
		a.lock.Release()
	})
	return err
}

// buildInfo is irisgate_build_info{version,go} 1, the usual way to put a
// version on a dashboard.
func buildInfo() prometheus.Collector {
	v := version.Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "irisgate_build_info", Help: "Always 1; the labels say which build of irisgate is running.",
		ConstLabels: prometheus.Labels{"version": v.String(), "go": v.Go},
	}, func() float64 { return 1 })
}
