package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/irisgate/irisgate/agent"
)

// TestConfigMCP: MCP servers come from --mcp (repeated), the environment
// (one per line) and the config file, as strings or [[mcp]] tables.
func TestConfigMCP(t *testing.T) {
	cli := parse(t, "serve", "--mcp", `fs=mcp-server-filesystem "/home/me/my notes" '/tmp/a b'`, "--mcp", "docs=https://mcp.example.com/mcp", "--mcp-network", "docs")
	want := mcpList{
		{Name: "fs", Command: []string{"mcp-server-filesystem", "/home/me/my notes", "/tmp/a b"}},
		{Name: "docs", URL: "https://mcp.example.com/mcp"},
	}
	if got := cli.Serve.MCP; !reflect.DeepEqual(got, want) || !reflect.DeepEqual(cli.Serve.MCPNetwork, []string{"docs"}) {
		t.Fatalf("flags: %+v %v", got, cli.Serve.MCPNetwork)
	}

	f := filepath.Join(t.TempDir(), "irisgate.toml")
	os.WriteFile(f, []byte(`
[[mcp]]
name = "fs"
command = ["mcp-server-filesystem", "/srv/notes"]
env = ["NOTES_TOKEN"]
tools = ["read_text_file", "list_directory"]

[[mcp]]
name = "gh"
url = "https://api.example.com/mcp/"
bearer_env = "GH_MCP_TOKEN"
network = true

[[mcp]]
name = "time"
command = "uvx mcp-server-time --local-timezone Europe/Paris"
`), 0o600)
	cli = parse(t, "--config", f, "serve")
	want = mcpList{
		{Name: "fs", Command: []string{"mcp-server-filesystem", "/srv/notes"}, Env: []string{"NOTES_TOKEN"}, Tools: []string{"read_text_file", "list_directory"}},
		{Name: "gh", URL: "https://api.example.com/mcp/", BearerEnv: "GH_MCP_TOKEN", Network: true},
		{Name: "time", Command: []string{"uvx", "mcp-server-time", "--local-timezone", "Europe/Paris"}},
	}
	if got := cli.Serve.MCP; !reflect.DeepEqual(got, want) {
		t.Fatalf("file: %+v", got)
	}
	os.WriteFile(f, []byte(`mcp = ["a=cmd-a", "b=http://127.0.0.1:9/mcp"]`), 0o600)
	if got := parse(t, "--config", f, "serve").Serve.MCP; len(got) != 2 || got[0].Command[0] != "cmd-a" || got[1].URL == "" {
		t.Fatalf("file strings: %+v", got)
	}

	t.Setenv("IRISGATE_MCP", "one=prog1 x\n\ntwo=prog2")
	if got := parse(t, "serve").Serve.MCP; len(got) != 2 || got[1].Command[0] != "prog2" || got[0].Command[1] != "x" {
		t.Fatalf("environment: %+v", got)
	}
}

func TestConfigMCPErrors(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"[[mcp]]\nname = \"x\"\ncommand = 3\n", "command must be an array of strings"},
		{"[[mcp]]\nname = \"x\"\ncomand = \"y\"\n", `unknown key "comand"`},
		{"[[mcp]]\nname = \"x\"\nnetwork = \"yes\"\n", "network must be true or false"},
		{"[[mcp]]\nname = \"x\"\ncommand = \"a 'b\"\n", "unclosed ' quote"},
	} {
		f := filepath.Join(t.TempDir(), "irisgate.toml")
		os.WriteFile(f, []byte(c.toml), 0o600)
		var cli CLI
		p, _ := kong.New(&cli, kong.Configuration(tomlLoader), defaults(), kong.Exit(func(int) { t.Fatal("exit") }))
		if _, err := p.Parse([]string{"--config", f, "serve"}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.toml, err, c.want)
		}
	}
	for _, bad := range []string{"noequals", "=cmd", "x=", `x=a "b`} {
		if _, err := parseMCPFlag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Names and shapes are checked when the tools are built.
	for _, c := range []struct {
		f    ToolsFlags
		want string
	}{
		{ToolsFlags{MCP: mcpList{{Name: "bad_name", Command: []string{"x"}}}}, "letters, digits or dashes"},
		{ToolsFlags{MCP: mcpList{{Name: "a", Command: []string{"x"}}, {Name: "A", Command: []string{"y"}}}}, "two servers"},
		{ToolsFlags{MCP: mcpList{{Name: "a", URL: "ftp://x"}}}, "not an http(s) URL"},
		{ToolsFlags{MCP: mcpList{{Name: "a", Command: []string{"x"}}}, MCPNetwork: []string{"b"}}, `--mcp-network "b"`},
		{ToolsFlags{WebAllow: []string{"10.0.0.0/33"}}, "--web-allow"},
		{ToolsFlags{WebSearch: "searxng"}, "needs the address"},
		{ToolsFlags{WebSearch: "brave"}, "needs an API key"},
	} {
		err := c.f.addTools(slog.New(slog.DiscardHandler), &agent.Tools{}, t.TempDir())
		c.f.closeTools()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
}

func TestConfigWebTools(t *testing.T) {
	names := func(f ToolsFlags) []string {
		ts := &agent.Tools{}
		if err := f.addTools(slog.New(slog.DiscardHandler), ts, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range ts.List {
			out = append(out, tl.Name)
		}
		return out
	}
	cli := parse(t, "serve")
	if got := names(cli.Serve.ToolsFlags); !reflect.DeepEqual(got, []string{"web_fetch"}) {
		t.Fatalf("defaults: %v", got)
	}
	cli = parse(t, "serve", "--no-web-fetch", "--web-search", "searxng", "--web-search-url", "http://127.0.0.1:8888", "--web-allow", "127.0.0.1,10.0.0.0/8")
	if got := names(cli.Serve.ToolsFlags); !reflect.DeepEqual(got, []string{"web_search"}) {
		t.Fatalf("search only: %v", got)
	}
}
