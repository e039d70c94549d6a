package server_test

// Issue 12.3: deliveries trust nothing they cannot verify. Each test
// reproduces an attack that main let through: a cross-site page posting
// text/plain, a reverse proxy that makes every visitor loopback (for POST
// /api/send and the Hermes Mobile deliver frame), a cross-site WebSocket.

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

func withDeliverToken(c *server.AppConfig) {
	c.Server.Mobile.DeliverTokens = []string{"deliver-secret"}
}

// postTo sends a request to addr's /api/send with the headers given.
func postTo(t *testing.T, addr, contentType string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/send", bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestSendRefusesCrossSitePages(t *testing.T) {
	g := testgw.Start(t, withDeliverToken)
	d := g.Dial(t, "laptop")
	attack := []byte(`{"chat_id":"default","text":"posted by another site"}`)
	// What Chromium sends for a page of another loopback origin (another
	// port) that posts with fetch(..., {mode: "no-cors"}) or a form: a
	// "simple" request, which it sends without asking first.
	page := map[string]string{"Origin": "http://127.0.0.1:9", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}
	if code, body := postTo(t, g.Addr, "text/plain;charset=UTF-8", attack, page); code != http.StatusForbidden {
		t.Fatalf("a cross-site text/plain POST: %d %s", code, body)
	}
	// An older browser sends Origin alone.
	if code, body := postTo(t, g.Addr, "text/plain", attack, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Fatalf("a cross-site POST with Origin only: %d %s", code, body)
	}
	// A form posting a file, from another site.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	mw.WriteField("chat_id", "default")
	fw, _ := mw.CreateFormFile("file", "big.bin")
	fw.Write(bytes.Repeat([]byte("x"), 64<<10))
	mw.Close()
	if code, body := postTo(t, g.Addr, mw.FormDataContentType(), form.Bytes(), page); code != http.StatusForbidden {
		t.Fatalf("a cross-site multipart POST: %d %s", code, body)
	}
	// Even a page that somehow had the delivery token is refused.
	withTok := map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer deliver-secret"}
	if code, body := postTo(t, g.Addr, "application/json", attack, withTok); code != http.StatusForbidden {
		t.Fatalf("a cross-site POST with the token: %d %s", code, body)
	}
	// JSON only as JSON: text/plain is what a page may send unasked.
	tok := map[string]string{"Authorization": "Bearer deliver-secret"}
	if code, body := postTo(t, g.Addr, "text/plain", attack, tok); code != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") {
		t.Fatalf("JSON as text/plain with the token: %d %s", code, body)
	}
	if code, body := postTo(t, g.Addr, "", attack, tok); code != http.StatusUnsupportedMediaType {
		t.Fatalf("JSON without a Content-Type: %d %s", code, body)
	}
	barrier(t, d)
	none(t, "the laptop", d.Seen, is(t, "message"))
	if left := stored(t, g); len(left) != 0 {
		t.Fatalf("a refused file was stored: %v", left)
	}

	// Our own page, and a script, are served.
	own := map[string]string{"Origin": "http://" + g.Addr, "Sec-Fetch-Site": "same-origin", "Authorization": "Bearer deliver-secret"}
	if code, body := postTo(t, g.Addr, "application/json", []byte(`{"chat_id":"default","text":"from our page"}`), own); code != http.StatusOK {
		t.Fatalf("our own page: %d %s", code, body)
	}
	if code, body := postTo(t, g.Addr, "application/json; charset=utf-8", []byte(`{"chat_id":"default","text":"from a script"}`), tok); code != http.StatusOK {
		t.Fatalf("a script with the token: %d %s", code, body)
	}
	d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "from a script" })
}

func TestSendThroughReverseProxyNeedsToken(t *testing.T) {
	g := testgw.Start(t, withDeliverToken)
	d := g.Dial(t, "laptop")
	// The proxy runs on this host and adds no header: every visitor it
	// forwards arrives from 127.0.0.1.
	proxy := reverseProxy(t, g, nil)
	attack := []byte(`{"chat_id":"default","text":"from the internet"}`)
	if code, body := postTo(t, proxy, "application/json", attack, nil); code != http.StatusForbidden || !strings.Contains(body, "delivery token") {
		t.Fatalf("through the proxy without a token: %d %s", code, body)
	}
	// Nor is loopback itself trusted, headers or not.
	if code, body := postTo(t, g.Addr, "application/json", attack, nil); code != http.StatusForbidden {
		t.Fatalf("from loopback without a token: %d %s", code, body)
	}
	barrier(t, d)
	none(t, "the laptop", d.Seen, is(t, "message"))

	tok := map[string]string{"Authorization": "Bearer deliver-secret"}
	if code, body := postTo(t, proxy, "application/json", []byte(`{"chat_id":"default","text":"with the token"}`), tok); code != http.StatusOK {
		t.Fatalf("through the proxy with the token: %d %s", code, body)
	}
	d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "with the token" })
	// The owner's own processes need no token: the admin socket.
	if a := postForm(t, g, nil, field("chat_id", "Default"), field("text", "local, by the channel's name")); a.status != http.StatusOK || a.ChatID != "default" {
		t.Fatalf("over the admin socket: %+v", a)
	}
	d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "local, by the channel's name" })
}

func TestMobileDeliverThroughReverseProxy(t *testing.T) {
	g := mobileGW(t, withDeliverToken)
	target := connectPhone(t, g, "tel-1")
	proxy := reverseProxy(t, g, nil)
	// A phone of the internet, through the proxy on the gateway's host: it
	// arrives from loopback with no forwarding header.
	far := helloPhone(t, dialPhoneVia(t, "ws://"+proxy+"/ws", nil), mhello(testgw.Token, "far", "Far"))
	far.wantError(map[string]any{"t": "deliver", "id": "d1", "target": "tel-1", "text": "spoofed cron"}, "forbidden")
	if fs := target.barrier(); countT(fs, "message") != 0 {
		t.Fatalf("the target got %s", mtypes(fs))
	}
	// A delivery service through the proxy, with its token.
	svc := helloPhone(t, dialPhoneVia(t, "ws://"+proxy+"/ws", nil), mhello("deliver-secret", "svc", "Svc"))
	svc.send(map[string]any{"t": "deliver", "id": "d2", "target": "tel-1", "text": "real cron"})
	if got := target.finalText("real cron"); got != "real cron" {
		t.Fatalf("delivered %q", got)
	}
}

func TestWebSocketRefusesCrossSitePages(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.AllowedOrigins = []string{"https://app.example"} })
	dial := func(origin, fetchSite string) (*websocket.Conn, int, error) {
		t.Helper()
		h := http.Header{"Origin": {origin}}
		if fetchSite != "" {
			h.Set("Sec-Fetch-Site", fetchSite)
		}
		ctx, cancel := contextWait()
		defer cancel()
		c, res, err := websocket.Dial(ctx, g.URL, &websocket.DialOptions{HTTPHeader: h})
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		if c != nil {
			t.Cleanup(func() { c.CloseNow() })
		}
		return c, code, err
	}
	for _, tc := range []struct{ origin, site string }{
		{"http://evil.example", "cross-site"}, {"http://127.0.0.1:9", "same-site"}, {"http://evil.example", ""}, {"null", ""},
	} {
		if _, code, err := dial(tc.origin, tc.site); err == nil || code != http.StatusForbidden {
			t.Fatalf("a page of %s (Sec-Fetch-Site %q) connected: %d %v", tc.origin, tc.site, code, err)
		}
	}
	for _, tc := range []struct{ origin, site string }{
		{"http://" + g.Addr, "same-origin"}, {"http://" + g.Addr, ""}, {"https://app.example", "cross-site"},
	} {
		if _, _, err := dial(tc.origin, tc.site); err != nil {
			t.Fatalf("a page of %s (Sec-Fetch-Site %q) was refused: %v", tc.origin, tc.site, err)
		}
	}
	// Behind a trusted proxy that rewrites Host, the host it was asked for
	// is the page's.
	tp := testgw.Start(t, func(c *server.AppConfig) { c.Server.TrustedProxies = mustPrefixes(t, "127.0.0.1") })
	proxy := reverseProxy(t, tp, func(pr *httputil.ProxyRequest) {
		pr.Out.Header.Set("X-Forwarded-Host", "chat.example")
	})
	ctx, cancel := contextWait()
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+proxy+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://chat.example"}}})
	if err != nil {
		t.Fatalf("the public origin through a trusted proxy: %v", err)
	}
	c.CloseNow()
}
