package main

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/wire/mobile"
)

// serve with no flags runs with each package's defaults: the flags read
// them from the packages' Default… constants, never a literal of their
// own, and the README shows the same values.
func TestServeDefaultsAreThePackages(t *testing.T) {
	s := parse(t, "serve").Serve
	cfg := s.appConfig(nil, nil)
	for _, tc := range []struct {
		flag      string // as README's tables name it
		field     string // of ServeCmd, whose default tag must read the package's
		got, want any
	}{
		{"--outbox-keep", "OutboxKeep", cfg.OutboxKeep, int64(gateway.DefaultOutboxKeep)},
		{"--outbox-max-age", "OutboxMaxAge", cfg.OutboxMaxAge, gateway.DefaultOutboxMaxAge},
		{"--ask-timeout", "AskTimeout", cfg.AskTimeout, gateway.DefaultAskTimeout},
		{"--max-frame", "MaxFrame", cfg.Server.MaxFrame, int64(server.DefaultMaxFrame)},
		{"--hello-timeout", "HelloTimeout", cfg.Server.HelloTimeout, server.DefaultHelloTimeout},
		{"--ping-interval", "PingInterval", cfg.Server.PingInterval, server.DefaultPingInterval},
		{"--shutdown-wait", "ShutdownWait", s.ShutdownWait, server.DefaultShutdownWait},
		{"--deflate", "Deflate", !cfg.Server.NoDeflate, server.DefaultDeflate},
		{"--max-connections-per-token", "MaxConnsPerToken", cfg.Bounds.ConnsPerToken, gateway.DefaultConnsPerToken},
		{"--max-media", "MaxMedia", cfg.Media.MaxSize, int64(media.DefaultMaxSize)},
		{"--mobile-prompt-ttl", "MobilePromptTTL", cfg.Server.Mobile.PromptTTL, mobile.DefaultPromptTTL},
		{"--push-hold", "PushHold", cfg.Push.Hold, push.DefaultHold},
		{"--push-timeout", "PushTimeout", cfg.Push.Timeout, push.DefaultTimeout},
		{"--context-length", "ContextLength", s.ContextLength, agent.DefaultContextLength},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: serve runs with %v, the package's default is %v", tc.flag, tc.got, tc.want)
		}
		f, ok := reflect.TypeOf(s).FieldByName(tc.field)
		if !ok {
			t.Fatalf("ServeCmd has no field %s", tc.field)
		}
		if d := f.Tag.Get("default"); !strings.HasPrefix(d, "${") || defaults()[strings.Trim(d, "${}")] == "" {
			t.Errorf("%s: its default is %q, not a package's (a ${…} of defaults())", tc.flag, d)
		}
		if doc, ok := readmeDefault(t, tc.flag); ok {
			if v := parseLike(t, doc, tc.want); v != tc.want {
				t.Errorf("%s: the README says %s (%v), the package %v", tc.flag, doc, v, tc.want)
			}
		}
	}
}

// readmeDefault is the default column of a flag's row in the README's
// tables, when it has one.
func readmeDefault(t *testing.T, flag string) (string, bool) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		cols := strings.Split(line, " | ")
		if len(cols) >= 4 && strings.HasPrefix(line, "| `"+flag+"`") {
			return strings.Trim(cols[2], "`"), true
		}
	}
	return "", false
}

func parseLike(t *testing.T, s string, like any) any {
	switch like.(type) {
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
		}
		return d
	case int64:
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	case int:
		n, _ := strconv.Atoi(s)
		return n
	case bool:
		b, _ := strconv.ParseBool(s)
		return b
	}
	t.Fatalf("no parser for %T", like)
	return nil
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		720 * time.Hour: "720h", 300 * time.Second: "5m", 90 * time.Minute: "1h30m", 15 * time.Second: "15s",
		2*time.Minute + 3*time.Second: "2m3s", 250 * time.Millisecond: "250ms", 0: "0s",
	} {
		if got := duration(d); got != want {
			t.Errorf("duration(%v) = %q, want %q", d, got, want)
		}
		if back, _ := time.ParseDuration(duration(d)); back != d {
			t.Errorf("%q parses as %v, not %v", duration(d), back, d)
		}
	}
}
