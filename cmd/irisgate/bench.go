package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/irisgate/irisgate/bench"
)

// BenchCmd runs the benchmark scenarios against gateways it starts itself
// (in-process, and as a subprocess of this binary for memory), driving
// simulated devices over loopback WebSockets.
type BenchCmd struct {
	Scenarios string `help:"Comma list of scenarios: fanout,durable,sync,storm,memory,search,media,model,floods,ratios,sidebyside,replicas (or a-l, or all)." default:"all"`
	Quick     bool   `help:"Small, fast sizes (a smoke run of a few seconds)."`

	FanoutDevices   int           `help:"Fan-out: devices watching the stream (default 100; quick 10)."`
	FanoutRate      float64       `help:"Fan-out: paced text events per second (default 2000; quick 1000)."`
	FanoutDuration  time.Duration `help:"Fan-out: length of the paced phase (default 1s; quick 200ms)."`
	FanoutChunk     int           `help:"Fan-out: bytes each text event adds to the reply (default 4, about a token)."`
	DurableDevices  int           `help:"Durable: devices sending message.send (default 50; quick 5)."`
	DurableDuration time.Duration `help:"Durable: how long they send (default 3s; quick 300ms)."`
	DurableInflight int           `help:"Durable: requests in flight per device (default 2)."`
	SyncFrames      int           `help:"Sync: outbox frames to fill and replay (default 100000; quick 1000)."`
	StormDevices    int           `help:"Storm: devices that drop and reconnect (default 1000; quick 20)."`
	StormRate       float64       `help:"Storm: message.send per second produced throughout (default 10)."`
	StormClose      string        `help:"Storm: how devices drop: abrupt (socket closed, like a lost network) or clean (WebSocket close handshake)." default:"abrupt" enum:"abrupt,clean"`
	MemoryConns     int           `help:"Memory: idle connections (default 5000; quick 50)."`
	ModelTurns      int           `help:"Model latency: turns measured, first token to first message.update (default 200; quick 20)."`
	ModelChunks     int           `help:"Model latency: SSE text chunks the fake model streams per reply (default 32)."`
	ModelGap        time.Duration `help:"Model latency: pause between chunks in the paced phase (default 2ms)."`
	SearchMessages  int           `help:"Search: messages in the store (default 1000000; quick 2000)."`
	SearchQueries   int           `help:"Search: timed searches (default 2000; quick 100)."`
	MediaSize       int           `help:"Media: bytes of the file uploaded and pulled (default 64 MiB; quick 8 MiB)."`
	RatioModes      string        `help:"Ratios: comma list of modes: burst,person,paced,http,handshake,rtt,recovery,storm,idle,wire (or all)." default:"all"`
	RatioDevices    int           `help:"Ratios: devices watching fan-out and HTTP posts (default 100; quick 5)."`
	RatioPublishes  int           `help:"Ratios: message.send of a burst (default 3000; quick 300)."`
	RatioPacedRates []float64     `help:"Ratios: paced fan-out, sends a second, one run each (default 1000,500; quick 200)."`
	RatioDuration   time.Duration `help:"Ratios: length of paced fan-out, HTTP posting and each round-trip run (default 2s; quick 300ms)."`
	RatioPosters    int           `help:"Ratios: parallel HTTP publishers on /api/send (default 16; quick 4)."`
	RatioHandshakes int           `help:"Ratios: handshakes timed one after another (default 300; quick 20)."`
	RatioMissed     int           `help:"Ratios: frames a device misses and then recovers by sync (default 1000; quick 100)."`
	RatioStorm      int           `help:"Ratios: devices connecting and syncing at once (default 1000; quick 50)."`
	RatioIdle       int           `help:"Ratios: idle connections for RSS per connection (default 5000; quick 50)."`
	RatioReplyBytes int           `help:"Ratios: bytes of the streamed reply counted on the wire (default 12000; quick 1200)."`
	RatioDeflate    bool          `help:"Ratios: the devices watching fan-out and HTTP posts offer permessage-deflate (as browsers do)."`
	RatioHistory    int           `help:"Ratios: messages imported into each child gateway's store before its mode runs, so the figures are a lived-in store's (default 0: a fresh one; at most 10,000,000)."`
	Centrifugo      string        `help:"Sidebyside: the Centrifugo v6 binary to run beside irisgate (default: centrifugo on PATH; without one the scenario is skipped)."`
	Runs            int           `help:"Sidebyside: accepted runs per row and server, medians (default 3; quick 1)."`
	Redo            int           `help:"Sidebyside: redos of a run while other processes took > 15% of the CPU (default 2; quick 0; -1 none)."`
	BaselineBin     string        `help:"Floods: also run each flood against the irisgate binary at this path, first (before/after in one run)." type:"path"`

	TempDir    string        `help:"Directory for the scenarios' data directories (default: the system's)." type:"path"`
	GatewayLog bool          `help:"Print the in-process gateways' warnings and errors to stderr."`
	Timeout    time.Duration `help:"Bound on each scenario (default 15m, or 1h with sidebyside; quick 2m)."`
	ProfileDir string        `help:"Write a CPU and a heap profile of each scenario here (NAME.cpu.pprof, NAME.heap.pprof)." type:"path"`

	// Child makes this process one of the ratios scenario's gateways; the
	// bench starts it itself.
	ReplicasStore    string        `help:"Replicas: a PostgreSQL database the replicas share (postgres://…; its outbox grows). Without it and --replicas-nats only the SQLite row runs." env:"IRISGATE_BENCH_STORE"`
	ReplicasNATS     string        `name:"replicas-nats" help:"Replicas: a NATS server (nats://…)." env:"IRISGATE_BENCH_NATS"`
	ReplicasSenders  int           `help:"Replicas: devices sending (default 12; quick 3)."`
	ReplicasWatchers int           `help:"Replicas: devices counting deliveries (default 30; quick 6)."`
	ReplicasDuration time.Duration `help:"Replicas: how long they send, per mode (default 2s; quick 300ms)."`
	Child            string        `hidden:"" help:"Serve a benchmark child gateway (internal)."`
}

// Run implements the command.
func (c *BenchCmd) Run() error {
	if c.Child != "" {
		return bench.RunChild(c.Child)
	}
	sc, err := bench.ParseScenarios(c.Scenarios)
	if err != nil {
		return err
	}
	modes, err := bench.ParseRatioModes(c.RatioModes)
	if err != nil {
		return err
	}
	o := bench.Options{
		Scenarios: sc, Quick: c.Quick,
		FanoutDevices: c.FanoutDevices, FanoutRate: c.FanoutRate, FanoutDuration: c.FanoutDuration, FanoutChunk: c.FanoutChunk,
		DurableDevices: c.DurableDevices, DurableDuration: c.DurableDuration, DurableInflight: c.DurableInflight,
		SyncFrames: c.SyncFrames, StormDevices: c.StormDevices, StormRate: c.StormRate, StormClose: c.StormClose, MemoryConns: c.MemoryConns,
		ModelTurns: c.ModelTurns, ModelChunks: c.ModelChunks, ModelGap: c.ModelGap,
		SearchMessages: c.SearchMessages, SearchQueries: c.SearchQueries, MediaSize: c.MediaSize,
		RatioModes: modes, RatioDevices: c.RatioDevices, RatioPublishes: c.RatioPublishes, RatioPacedRates: c.RatioPacedRates,
		RatioDuration: c.RatioDuration, RatioPosters: c.RatioPosters, RatioHandshakes: c.RatioHandshakes, RatioMissed: c.RatioMissed,
		RatioStorm: c.RatioStorm, RatioIdle: c.RatioIdle, RatioReply: c.RatioReplyBytes, RatioDeflate: c.RatioDeflate, RatioHistory: c.RatioHistory,
		ReplicasStore: c.ReplicasStore, ReplicasNATS: c.ReplicasNATS, ReplicasSenders: c.ReplicasSenders,
		ReplicasWatchers: c.ReplicasWatchers, ReplicasDuration: c.ReplicasDuration,
		TempDir: c.TempDir, Progress: os.Stderr, ScenarioTimeout: c.Timeout, ProfileDir: c.ProfileDir,
	}
	if c.GatewayLog {
		o.GatewayLog = os.Stderr
	}
	o.SideBySide = bench.SideOptions{Centrifugo: c.Centrifugo, Runs: c.Runs, Redo: c.Redo}
	if c.Timeout == 0 && slices.Contains(sc, bench.SideBySide) {
		// Every row several times on each server, redone when noisy.
		o.ScenarioTimeout = time.Hour
	}
	if c.BaselineBin != "" {
		o.BaselineCmd = bench.ServeCmd(c.BaselineBin)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	results, err := bench.Run(ctx, o, os.Stdout)
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != nil || r.Lost > 0 {
			return fmt.Errorf("scenario %s did not complete cleanly", r.Name)
		}
	}
	return nil
}
