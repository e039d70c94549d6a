package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPairAsksTheRunningGateway: pair's link names where the running
// gateway listens (the port it bound) or its --public-url, with no flag
// given; flags win, and stand in when no gateway runs.
func TestPairAsksTheRunningGateway(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "irisgate-data")
	link := regexp.MustCompile(`(?m)^    (\S+#pair\S+)$`)
	pair := func(args ...string) string {
		t.Helper()
		out, _ := runIrisgate(t, t.TempDir(), nil, append([]string{"pair", "--data", data, "--no-qr"}, args...)...)
		m := link.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("pair printed no link:\n%s", out)
		}
		return m[1]
	}

	p := startServe(t, dir, nil, "--public-url", "https://iris.example.com/")
	p.stderr.waitFor(t, "Pair another device later:")
	if l := pair(); !strings.HasPrefix(l, "https://iris.example.com/#pair") {
		t.Errorf("with the gateway's --public-url: %s", l)
	}
	if l := pair("--public-url", "https://other.example.com/"); !strings.HasPrefix(l, "https://other.example.com/#pair") {
		t.Errorf("with pair's own --public-url: %s", l)
	}
	p.stop(t)

	p = startServe(t, dir, nil)
	p.stderr.waitFor(t, "irisgate listening")
	ws := regexp.MustCompile(`ws=ws://127\.0\.0\.1:(\d+)/ws`).FindStringSubmatch(strings.Join(p.stderr.snapshot(), "\n"))
	if ws == nil {
		t.Fatalf("no address in serve's log:\n%s", strings.Join(p.stderr.snapshot(), "\n"))
	}
	if l := pair(); !strings.HasPrefix(l, "http://127.0.0.1:"+ws[1]+"/#pair") {
		t.Errorf("the gateway listens on port %s; pair's link: %s", ws[1], l)
	}
	p.stop(t)

	if l := pair("--listen", "127.0.0.1:9999"); !strings.HasPrefix(l, "http://127.0.0.1:9999/#pair") {
		t.Errorf("no gateway running, --listen: %s", l)
	}
}
