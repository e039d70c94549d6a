// Command irisgate is the Iris gateway: run it with "irisgate serve".
package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kong"

	// The sandbox helper (the terminal tool's commands re-execute this
	// binary to build their walls) runs from that package's init, before
	// main and before anything of the gateway starts.
	_ "github.com/irisgate/irisgate/sandbox"
)

// CLI is the command line. Every setting of serve can also come from the
// environment (IRISGATE_*) or a TOML file (--config): flags win over the
// environment, which wins over the file.
type CLI struct {
	Config kong.ConfigFlag `help:"TOML file with settings (keys are the flag names, e.g. listen = \":8787\")." env:"IRISGATE_CONFIG" type:"existingfile"`

	Serve ServeCmd `cmd:"" help:"Run the gateway."`
	Token TokenCmd `cmd:"" help:"Manage device tokens."`
	Pair  PairCmd  `cmd:"" help:"Make a token for a new device and print the link (and QR code) that pairs it."`
	Send  SendCmd  `cmd:"" help:"Post a message into a channel through the running gateway."`
	Cron  CronCmd  `cmd:"" help:"Manage scheduled jobs."`
	Bench BenchCmd `cmd:"" help:"Benchmark a gateway with simulated devices over loopback (see bench/)."`
	Chat  ChatCmd  `cmd:"" help:"Chat with the agent from this terminal."`
}

func main() {
	var cli CLI
	ctx := kong.Parse(&cli,
		kong.Name("irisgate"),
		kong.Description("A self-hosted gateway between your devices and your AI agent."),
		kong.UsageOnError(),
		kong.Configuration(tomlLoader),
	)
	if err := ctx.Run(&cli); err != nil {
		fmt.Fprintln(os.Stderr, "irisgate:", err)
		os.Exit(1)
	}
}
