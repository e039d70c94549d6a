package slash

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/sandbox"
)

// toolLister is an agent whose tools are the gateway's (the model
// backend, alone or beside Hermes).
type toolLister interface {
	ToolsInfo() (agent.ToolsInfo, bool)
}

// cmdTools lists the agent's tools and, per MCP server, where its
// connection stands.
func cmdTools(ctx context.Context, env Env, c Call) error {
	lk, ag := c.Lane, env.Agent()
	tl, ok := ag.(toolLister)
	var ti agent.ToolsInfo
	if ok {
		ti, ok = tl.ToolsInfo()
	}
	if !ok {
		env.SystemMessage(ctx, lk, fmt.Sprintf("The agent backend (%s) brings its own tools: irisgate's tools and MCP servers are the model backend's (--model).", ag.Name()))
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "🧰 Built in: %s\n", strings.Join(ti.Builtin, ", "))
	if len(ti.MCP) == 0 {
		b.WriteString("No MCP servers are configured (--mcp NAME=COMMAND or NAME=URL, or [[mcp]] in the config file).")
		env.SystemMessage(ctx, lk, b.String())
		return nil
	}
	b.WriteString("MCP servers:")
	for _, s := range ti.MCP {
		b.WriteString("\n" + mcpLine(s, time.Now()))
	}
	env.SystemMessage(ctx, lk, b.String())
	return nil
}

func mcpLine(s agent.MCPStatus, now time.Time) string {
	icon := map[agent.MCPState]string{agent.MCPConnected: "🟢", agent.MCPConnecting: "⏳", agent.MCPRestarting: "🟠", agent.MCPStopped: "⚫"}[s.State]
	where := s.Target
	if s.Transport == "stdio" {
		net := "offline"
		if s.Network {
			net = "network allowed"
		}
		if s.Wall == sandbox.None && s.State == agent.MCPConnected {
			where += " — no sandbox: every call asks"
		} else if s.State == agent.MCPConnected {
			where += fmt.Sprintf(" — sandbox %s, %s", s.Wall, net)
		}
	} else if s.Network {
		where += " — network allowed"
	} else {
		where += " — calls ask for the network"
	}
	line := fmt.Sprintf("%s %s (%s: %s): %s", icon, s.Name, s.Transport, where, s.State)
	if s.State == agent.MCPConnected {
		names := make([]string, 0, len(s.Tools))
		for _, t := range s.Tools {
			names = append(names, strings.TrimPrefix(t, s.Name+"__"))
		}
		shown := names
		if len(shown) > 20 {
			shown = append(shown[:20:20], fmt.Sprintf("and %d more", len(names)-20))
		}
		line += fmt.Sprintf(", %d tools: %s", len(names), strings.Join(shown, ", "))
		if s.Server != "" {
			line += " (" + s.Server + ")"
		}
	}
	if len(s.Left) > 0 {
		line += fmt.Sprintf("; %d not offered: %s", len(s.Left), strings.Join(s.Left[:min(len(s.Left), 5)], "; "))
	}
	if s.Restarts > 0 {
		line += fmt.Sprintf("; restarts: %d", s.Restarts)
	}
	if s.LastError != "" {
		line += fmt.Sprintf("; last error (%s ago): %s", now.Sub(s.ErrorAt).Round(time.Second), s.LastError)
	}
	return line
}
