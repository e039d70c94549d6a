package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// localHTTP is an HTTP client of g's admin socket: a process of the
// gateway's own user on its machine, as irisgate send is. Its requests'
// host is ignored.
func localHTTP(g *testgw.GW) *http.Client {
	sock := g.App.AdminSocket()
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// dialPhoneLocal opens a Hermes Mobile socket over g's admin socket.
func dialPhoneLocal(t testing.TB, g *testgw.GW) *phone {
	t.Helper()
	return dialPhoneVia(t, "ws://irisgate/ws", &websocket.DialOptions{HTTPClient: localHTTP(g)})
}

// reverseProxy starts a real reverse proxy (net/http/httputil) in front of
// g, configured as a proxy often is: it forwards requests and WebSocket
// upgrades, and adds no forwarding header of its own. rewrite, when not
// nil, edits each outgoing request (to name the client, say). It returns
// the proxy's host:port.
func reverseProxy(t testing.TB, g *testgw.GW, rewrite func(*httputil.ProxyRequest)) string {
	t.Helper()
	target, _ := url.Parse("http://" + g.Addr)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target) // with Rewrite, X-Forwarded-* are dropped, none added
		if rewrite != nil {
			rewrite(pr)
		}
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// dialRawURL is dialRaw to another address, with options.
func dialRawURL(t *testing.T, url string, opts *websocket.DialOptions) *raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &raw{t: t, ws: ws}
}

// logBuffer collects a gateway's log lines (and passes them to t.Log).
type logBuffer struct {
	t  testing.TB
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// capture sends a gateway's log (info and above) to a logBuffer.
func capture(t testing.TB) (*logBuffer, func(*server.AppConfig)) {
	l := &logBuffer{t: t}
	return l, func(c *server.AppConfig) {
		c.Log = slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
}

// metric reads one series' value from g's /metrics (0 when absent).
func metric(t testing.TB, g *testgw.GW, series string) float64 {
	t.Helper()
	res, err := http.Get("http://" + g.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", series, line)
			}
			return f
		}
	}
	return 0
}

func contextWait() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), testgw.Wait)
}

func mustPrefixes(t testing.TB, list ...string) []netip.Prefix {
	t.Helper()
	p, err := server.ParseTrustedProxies(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
