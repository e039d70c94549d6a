package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/irisgate/irisgate/agent"
)

// ToolsFlags give the model backend tools from MCP servers and the web.
type ToolsFlags struct {
	MCP        mcpList  `help:"An MCP server whose tools the agent gets, as NAME=COMMAND ARGS… (stdio: it runs in the tools' sandbox, in the working directory) or NAME=https://… (streamable HTTP); repeatable (one per line in the variable). The config file also takes [[mcp]] tables (README)." placeholder:"NAME=COMMAND|URL" env:"IRISGATE_MCP" group:"Tools"`
	MCPNetwork []string `help:"MCP servers, by name, let onto the network: a stdio server's process may use it, an HTTP server's calls need no network approval." env:"IRISGATE_MCP_NETWORK" group:"Tools"`
	WebFetch   bool     `help:"Offer web_fetch (read a web page as text; it asks for the network like the terminal)." default:"true" negatable:"" env:"IRISGATE_WEB_FETCH" group:"Tools"`
	WebAllow   []string `help:"Address ranges web_fetch may reach though they are loopback, private or link-local (e.g. 192.168.1.0/24, 127.0.0.1); none by default, which keeps the gateway's own ports and the LAN out." env:"IRISGATE_WEB_ALLOW" group:"Tools"`
	WebSearch  string   `help:"Provider of web_search: searxng, brave or tavily (none: no web_search)." default:"none" enum:"none,searxng,brave,tavily" env:"IRISGATE_WEB_SEARCH" group:"Tools"`
	SearchURL  string   `name:"web-search-url" help:"The SearXNG instance (e.g. http://127.0.0.1:8888, with json in its search.formats), or another endpoint for Brave or Tavily." env:"IRISGATE_WEB_SEARCH_URL" group:"Tools"`
	SearchKey  string   `name:"web-search-key" help:"API key of Brave or Tavily (prefer the environment: flags show in process lists)." env:"IRISGATE_WEB_SEARCH_KEY" group:"Tools"`

	mcp *agent.MCP // started by build, closed by closeTools
}

// addTools puts the web tools and the MCP servers' into tools, and
// starts connecting the servers.
func (f *ToolsFlags) addTools(log *slog.Logger, tools *agent.Tools, workdir string) error {
	var web agent.WebConfig
	for _, a := range f.WebAllow {
		p, err := parsePrefix(a)
		if err != nil {
			return fmt.Errorf("--web-allow %q: %w", a, err)
		}
		web.Allow = append(web.Allow, p)
	}
	s, err := agent.NewSearch(agent.SearchConfig{Provider: f.WebSearch, URL: f.SearchURL, Key: f.SearchKey})
	if err != nil {
		return err
	}
	web.Search, web.NoFetch = s, !f.WebFetch
	tools.List = append(tools.List, agent.WebTools(tools, web)...)
	if s != nil {
		log.Info("web_search", "provider", s.Name())
	}
	if len(f.MCP) == 0 {
		return nil
	}
	servers := append([]agent.MCPServer(nil), f.MCP...)
	for _, n := range f.MCPNetwork {
		found := false
		for i := range servers {
			if servers[i].Name == strings.TrimSpace(n) {
				servers[i].Network, found = true, true
			}
		}
		if !found {
			return fmt.Errorf("--mcp-network %q: no MCP server has that name", n)
		}
	}
	m, err := agent.NewMCP(tools, agent.MCPConfig{Servers: servers, Dir: workdir, Log: log})
	if err != nil {
		return err
	}
	tools.Sets = append(tools.Sets, m)
	m.Start()
	f.mcp = m
	return nil
}

// closeTools stops the MCP servers.
func (f *ToolsFlags) closeTools() {
	if f.mcp != nil {
		f.mcp.Close()
	}
}

func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// mcpList is --mcp: NAME=COMMAND… or NAME=URL from flags and the
// environment (one per line), and from the config file either such
// strings or [[mcp]] tables.
type mcpList []agent.MCPServer

// Decode implements kong.MapperValue.
func (l *mcpList) Decode(ctx *kong.DecodeContext) error {
	tok := ctx.Scan.Pop()
	add := func(v any) error {
		switch v := v.(type) {
		case string:
			for _, line := range strings.Split(v, "\n") {
				if strings.TrimSpace(line) == "" {
					continue
				}
				s, err := parseMCPFlag(line)
				if err != nil {
					return err
				}
				*l = append(*l, s)
			}
			return nil
		case map[string]any:
			s, err := parseMCPTable(v)
			if err != nil {
				return err
			}
			*l = append(*l, s)
			return nil
		}
		return fmt.Errorf("an MCP server is NAME=COMMAND, NAME=URL or an [[mcp]] table, not %T", v)
	}
	switch v := tok.Value.(type) {
	case []any:
		for _, e := range v {
			if err := add(e); err != nil {
				return err
			}
		}
		return nil
	case []map[string]any:
		for _, e := range v {
			if err := add(e); err != nil {
				return err
			}
		}
		return nil
	}
	return add(tok.Value)
}

func parseMCPFlag(s string) (agent.MCPServer, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(s), "=")
	rest = strings.TrimSpace(rest)
	if !ok || name == "" || rest == "" {
		return agent.MCPServer{}, fmt.Errorf("--mcp %q: want NAME=COMMAND ARGS… or NAME=URL", s)
	}
	srv := agent.MCPServer{Name: strings.TrimSpace(name)}
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		srv.URL = rest
		return srv, nil
	}
	words, err := splitWords(rest)
	if err != nil {
		return srv, fmt.Errorf("--mcp %s: %w", name, err)
	}
	srv.Command = words
	return srv, nil
}

// parseMCPTable reads an [[mcp]] table: name, command (a string of words
// or an array), url, network, env, bearer_env, tools.
func parseMCPTable(m map[string]any) (agent.MCPServer, error) {
	var s agent.MCPServer
	var errs []error
	str := func(k string) string {
		v, ok := m[k]
		if !ok {
			return ""
		}
		sv, ok := v.(string)
		if !ok {
			errs = append(errs, fmt.Errorf("%s must be a string", k))
		}
		return sv
	}
	list := func(k string) []string {
		v, ok := m[k]
		if !ok {
			return nil
		}
		if sv, ok := v.(string); ok && k == "command" {
			words, err := splitWords(sv)
			if err != nil {
				errs = append(errs, fmt.Errorf("command: %w", err))
			}
			return words
		}
		arr, ok := v.([]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s must be an array of strings", k))
			return nil
		}
		var out []string
		for _, e := range arr {
			sv, ok := e.(string)
			if !ok {
				errs = append(errs, fmt.Errorf("%s must be an array of strings", k))
				return nil
			}
			out = append(out, sv)
		}
		return out
	}
	for k := range m {
		switch k {
		case "name", "command", "url", "network", "env", "bearer_env", "tools":
		default:
			errs = append(errs, fmt.Errorf("unknown key %q (name, command, url, network, env, bearer_env, tools)", k))
		}
	}
	s.Name, s.URL, s.BearerEnv = str("name"), str("url"), str("bearer_env")
	s.Command, s.Env, s.Tools = list("command"), list("env"), list("tools")
	if v, ok := m["network"]; ok {
		b, ok := v.(bool)
		if !ok {
			errs = append(errs, errors.New("network must be true or false"))
		}
		s.Network = b
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("[[mcp]] %s: %w", s.Name, err)
	}
	return s, nil
}

// splitWords splits a command line as a shell would its words: spaces
// separate, single quotes keep everything, double quotes and backslashes
// as in sh. Nothing is expanded.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("an unclosed ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`an unclosed " quote`)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("an empty command")
	}
	return words, nil
}
