package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The replica settings reach the gateway's configuration from flags, the
// environment and the TOML file; --nats without a PostgreSQL store is
// refused before anything starts, saying what to set.
func TestConfigReplicas(t *testing.T) {
	f := filepath.Join(t.TempDir(), "irisgate.toml")
	os.WriteFile(f, []byte("nats = \"nats://from-file:4222\"\nmedia-dir = \"/shared/media\"\n"), 0o600)
	s := parse(t, "--config", f, "serve").Serve
	cfg := s.appConfig(nil, nil)
	if cfg.NATS != "nats://from-file:4222" || cfg.MediaDir != "/shared/media" || cfg.Fleet.Subject != "irisgate" {
		t.Fatalf("from the file: NATS %q, media %q, subject %q", cfg.NATS, cfg.MediaDir, cfg.Fleet.Subject)
	}
	t.Setenv("IRISGATE_NATS", "nats://from-env:4222")
	t.Setenv("IRISGATE_MEDIA_DIR", "/env/media")
	t.Setenv("IRISGATE_NATS_SUBJECT", "team")
	cfg = parse(t, "serve").Serve.appConfig(nil, nil)
	if cfg.NATS != "nats://from-env:4222" || cfg.MediaDir != "/env/media" || cfg.Fleet.Subject != "team" {
		t.Fatalf("from the environment: NATS %q, media %q, subject %q", cfg.NATS, cfg.MediaDir, cfg.Fleet.Subject)
	}
	cfg = parse(t, "serve", "--nats", "nats://flag:4222", "--media-dir", "/flag/media").Serve.appConfig(nil, nil)
	if cfg.NATS != "nats://flag:4222" || cfg.MediaDir != "/flag/media" {
		t.Fatalf("from flags: NATS %q, media %q", cfg.NATS, cfg.MediaDir)
	}
}

func TestNATSNeedsPostgres(t *testing.T) {
	noGateways(t)
	dir := filepath.Join(t.TempDir(), "data")
	code, _, errOut := irisgate(t, "serve", "--listen", "127.0.0.1:0", "--data", dir, "--nats", "nats://127.0.0.1:1")
	if code == 0 || !strings.Contains(errOut, "--store postgres://") {
		t.Fatalf("serve --nats on SQLite: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory was made: %v", err)
	}
}
