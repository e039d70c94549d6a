package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// centrifugoForTest is the Centrifugo binary the side-by-side test runs:
// $IRISGATE_BENCH_CENTRIFUGO, else centrifugo on PATH.
func centrifugoForTest(t *testing.T) string {
	t.Helper()
	bin, ok, err := FindCentrifugo(os.Getenv("IRISGATE_BENCH_CENTRIFUGO"))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("no Centrifugo binary: set IRISGATE_BENCH_CENTRIFUGO or put centrifugo on PATH " +
			"(GOBIN=/tmp/cf/bin go install github.com/centrifugal/centrifugo/v6@v6.9.1) to run the side-by-side")
	}
	return bin
}

// TestSideBySideQuick runs the sidebyside scenario quick against a real
// Centrifugo child and real irisgate children, and checks that every row
// has both figures, each finite and positive. Nothing is timed.
func TestSideBySideQuick(t *testing.T) {
	bin := centrifugoForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := Options{Scenarios: []string{SideBySide}, Quick: true, TempDir: t.TempDir(), ChildCmd: testChild,
		GatewayCmd: childGateway, Progress: logWriter{t}, ScenarioTimeout: 3 * time.Minute,
		SideBySide: SideOptions{Centrifugo: bin}}
	o.defaults()
	r, lines := sideBySide(ctx, &o)
	var report bytes.Buffer
	writeResult(&report, &r)
	t.Log("\n" + report.String())
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := map[string]int{"fan-out burst": 6, "one person's": 2, "paced": 3, "HTTP publishers": 2, "handshake": 2,
		"request round trip": 2, "recovery": 2, "storm": 2, "idle connections": 1}
	got := map[string]int{}
	for _, l := range lines {
		for k := range want {
			if strings.Contains(l.cell, k) {
				got[k]++
			}
		}
		for side, v := range l.value {
			// A quick run's server may use less CPU than /proc counts
			// (10 ms ticks).
			zeroOK := strings.HasSuffix(l.metric, "CPU per delivery") && v == 0
			if !zeroOK && (!(v > 0) || math.IsInf(v, 0)) {
				t.Errorf("%s / %s: %s's value %v, want finite and > 0", l.cell, l.metric, sideNames[side], v)
			}
			if l.runs[side] != 1 {
				t.Errorf("%s / %s: %s has %d runs, want 1", l.cell, l.metric, sideNames[side], l.runs[side])
			}
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("row %q: %d lines, want %d", k, got[k], n)
		}
	}
	if len(r.Table) < len(lines)+1 || !strings.Contains(r.Table[0], "Centrifugo") {
		t.Errorf("table: %q", r.Table)
	}
}

// Without a binary the scenario is skipped with a note, not failed: CI
// has no Centrifugo. A path that does not exist is an error.
func TestSideBySideWithoutCentrifugo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	o := Options{Quick: true}
	o.defaults()
	r, lines := sideBySide(context.Background(), &o)
	if r.Err != nil || len(lines) != 0 || len(r.Notes) == 0 || !strings.HasPrefix(r.Notes[0], "SKIPPED") {
		t.Fatalf("err %v, %d lines, notes %q", r.Err, len(lines), r.Notes)
	}
	o.SideBySide.Centrifugo = "/nonexistent/centrifugo"
	if r, _ := sideBySide(context.Background(), &o); r.Err == nil {
		t.Fatal("a missing --centrifugo path was not an error")
	}
}

// The config is JSON Centrifugo v6 reads, and the JWT is HS256 over the
// shared secret, the form Centrifugo verifies.
func TestCentrifugoConfigAndToken(t *testing.T) {
	b, err := cfConfig("127.0.0.1:8123", 5000)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		HTTPServer struct {
			Address string `json:"address"`
			Port    int    `json:"port"`
		} `json:"http_server"`
		Channel struct {
			Namespaces []struct {
				Name          string `json:"name"`
				HistorySize   int    `json:"history_size"`
				ForceRecovery bool   `json:"force_recovery"`
			} `json:"namespaces"`
		} `json:"channel"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	ns := cfg.Channel.Namespaces
	if cfg.HTTPServer.Address != "127.0.0.1" || cfg.HTTPServer.Port != 8123 || len(ns) != 1 ||
		ns[0].Name+":room" != cfChannel || ns[0].HistorySize != 5000 || !ns[0].ForceRecovery {
		t.Fatalf("config: %s", b)
	}
	if parts := strings.Split(cfToken(), "."); len(parts) != 3 {
		t.Fatalf("token %q", cfToken())
	}
	var lines []string
	for l := range cfLines([]byte("{\"id\":3,\"publish\":{}}\n{}\n\n{\"push\":{}}")) {
		lines = append(lines, string(l))
	}
	if len(lines) != 3 || cfID([]byte(lines[0])) != 3 || cfID([]byte(lines[2])) != 0 {
		t.Fatalf("lines %q", lines)
	}
}
