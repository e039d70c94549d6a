package slash

import (
	"context"
	"fmt"
	"strings"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// Command is a slash command of the catalog.
type Command struct {
	Name        string // with the slash
	Aliases     []string
	Description string
	ArgsHint    string
	Category    string
	run         func(ctx context.Context, env Env, c Call) error
}

// Call is one command typed in a lane.
type Call struct {
	From hub.Caller
	Lane core.Lane
	Args string
}

// Catalog is the commands, in the order /help shows them.
func Catalog() []Command { return commands }

var commands []Command

// init breaks the cycle /help's run would make with the catalog it lists.
func init() {
	commands = []Command{
		{Name: "/new", Aliases: []string{"/reset"}, Description: "Start a new session (fresh conversation, approvals and todo list)", ArgsHint: "", Category: "Session", run: cmdNew},
		{Name: "/retry", Description: "Answer your last message again", Category: "Session", run: cmdRetry},
		{Name: "/undo", Description: "Remove your last message and its reply", Category: "Session", run: cmdUndo},
		{Name: "/title", Description: "Rename this chat", ArgsHint: "<name>", Category: "Session", run: cmdTitle},
		{Name: "/stop", Description: "Stop the running turn (all: and drop the queued messages)", ArgsHint: "[all]", Category: "Session", run: cmdStop},
		{Name: "/steer", Description: "Redirect the running turn", ArgsHint: "<text>", Category: "Session", run: cmdSteer},
		{Name: "/queue", Description: "Queue a message to run after the current turn", ArgsHint: "<text>", Category: "Session", run: cmdQueue},
		{Name: "/model", Description: "Switch model", ArgsHint: "[provider/model]", Category: "Configuration", run: cmdModel},
		{Name: "/reasoning", Description: "Set reasoning effort, or show/hide reasoning", ArgsHint: "[none|minimal|low|medium|high|show|hide]", Category: "Configuration", run: cmdReasoning},
		{Name: "/fast", Description: "Fast mode: minimal reasoning (and the fast model, when one is set)", ArgsHint: "[on|off]", Category: "Configuration", run: cmdFast},
		{Name: "/voice", Description: "Speak the replies in this chat (text to speech)", ArgsHint: "[on|off]", Category: "Configuration", run: cmdVoice},
		{Name: "/yolo", Description: "Ask nothing, for this session (toggle); the sandbox stays", Category: "Tools & Skills", run: cmdYolo},
		{Name: "/approve", Description: "Approve the pending command", ArgsHint: "[session|always]", Category: "Tools & Skills", run: cmdApprove},
		{Name: "/deny", Description: "Deny the pending command", Category: "Tools & Skills", run: cmdDeny},
		{Name: "/approvals", Description: "Choose what asks first: everything not read-only, only what leaves the sandbox, or nothing", ArgsHint: "[ask|auto|yolo]", Category: "Tools & Skills", run: cmdApprovals},
		{Name: "/tools", Description: "List the agent's tools and the MCP servers they come from", Category: "Tools & Skills", run: cmdTools},
		{Name: "/cron", Description: "List, add, pause, resume, remove or run scheduled jobs", ArgsHint: "[list|add SCHEDULE | PROMPT|pause ID|resume ID|rm ID|run ID]", Category: "Tools & Skills", run: cmdCron},
		{Name: "/status", Description: "Show session status", Category: "Info", run: cmdStatus},
		{Name: "/help", Description: "List the commands", Category: "Info", run: cmdHelp},
	}
}

// find returns the command name or an alias of it names, nil for none.
func find(name string) *Command {
	for i := range commands {
		c := &commands[i]
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// Run runs a slash command typed in a lane (name and args as Parse split
// them). An unknown command gets a helpful reply, never a model call; a
// command that fails says why in the lane.
func Run(ctx context.Context, env Env, from hub.Caller, lk core.Lane, name, args string) {
	// The command's message has had its reply (the echo): nothing the
	// command does may answer that request again.
	from = hub.Caller{Conn: from.Conn}
	c := find(name)
	if c == nil {
		hint := ""
		if m := suggest(name); m != "" {
			hint = " Did you mean " + m + "?"
		}
		env.SystemMessage(ctx, lk, fmt.Sprintf("Unknown command %s.%s Type /help for the list.", name, hint))
		return
	}
	if err := c.run(ctx, env, Call{From: from, Lane: lk, Args: args}); err != nil {
		env.SystemMessage(ctx, lk, c.Name+": "+core.AsError(err).Message)
	}
}

func cmdHelp(ctx context.Context, env Env, c Call) error {
	var b strings.Builder
	b.WriteString("Commands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "%s %s — %s", c.Name, c.ArgsHint, c.Description)
		if len(c.Aliases) > 0 {
			fmt.Fprintf(&b, " (also %s)", strings.Join(c.Aliases, ", "))
		}
		b.WriteByte('\n')
	}
	env.SystemMessage(ctx, c.Lane, strings.TrimSpace(b.String()))
	return nil
}
