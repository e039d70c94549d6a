// Command irisgate is the Iris gateway: run it with "irisgate serve".
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/irisgate/irisgate/admin"
	"github.com/irisgate/irisgate/core"
	// The sandbox helper (the terminal tool's commands re-execute this
	// binary to build their walls) runs from that package's init, before
	// main and before anything of the gateway starts.
	_ "github.com/irisgate/irisgate/sandbox"
)

// CLI is the command line. Every setting of serve can also come from the
// environment (IRISGATE_*) or a TOML file (--config): flags win over the
// environment, which wins over the file.
type CLI struct {
	Config      kong.ConfigFlag  `help:"TOML file with settings (keys are the flag names, e.g. listen = \":8787\")." env:"IRISGATE_CONFIG" type:"existingfile"`
	VersionFlag kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Serve    ServeCmd    `cmd:"" help:"Run the gateway."`
	Token    TokenCmd    `cmd:"" help:"Manage device tokens."`
	Pair     PairCmd     `cmd:"" help:"Make a token for a new device and print the link (and QR code) that pairs it."`
	Channels ChannelsCmd `cmd:"" help:"List the channels (ids, names, kinds), for send --to and cron --to."`
	Send     SendCmd     `cmd:"" help:"Post a message into a channel through the running gateway."`
	Cron     CronCmd     `cmd:"" help:"Manage scheduled jobs."`
	Bench    BenchCmd    `cmd:"" help:"Benchmark a gateway with simulated devices over loopback (see bench/)."`
	Chat     ChatCmd     `cmd:"" help:"Chat with the agent from this terminal."`
	Version  VersionCmd  `cmd:"" help:"Print the version (module, commit, Go)."`
}

// cliIO is where commands write: what scripts read on Out, what a person
// watching wants to know on Err.
type cliIO struct {
	Out, Err io.Writer
}

func main() {
	os.Exit(run(os.Args[1:], &cliIO{Out: os.Stdout, Err: os.Stderr}))
}

// exitCode carries kong's exit (after --help or --version) out of Parse.
type exitCode int

// run parses args and runs the command; it returns the exit status: 0,
// 1 for a failed command, 2 for a command line that does not parse.
func run(args []string, o *cliIO) (code int) {
	var cli CLI
	defer func() {
		r := recover()
		if e, ok := r.(exitCode); ok {
			code = int(e)
		} else if r != nil {
			panic(r)
		}
	}()
	parser, err := kong.New(&cli,
		kong.Name("irisgate"),
		kong.Description("A self-hosted gateway between your devices and your AI agent."),
		kong.Configuration(tomlLoader),
		kong.Vars{"version": versionLine()}, defaults(),
		kong.Writers(o.Out, o.Err),
		kong.Exit(func(c int) { panic(exitCode(c)) }),
		kong.Bind(o),
	)
	if err != nil {
		fmt.Fprintln(o.Err, "irisgate:", err)
		return 2
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintln(o.Err, "irisgate:", err)
		fmt.Fprintln(o.Err, usageHint(err))
		return 2
	}
	if err := kctx.Run(&cli); err != nil { // ServeCmd reads the CLI's --config path
		printError(o.Err, err)
		return 1
	}
	return 0
}

// usageHint is the one line printed under a command line that does not
// parse, instead of the whole usage.
func usageHint(err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		if cmd := pe.Context.Command(); cmd != "" {
			return "  see: irisgate " + commandPath(cmd) + " --help"
		}
	}
	return "  see: irisgate --help"
}

// commandPath drops a command's arguments ("cron pause <id>" → "cron pause").
func commandPath(cmd string) string {
	var words []string
	for _, w := range strings.Fields(cmd) {
		if strings.HasPrefix(w, "<") {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// printError prints a failed command's error: its message (an error the
// gateway answered without its code) and, when it has one, a hint.
func printError(w io.Writer, err error) {
	msg := err.Error()
	var ce *core.Error
	if errors.As(err, &ce) && ce.Err == nil {
		msg = ce.Message
	}
	fmt.Fprintln(w, "irisgate:", msg)
	var h *admin.Hinted
	if errors.As(err, &h) && h.Hint != "" {
		fmt.Fprintln(w, "  "+h.Hint)
	}
}
