package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/fleet"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/internal/version"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/wire/mobile"
)

// ServeCmd runs the gateway.
type ServeCmd struct {
	Listen           string        `help:"Address to listen on (host:port)." default:":8787" env:"IRISGATE_LISTEN"`
	Data             string        `help:"Data directory: the SQLite database (unless --store), media files and keys live here." default:"./irisgate-data" env:"IRISGATE_DATA" type:"path"`
	Store            string        `help:"Where the state is kept: empty for the SQLite file in --data, or a PostgreSQL database (postgres://user:password@host:5432/db). Prefer IRISGATE_STORE, or PGPASSWORD for the password: flags show in process lists." env:"IRISGATE_STORE"`
	NATS             string        `name:"nats" help:"A NATS server (nats://host:4222; several comma separated): makes this gateway one of several replicas on one PostgreSQL --store, kept in step through it (docs/replicas.md). Credentials go in the URL: prefer IRISGATE_NATS." env:"IRISGATE_NATS"`
	NATSSubject      string        `name:"nats-subject" help:"The prefix of the NATS subjects the replicas use: one per fleet sharing a NATS server." default:"irisgate" env:"IRISGATE_NATS_SUBJECT"`
	LeaseTTL         time.Duration `name:"lease-ttl" help:"Replicas: how long a lane's lease lasts unrenewed, so how soon another replica takes over the turns of one that died (renewed every third of it)." default:"15s" env:"IRISGATE_LEASE_TTL"`
	MediaDir         string        `help:"Where media files live (default: media in --data). Replicas share one: a volume every replica mounts." env:"IRISGATE_MEDIA_DIR" type:"path"`
	Token            string        `help:"A fixed device token, accepted besides the stored ones (for scripts and containers)." env:"IRISGATE_TOKEN"`
	LogFormat        string        `help:"Log format: text or json." default:"text" enum:"text,json" env:"IRISGATE_LOG_FORMAT"`
	LogLevel         string        `help:"Log level: debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"IRISGATE_LOG_LEVEL"`
	ShowReasoning    bool          `help:"Include the agent's reasoning in replies." default:"true" negatable:"" env:"IRISGATE_SHOW_REASONING"`
	OutboxKeep       int64         `help:"Outbox frames kept for sync; older ones are pruned (devices then reload with history)." default:"${outbox_keep}" env:"IRISGATE_OUTBOX_KEEP"`
	OutboxMaxAge     time.Duration `help:"Outbox frames older than this are pruned." default:"${outbox_max_age}" env:"IRISGATE_OUTBOX_MAX_AGE"`
	MaxFrame         int64         `help:"Largest WebSocket frame accepted, in bytes (Iris media uploads send binary frames up to this size)." default:"${max_frame}" env:"IRISGATE_MAX_FRAME"`
	MaxMedia         int64         `help:"Largest media file, in bytes: uploads and files the agent sends." default:"${max_media}" env:"IRISGATE_MAX_MEDIA"`
	HelloTimeout     time.Duration `help:"How long a new connection has to send hello." default:"${hello_timeout}" env:"IRISGATE_HELLO_TIMEOUT"`
	PingInterval     time.Duration `help:"WebSocket ping interval; a peer that misses a ping is closed." default:"${ping_interval}" env:"IRISGATE_PING_INTERVAL"`
	ShutdownWait     time.Duration `help:"How long a graceful shutdown waits for turns and peers." default:"${shutdown_wait}" env:"IRISGATE_SHUTDOWN_WAIT"`
	Deflate          bool          `help:"Compress frames (permessage-deflate) for clients that offer it." default:"${deflate}" negatable:"" env:"IRISGATE_DEFLATE"`
	MaxConnsPerToken int           `name:"max-connections-per-token" help:"Live connections one token may have at once (devices sharing a token share them)." default:"${max_conns_per_token}" env:"IRISGATE_MAX_CONNECTIONS_PER_TOKEN"`
	TrustFlags
	PublicURL string `help:"The web app's address as devices reach it, when that is not this machine's (behind a reverse proxy: https://iris.example.com/); pairing links use it." env:"IRISGATE_PUBLIC_URL"`
	AgentFlags
	Durability store.Durability `help:"normal: a power loss or OS crash may undo the newest commits (a crash of irisgate loses nothing); full: every commit is synced to the disk, at the cost of an fsync each (README: Durability)." default:"normal" enum:"normal,full" env:"IRISGATE_DURABILITY"`
	PushFlags
	MobileFlags
	VoiceFlags
}

// TrustFlags say whom the gateway believes about where a request comes
// from (README: "Behind a reverse proxy").
type TrustFlags struct {
	TrustedProxies []string `help:"Reverse proxies (addresses or CIDRs, e.g. 127.0.0.1,10.0.0.0/8) whose X-Forwarded-For, Forwarded or X-Real-IP headers name the real client; from any other peer those headers are ignored." env:"IRISGATE_TRUSTED_PROXIES" group:"Trust"`
	AllowedOrigins []string `help:"Web origins besides the gateway's own whose pages may connect (e.g. https://app.example.com)." env:"IRISGATE_ALLOWED_ORIGINS" group:"Trust"`
}

// MobileFlags configure the Hermes Mobile dialect of serve (its delivery
// tokens are PushFlags' deliver tokens, which POST /api/send shares).
type MobileFlags struct {
	MobileAllowedDevices []string      `help:"Hermes Mobile device ids allowed to connect (none: any device with a valid token)." env:"IRISGATE_MOBILE_ALLOWED_DEVICES" group:"Hermes Mobile"`
	MobileExtraTokens    []string      `help:"Tokens bound to one Hermes Mobile device, as device_id=token: the token admits only that device, and the device only its tokens. Prefer the environment: flags show in process lists." env:"IRISGATE_MOBILE_EXTRA_TOKENS" group:"Hermes Mobile"`
	MobileHomeDevice     string        `help:"Where a Hermes Mobile deliver that names no target goes (a device id, or mobile:<id>)." env:"IRISGATE_MOBILE_HOME_DEVICE" group:"Hermes Mobile"`
	MobileAvatarURL      string        `help:"Avatar page announced to Hermes Mobile apps in ready." env:"IRISGATE_MOBILE_AVATAR_URL" group:"Hermes Mobile"`
	MobilePromptTTL      time.Duration `help:"How long a Hermes Mobile prompt card stays open." default:"${mobile_prompt_ttl}" env:"IRISGATE_MOBILE_PROMPT_TTL" group:"Hermes Mobile"`
}

// Run starts the gateway and serves until SIGINT or SIGTERM.
func (c *ServeCmd) Run(cli *CLI) error {
	log := newLogger(c.LogFormat, c.LogLevel)
	if _, err := datadir.ParseStore(c.Store); err != nil {
		return err // before anything starts
	}
	if c.NATS != "" && c.Store == "" {
		return errors.New("--nats makes this gateway a replica, and replicas share a PostgreSQL database: set --store postgres://… (docs/replicas.md)")
	}
	if c.LeaseTTL < time.Second {
		// Renewed every third of it through the database: shorter would
		// make a busy database's pause a takeover.
		return fmt.Errorf("--lease-ttl %s: at least 1s", c.LeaseTTL)
	}
	c.dataDir, c.configFile, c.maxFile, c.mediaDir = c.Data, string(cli.Config), c.MaxMedia, c.MediaDir
	// From the start: a Ctrl-C while the data opens still shuts down cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	// Checked before the data is opened: a first start's token is shown
	// once, so nothing may fail between making it and showing it.
	where, err := machineReach(ln.Addr().String(), c.PublicURL)
	if err != nil {
		ln.Close()
		return err
	}
	proxies, err := server.ParseTrustedProxies(c.TrustedProxies)
	if err != nil {
		ln.Close()
		return err
	}
	ag, err := c.AgentFlags.build(log)
	if err != nil {
		ln.Close()
		return err
	}
	defer c.AgentFlags.closeTools() // after the gateway: no turn calls them then
	stt, err := c.VoiceFlags.transcriber(log, &c.AgentFlags)
	if err != nil {
		ln.Close()
		return err
	}
	tts, err := c.VoiceFlags.speaker(log, &c.AgentFlags)
	if err != nil {
		ln.Close()
		return err
	}
	cfg := c.appConfig(log, ag)
	if stt != nil {
		cfg.STT = stt
	}
	if tts != nil {
		cfg.TTS = tts
	}
	cfg.Server.TrustedProxies, cfg.Server.AllowedOrigins = proxies, c.AllowedOrigins
	cfg.Push.WebApp = where.webApp()
	cfg.Listen, cfg.PublicURL = ln.Addr().String(), c.PublicURL
	app, err := server.Open(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	// Commands run elsewhere than ./ find this gateway through the
	// registry of the user's running gateways.
	if unregister, err := admin.Register(cfg.DataDir); err != nil {
		log.Warn("commands run outside this directory will not find the gateway without --data", "err", err)
	} else {
		defer unregister()
	}
	log.Info("irisgate listening", "ws", wsURL(ln.Addr()), "data", c.Data, "store", storeName(c.Store), "agent", app.GW.Agent().Name(), "version", version.String())
	if why := weakToken(c.Token); c.Token != "" && why != "" {
		log.Warn("the fixed token (--token / IRISGATE_TOKEN) is weak: "+why+"; anyone who reaches the port can guess it. "+
			"Use a long random one (openssl rand -hex 32), or none and pair devices with their own tokens", "command", cliName()+" pair")
	}
	c.showBanner(log, where, app.FirstToken)
	served := make(chan error, 1)
	go func() { served <- app.Serve(ln) }()

	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case err := <-served:
		if err != nil {
			app.Close(context.Background())
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.ShutdownWait)
	defer cancel()
	err = app.Close(ctx)
	log.Info("stopped")
	return err
}

// appConfig is the gateway the flags describe.
func (c *ServeCmd) appConfig(log *slog.Logger, ag agent.Agent) server.AppConfig {
	return server.AppConfig{
		DataDir: c.Data, Store: c.Store, NATS: c.NATS, Fleet: fleet.Config{Subject: c.NATSSubject}, LeaseTTL: c.LeaseTTL, MediaDir: c.MediaDir, Token: c.Token, Log: log, Version: versionLine(), Durability: c.Durability,
		Config: gateway.Config{Agent: ag, Workdir: c.Workdir, AskTimeout: c.AskTimeout, FastModel: c.FastModel,
			ShowReasoning: c.ShowReasoning, OutboxKeep: c.OutboxKeep, OutboxMaxAge: c.OutboxMaxAge,
			ModelHTTPClient: c.modelHTTP, AutoTitleHermes: c.AutoTitleHermes,
			Bounds: gateway.Bounds{ConnsPerToken: c.MaxConnsPerToken}},
		Push:  c.PushFlags.config(),
		Media: media.Limits{MaxSize: c.MaxMedia},
		Server: server.Config{MaxFrame: c.MaxFrame, HelloTimeout: c.HelloTimeout, PingInterval: c.PingInterval, NoDeflate: !c.Deflate,
			Mobile: mobile.Settings{DeliverTokens: c.DeliverTokens, AllowedDevices: c.MobileAllowedDevices, ExtraTokens: c.MobileExtraTokens,
				HomeDevice: c.MobileHomeDevice, AvatarURL: c.MobileAvatarURL, PromptTTL: c.MobilePromptTTL}},
	}
}

func wsURL(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "ws://" + net.JoinHostPort(host, port) + "/ws"
}

func newLogger(format, level string) *slog.Logger {
	var lv slog.Level
	lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// showBanner tells the person where to point their devices: on stderr as
// text, or as log records when the log is JSON.
func (c *ServeCmd) showBanner(log *slog.Logger, r reach, firstToken string) {
	b := banner{Reach: r, Version: version.String(), CLI: cliName(), Token: firstToken, FixedToken: c.Token != "",
		Color: colorTerminal(os.Stderr)}
	if def, err := filepath.Abs(defaultData); err != nil || filepath.Clean(c.Data) != def {
		b.Data = c.Data
	}
	b.show(os.Stderr, log, c.LogFormat == "json")
}

// storeName is --store as the log shows it: never its password.
func storeName(v string) string {
	s, err := datadir.ParseStore(v)
	if err != nil {
		return "?"
	}
	return s.String()
}

// defaultData is --data's default.
const defaultData = "./irisgate-data"
