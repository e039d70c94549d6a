package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

func parse(t *testing.T, args ...string) *CLI {
	t.Helper()
	var cli CLI
	p, err := kong.New(&cli, kong.Configuration(tomlLoader), kong.Exit(func(int) { t.Fatal("exit") }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &cli
}

func TestConfigPrecedence(t *testing.T) {
	f := filepath.Join(t.TempDir(), "irisgate.toml")
	os.WriteFile(f, []byte("listen = \"127.0.0.1:1111\"\noutbox_keep = 7\n[serve]\nping-interval = \"3s\"\ndata = \"/from/file\"\n"), 0o600)

	cli := parse(t, "--config", f, "serve")
	if cli.Serve.Listen != "127.0.0.1:1111" || cli.Serve.OutboxKeep != 7 || cli.Serve.PingInterval != 3*time.Second || cli.Serve.Data != "/from/file" {
		t.Fatalf("file not applied: %+v", cli.Serve)
	}

	t.Setenv("IRISGATE_LISTEN", "127.0.0.1:2222")
	cli = parse(t, "--config", f, "serve")
	if cli.Serve.Listen != "127.0.0.1:2222" {
		t.Fatalf("environment should beat the file: %q", cli.Serve.Listen)
	}
	if cli.Serve.OutboxKeep != 7 {
		t.Fatalf("file value lost for a setting the environment leaves alone")
	}

	cli = parse(t, "--config", f, "serve", "--listen", "127.0.0.1:3333")
	if cli.Serve.Listen != "127.0.0.1:3333" {
		t.Fatalf("flag should beat the environment: %q", cli.Serve.Listen)
	}
}

func TestConfigDefaults(t *testing.T) {
	cli := parse(t, "serve")
	s := cli.Serve
	if s.Listen != ":8787" || filepath.Base(s.Data) != "irisgate-data" || s.HelloTimeout != 15*time.Second || !s.ShowReasoning {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestConfigEnv(t *testing.T) {
	t.Setenv("IRISGATE_DATA", "/tmp/x")
	t.Setenv("IRISGATE_TOKEN", "fixed")
	s := parse(t, "serve").Serve
	if s.Data != "/tmp/x" || s.Token != "fixed" {
		t.Fatalf("env: %+v", s)
	}
}
