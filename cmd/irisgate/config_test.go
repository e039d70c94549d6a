package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

func parse(t *testing.T, args ...string) *CLI {
	t.Helper()
	var cli CLI
	p, err := kong.New(&cli, kong.Configuration(tomlLoader), defaults(), kong.Exit(func(int) { t.Fatal("exit") }))
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

// TestConfigMobile: the Hermes Mobile settings reach the server's
// configuration, from flags and from the environment.
func TestConfigMobile(t *testing.T) {
	cfg := parse(t, "serve").Serve.appConfig(nil, nil).Server
	if len(cfg.Mobile.AllowedDevices) != 0 || len(cfg.Mobile.ExtraTokens) != 0 || cfg.Mobile.HomeDevice != "" || cfg.Mobile.AvatarURL != "" || cfg.Mobile.PromptTTL != 300*time.Second {
		t.Fatalf("defaults: %+v", cfg)
	}

	s := parse(t, "serve", "--mobile-allowed-devices", "tel-1,tel-2", "--mobile-extra-tokens", "tel-1=one", "--mobile-extra-tokens", "tel-2=two",
		"--mobile-home-device", "mobile:tel-1", "--mobile-avatar-url", "https://agent.example.com/avatar/", "--mobile-prompt-ttl", "90s",
		"--deliver-tokens", "cron-token").Serve
	cfg = s.appConfig(nil, nil).Server
	if fmt.Sprint(cfg.Mobile.AllowedDevices) != "[tel-1 tel-2]" || fmt.Sprint(cfg.Mobile.ExtraTokens) != "[tel-1=one tel-2=two]" ||
		cfg.Mobile.HomeDevice != "mobile:tel-1" || cfg.Mobile.AvatarURL != "https://agent.example.com/avatar/" || cfg.Mobile.PromptTTL != 90*time.Second ||
		fmt.Sprint(cfg.Mobile.DeliverTokens) != "[cron-token]" {
		t.Fatalf("from flags: %+v", cfg)
	}

	t.Setenv("IRISGATE_MOBILE_ALLOWED_DEVICES", "tel-3")
	t.Setenv("IRISGATE_MOBILE_EXTRA_TOKENS", "tel-3=three,tel-4=four")
	t.Setenv("IRISGATE_MOBILE_HOME_DEVICE", "tel-3")
	t.Setenv("IRISGATE_MOBILE_AVATAR_URL", "https://example.net/a/")
	t.Setenv("IRISGATE_MOBILE_PROMPT_TTL", "2m")
	cfg = parse(t, "serve").Serve.appConfig(nil, nil).Server
	if fmt.Sprint(cfg.Mobile.AllowedDevices) != "[tel-3]" || fmt.Sprint(cfg.Mobile.ExtraTokens) != "[tel-3=three tel-4=four]" ||
		cfg.Mobile.HomeDevice != "tel-3" || cfg.Mobile.AvatarURL != "https://example.net/a/" || cfg.Mobile.PromptTTL != 2*time.Minute {
		t.Fatalf("from the environment: %+v", cfg)
	}
}

// TestConfigPush: the push settings reach the server's configuration, the
// ntfy click URL among them (the ntfy backend sends it as Click).
func TestConfigPush(t *testing.T) {
	p := parse(t, "serve", "--ntfy-server", "https://ntfy.example.com", "--ntfy-token", "tk_1", "--ntfy-click", "https://chat.example.com/",
		"--push-content", "ids").Serve.appConfig(nil, nil).Push
	if p.NtfyServer != "https://ntfy.example.com" || p.NtfyToken != "tk_1" || p.NtfyClick != "https://chat.example.com/" || p.Content != "ids" || !p.WebPush {
		t.Fatalf("from flags: %+v", p)
	}
	t.Setenv("IRISGATE_NTFY_CLICK", "https://example.net/open")
	if p := parse(t, "serve").Serve.appConfig(nil, nil).Push; p.NtfyClick != "https://example.net/open" {
		t.Fatalf("from the environment: %+v", p)
	}
}

// TestConfigAutoTitleHermes: naming a Hermes chat's threads with another
// provider is off unless the flag or the environment turns it on.
func TestConfigAutoTitleHermes(t *testing.T) {
	if parse(t, "serve").Serve.appConfig(nil, nil).AutoTitleHermes {
		t.Fatal("titles for Hermes lanes are on by default")
	}
	if !parse(t, "serve", "--auto-title-hermes").Serve.appConfig(nil, nil).AutoTitleHermes {
		t.Fatal("--auto-title-hermes does not reach the gateway")
	}
	t.Setenv("IRISGATE_AUTO_TITLE_HERMES", "true")
	if !parse(t, "serve").Serve.appConfig(nil, nil).AutoTitleHermes {
		t.Fatal("IRISGATE_AUTO_TITLE_HERMES does not reach the gateway")
	}
}
