package webtest

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/testgw"
)

// TestServesApp checks the HTTP side without a browser: the shell, the
// generated service worker, and the headers.
func TestServesApp(t *testing.T) {
	gw := testgw.Start(t)
	base := "http://" + gw.Addr
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(res.Body)
		return res, buf.String()
	}
	res, body := get("/")
	if res.StatusCode != 200 || !strings.Contains(body, `<script type="module" src="js/main.js">`) || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("no CSP on the page: %q", res.Header.Get("Content-Security-Policy"))
	}
	res, body = get("/sw.js")
	if res.StatusCode != 200 || strings.Contains(body, "__VERSION__") || strings.Contains(body, "__SHELL__") || !strings.Contains(body, `"js/main.js"`) {
		t.Fatalf("GET /sw.js = %d, placeholders not filled:\n%s", res.StatusCode, truncate(body, 400))
	}
	res, _ = get("/manifest.webmanifest")
	if res.Header.Get("Content-Type") != "application/manifest+json" {
		t.Fatalf("manifest type %q", res.Header.Get("Content-Type"))
	}
	res, _ = get("/js/nothing-here.js")
	if res.StatusCode != 404 {
		t.Fatalf("an unknown path answered %d", res.StatusCode)
	}
	res, _ = get("/healthz")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("/healthz is shadowed by the app: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	req, _ := http.NewRequest("GET", base+"/css/app.css", nil)
	first, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	req.Header.Set("If-None-Match", first.Header.Get("ETag"))
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Fatalf("a revalidation with the ETag answered %d", again.StatusCode)
	}
}
