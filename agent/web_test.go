package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/irisgate/irisgate/internal/fakesearch"
	"github.com/irisgate/irisgate/internal/fakesearxng"
)

// page is a local web server counting the requests it gets.
type page struct {
	*httptest.Server
	hits atomic.Int32
}

func newPage(t *testing.T, addr string, h http.HandlerFunc) *page {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	p := &page{}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		h(w, r)
	}))
	p.Listener.Close()
	p.Listener = ln
	p.Start()
	t.Cleanup(p.Close)
	return p
}

const article = `<!DOCTYPE html><html><head><title>The  Gateway
 Notes</title><style>body{color:red}</style><script>var secret="in-the-script";</script></head>
<body><nav><a href="/">Home</a></nav><h1>Release notes</h1><p>Version <b>2</b> brings
MCP&nbsp;tools &amp; the web.</p><ul><li>First</li><li>Second <a href="/more?x=1">more</a></li></ul>
<noscript>enable javascript</noscript><svg><text>svg text</text></svg><pre>  keep
   this</pre><template><p>template text</p></template><p>Caf&eacute; ✓</p></body></html>`

// webEnv is a turn's tool environment whose approvals answer choice
// (and count what they were asked).
func webEnv(choice string) (*ToolEnv, *approver) {
	a := &approver{choice: choice}
	return &ToolEnv{Cwd: "/", Asker: a, emit: func(Event) {}}, a
}

type approver struct {
	choice  string
	asked   []Request
	granted map[string]bool
}

func (a *approver) Approve(context.Context, string, string) (string, error) { return a.choice, nil }
func (a *approver) Clarify(context.Context, string, []string) (string, error) {
	return "", fmt.Errorf("no")
}
func (a *approver) Mode() ApprovalMode { return "" }
func (a *approver) Granted(_ context.Context, g string) bool {
	return a.granted[g]
}
func (a *approver) Request(_ context.Context, r Request) (string, error) {
	a.asked = append(a.asked, r)
	if a.choice == "session" && r.Grant != "" {
		if a.granted == nil {
			a.granted = map[string]bool{}
		}
		a.granted[r.Grant] = true
	}
	return a.choice, nil
}

func webTools(cfg WebConfig) *Tools {
	ts := &Tools{}
	ts.List = WebTools(ts, cfg)
	return ts
}

func fetch(ts *Tools, env *ToolEnv, u string, kv ...any) string {
	args := map[string]any{"url": u}
	for i := 0; i+1 < len(kv); i += 2 {
		args[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(args)
	return ts.run(context.Background(), env, 1, ToolCall{ID: "f", Name: "web_fetch", Arguments: string(b)})
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// TestWebFetchReadableText: an HTML page becomes its title and readable
// text (headings, lists, links with their address, pre kept), with
// nothing of its scripts, styles, noscript, SVG or templates; the network
// approval shows the address and, given for the session, is not asked
// again.
func TestWebFetchReadableText(t *testing.T) {
	p := newPage(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, article)
	})
	ts := webTools(WebConfig{Allow: loopback})
	env, a := webEnv("session")
	out := fetch(ts, env, p.URL+"/notes#top")
	for _, want := range []string{"URL: " + p.URL + "/notes\n", "Title: The Gateway Notes", "# Release notes", "Version 2 brings MCP tools & the web.",
		"- First", "- Second more <" + p.URL + "/more?x=1>", "  keep\n   this", "Café ✓", "Home <" + p.URL + "/>"} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"in-the-script", "color:red", "enable javascript", "svg text", "template text", "<b>"} {
		if strings.Contains(out, not) {
			t.Errorf("the text holds %q:\n%s", not, out)
		}
	}
	if len(a.asked) != 1 || a.asked[0].Command != "fetch "+p.URL+"/notes" || a.asked[0].Grant != GrantNetwork {
		t.Fatalf("asked %+v", a.asked)
	}
	fetch(ts, env, p.URL+"/again")
	if len(a.asked) != 1 || p.hits.Load() != 2 {
		t.Fatalf("the session grant asked again (%d) or a fetch did not happen (%d)", len(a.asked), p.hits.Load())
	}
}

// TestWebFetchNeedsNetworkApproval: without a grant and no one to ask, or
// with the person denying, nothing is fetched.
func TestWebFetchNeedsNetworkApproval(t *testing.T) {
	p := newPage(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	ts := webTools(WebConfig{Allow: loopback})
	nobody := &ToolEnv{Cwd: "/", emit: func(Event) {}}
	if out := fetch(ts, nobody, p.URL); !strings.Contains(out, "denied") {
		t.Fatalf("with no one to ask: %q", out)
	}
	env, a := webEnv("deny")
	if out := fetch(ts, env, p.URL); !strings.Contains(out, "denied by the person") || len(a.asked) != 1 {
		t.Fatalf("denied: %q", out)
	}
	if n := p.hits.Load(); n != 0 {
		t.Fatalf("the server got %d requests", n)
	}
	once, _ := webEnv("once")
	if out := fetch(ts, once, p.URL); !strings.Contains(out, "hello") {
		t.Fatalf("allowed once: %q", out)
	}
	yolo := &ToolEnv{Cwd: "/", Yolo: true, emit: func(Event) {}}
	if out := fetch(ts, yolo, p.URL); !strings.Contains(out, "hello") {
		t.Fatalf("/yolo: %q", out)
	}
}

// TestWebFetchSSRF: by default loopback is refused at connect time, by
// address and by a name that resolves to it, even with /yolo; a redirect
// from an allowed address to a refused one is refused too, and the refused
// server never sees a request.
func TestWebFetchSSRF(t *testing.T) {
	p := newPage(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "the gateway's own page") })
	yolo := &ToolEnv{Cwd: "/", Yolo: true, emit: func(Event) {}}
	ts := webTools(WebConfig{})
	_, port, _ := net.SplitHostPort(p.Listener.Addr().String())
	for _, u := range []string{p.URL, "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		out := fetch(ts, yolo, u)
		if !strings.Contains(out, "does not reach loopback") || !strings.Contains(out, "127.0.0.1 is a loopback address") && !strings.Contains(out, "::1 is a loopback address") {
			t.Errorf("%s: %q", u, out)
		}
	}
	inner := newPage(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "inner") })
	hop := newPage(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/secret", http.StatusFound)
	})
	allowed := webTools(WebConfig{Allow: loopback})
	if out := fetch(allowed, yolo, hop.URL); !strings.Contains(out, "127.0.0.2 is a loopback address") {
		t.Errorf("redirect: %q", out)
	}
	if p.hits.Load() != 0 || inner.hits.Load() != 0 || hop.hits.Load() != 1 {
		t.Fatalf("hits: refused %d, inner %d, hop %d", p.hits.Load(), inner.hits.Load(), hop.hits.Load())
	}
	for _, bad := range []string{"file:///etc/passwd", "ftp://x/", "http://user:pw@example.com/", "http:///x", "javascript:alert(1)"} {
		if out := fetch(allowed, yolo, bad); !strings.HasPrefix(out, "error: ") {
			t.Errorf("%s: %q", bad, out)
		}
	}
}

func TestBlockedAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fc00::1", "fd12::1", "0.0.0.0", "::", "0.1.2.3", "100.64.0.1", "224.0.0.1", "ff02::1", "255.255.255.255",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::1", "2002:c0a8:101::1", "198.18.0.1", "240.0.0.1",
		"::127.0.0.1", "::169.254.169.254", "64:ff9b:1::a00:1", "64:ff9b:1:ffff::7f00:1"} {
		if blockedAddr(netip.MustParseAddr(a), nil) == nil {
			t.Errorf("%s is let through", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "172.32.0.1", "100.128.0.1", "::8.8.8.8", "64:ff9b:1::808:808"} {
		if err := blockedAddr(netip.MustParseAddr(a), nil); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	allow := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, a := range []string{"10.9.9.9", "::ffff:10.0.0.1", "::1"} {
		if err := blockedAddr(netip.MustParseAddr(a), allow); err != nil {
			t.Errorf("%s allowed: %v", a, err)
		}
	}
}

// TestWebFetchLimits: a page longer than the text cap comes in parts
// (start continues where the last part ended), a body past the byte cap is
// cut, and binary content is refused.
func TestWebFetchLimits(t *testing.T) {
	long := strings.Repeat("é", 3000) + "END"
	p := newPage(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/long":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, long)
		case "/huge":
			w.Header().Set("Content-Type", "text/plain")
			for range 100 {
				fmt.Fprint(w, strings.Repeat("x", 1000))
			}
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\n0000"))
		case "/latin1":
			w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
			w.Write([]byte("<p>caf\xe9</p>"))
		}
	})
	ts := webTools(WebConfig{Allow: loopback, MaxText: 4000, MaxBytes: 50_000})
	yolo := &ToolEnv{Cwd: "/", Yolo: true, emit: func(Event) {}}
	out := fetch(ts, yolo, p.URL+"/long")
	if !strings.Contains(out, "[… 1003 more characters: fetch again with start=2000]") || !utf8.ValidString(out) {
		t.Fatalf("first part: %q", out[len(out)-80:])
	}
	if out := fetch(ts, yolo, p.URL+"/long", "start", 2000); !strings.HasSuffix(out, "ééEND") || strings.Contains(out, "more characters") {
		t.Fatalf("second part: %q", out[len(out)-40:])
	}
	if out := fetch(ts, yolo, p.URL+"/huge", "start", 49_000); !strings.Contains(out, "[the page was cut at 50000 bytes]") {
		t.Fatalf("huge: %q", out[len(out)-60:])
	}
	if out := fetch(ts, yolo, p.URL+"/png"); !strings.Contains(out, "is image/png") {
		t.Fatalf("png: %q", out)
	}
	if out := fetch(ts, yolo, p.URL+"/latin1"); !strings.Contains(out, "café") {
		t.Fatalf("latin1: %q", out)
	}
}

// TestWebSearchSearXNG: web_search asks a SearXNG instance's JSON API and
// lists its results; the instance's quirks come back as clear errors.
func TestWebSearchSearXNG(t *testing.T) {
	sx := fakesearxng.New(t,
		fakesearxng.Result{URL: "https://go.dev/doc/", Title: "Documentation - The Go Programming Language", Content: "The Go programming language is an <em>open source</em> project."},
		fakesearxng.Result{URL: "https://pkg.go.dev/", Title: "Go Packages", Content: "Search for Go packages."},
		fakesearxng.Result{URL: "https://go.dev/tour/", Title: "A Tour of Go", Content: "Welcome."},
	)
	s, err := NewSearch(SearchConfig{Provider: "searxng", URL: sx.URL})
	if err != nil {
		t.Fatal(err)
	}
	ts := webTools(WebConfig{Search: s})
	if ts.find("web_search") == nil || !strings.Contains(ts.find("web_search").Description, "SearXNG") {
		t.Fatal("web_search is not offered with a provider")
	}
	env, a := webEnv("deny")
	run := func(args string) string {
		return ts.run(context.Background(), env, 1, ToolCall{ID: "s", Name: "web_search", Arguments: args})
	}
	out := run(`{"query":"golang docs","count":2}`)
	want := "1. Documentation - The Go Programming Language\n   https://go.dev/doc/\n   The Go programming language is an open source project.\n2. Go Packages\n   https://pkg.go.dev/\n   Search for Go packages.\n"
	if out != want || len(a.asked) != 0 {
		t.Fatalf("results:\n%s\nasked %v", out, a.asked)
	}
	if q := sx.Queries(); len(q) != 1 || q[0] != "golang docs" {
		t.Fatalf("queries %q", q)
	}
	sx.FailEngines([2]string{"google", "timeout"}, [2]string{"bing", "CAPTCHA"})
	if out := run(`{"query":"x"}`); !strings.Contains(out, "engines failed (google: timeout, bing: CAPTCHA)") {
		t.Fatalf("failed engines: %q", out)
	}
	sx.SetJSON(false)
	if out := run(`{"query":"x"}`); !strings.Contains(out, "add json to search.formats") {
		t.Fatalf("403: %q", out)
	}
	if webTools(WebConfig{}).find("web_search") != nil {
		t.Fatal("web_search is offered without a provider")
	}
}

// TestWebSearchBraveTavily: the other two providers, against fakes of
// their APIs (internal/fakesearch), are asked as they want (key header,
// parameters, body) and read from their JSON; each refusal a person must
// act on (a wrong key, a rate limit, a plan's quota, a query too long)
// comes back saying so.
func TestWebSearchBraveTavily(t *testing.T) {
	hits := []fakesearch.Result{
		{Title: "Go", URL: "https://go.dev/", Snippet: "The Go programming language"},
		{Title: "Go Packages", URL: "https://pkg.go.dev/", Snippet: "Search Go packages"},
		{Title: "Tour", URL: "https://go.dev/tour/", Snippet: "A tour of Go"},
		{Title: "Blog", URL: "https://go.dev/blog/", Snippet: "The Go blog"},
	}
	brave := fakesearch.NewBrave(t, "bk", hits...)
	tavily := fakesearch.NewTavily(t, "tvly-k", hits...)
	search := func(provider, url, key, query string) string {
		t.Helper()
		s, err := NewSearch(SearchConfig{Provider: provider, URL: url, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		args, _ := json.Marshal(map[string]any{"query": query, "count": 3})
		return webTools(WebConfig{Search: s}).run(context.Background(), &ToolEnv{emit: func(Event) {}}, 1, ToolCall{ID: "s", Name: "web_search", Arguments: string(args)})
	}
	want := "1. Go\n   https://go.dev/\n   The Go programming language\n2. Go Packages\n   https://pkg.go.dev/\n   Search Go packages\n3. Tour\n   https://go.dev/tour/\n   A tour of Go\n"
	long, wordy := strings.Repeat("é", 401), strings.TrimSpace(strings.Repeat("go ", 51))
	for _, c := range []struct{ provider, key, query, want string }{
		{"brave", "bk", "Go", want}, // Brave's <strong>Go</strong> read as text
		{"brave", "wrong", "Go", "error: Brave Search refused the API key (422 SUBSCRIPTION_TOKEN_INVALID): The provided subscription token is invalid."},
		{"brave", "bk", long, "error: Brave Search takes queries of at most 400 characters: this one has 401"},
		{"brave", "bk", wordy, "error: Brave Search takes queries of at most 50 words: this one has 51"},
		{"tavily", "tvly-k", "Go", want},
		{"tavily", "wrong", "Go", "error: Tavily refused the API key (401): Unauthorized: missing or invalid API key."},
		{"tavily", "tvly-k", long, "error: Tavily takes queries of at most 400 characters: this one has 401"},
	} {
		url := map[string]string{"brave": brave.URL, "tavily": tavily.URL}[c.provider]
		if out := search(c.provider, url, c.key, c.query); out != c.want {
			t.Errorf("%s %s %.20q:\n%s\nwant\n%s", c.provider, c.key, c.query, out, c.want)
		}
	}
	if q := brave.Queries(); len(q) != 1 || q[0] != "Go" {
		t.Errorf("Brave was asked %q", q)
	}
	if b := tavily.Bodies(); len(b) != 1 || b[0]["query"] != "Go" || b[0]["max_results"] != 3.0 {
		t.Errorf("Tavily was sent %v", b)
	}
	for _, c := range []struct {
		limit          func()
		provider, want string
	}{
		{func() { brave.Limit("RATE_LIMITED") }, "brave", "error: Brave Search is rate-limiting (429 RATE_LIMITED): try again later"},
		{func() { brave.Limit("QUOTA_LIMITED") }, "brave", "error: Brave Search: the plan's monthly quota is used up (429 QUOTA_LIMITED): Request quota limit exceeded for plan."},
		{func() { tavily.Refuse(429) }, "tavily", "error: Tavily is rate-limiting (429): try again later"},
		{func() { tavily.Refuse(432) }, "tavily", "error: Tavily: the plan's usage limit is reached (432): This request exceeds your plan's set usage limit."},
		{func() { tavily.Refuse(433) }, "tavily", "error: Tavily: the pay-as-you-go limit is reached (433): This request exceeds the pay-as-you-go limit."},
	} {
		c.limit()
		key, url := "bk", brave.URL
		if c.provider == "tavily" {
			key, url = "tvly-k", tavily.URL
		}
		if out := search(c.provider, url, key, "Go"); !strings.HasPrefix(out, c.want) {
			t.Errorf("%s:\n%s\nwant\n%s", c.provider, out, c.want)
		}
	}
	brave.Limit("")
	if out := search("brave", fakesearch.NewBrave(t, "bk").URL, "bk", "nothing at all"); out != "No results for nothing at all." {
		t.Errorf("Brave without results (no web key): %q", out)
	}
	for _, bad := range []SearchConfig{{Provider: "searxng"}, {Provider: "brave"}, {Provider: "bing", Key: "k"}, {Provider: "searxng", URL: "ftp://x"}} {
		if _, err := NewSearch(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func FuzzHTMLText(f *testing.F) {
	f.Add(article, 1000)
	f.Add("<script>x<script>y</script>z", 10)
	f.Add("<svg><svg></svg>a</svg>b<pre>\n\n\n</pre>", 3)
	f.Fuzz(func(t *testing.T, doc string, limit int) {
		limit = 1 + abs(limit)%5000
		base, _ := url.Parse("https://example.com/a/")
		title, text := htmlText(strings.NewReader(doc), base, limit)
		if len(text) > limit || !utf8.ValidString(text) || len(title) > 310 {
			t.Fatalf("limit %d: %d bytes, valid %v, title %d", limit, len(text), utf8.ValidString(text), len(title))
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n {
			return 0
		}
		return -n
	}
	return n
}

func FuzzParseSearch(f *testing.F) {
	f.Add("searxng", `{"query":"q","number_of_results":0,"results":[{"url":"https://a","title":"<b>A</b>","content":"x"}],"unresponsive_engines":[["google","timeout"]]}`)
	f.Add("brave", `{"web":{"results":[{"title":"B","url":"https://b","description":"d &amp; <strong>e</strong>"}]}}`)
	f.Add("tavily", `{"results":[{"title":"T","url":"https://t","content":"c","score":1}]}`)
	f.Add("searxng", `{"results":[],"unresponsive_engines":[["a"],[],["b","c","d"]]}`)
	f.Add("brave", `{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid."}}`)
	f.Add("brave", `{"type":"ErrorResponse","errors":[{"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan."}]}`)
	f.Add("tavily", `{"detail":{"error":"Query is too long. Max query length is 400 characters."}}`)
	f.Fuzz(func(t *testing.T, kind, body string) {
		if kind != "searxng" && kind != "brave" && kind != "tavily" {
			return
		}
		if code, detail := providerDetail([]byte(body)); len(code) > 45 || len(detail) > 305 || !utf8.ValidString(code+detail) {
			t.Fatalf("an error's code %q and detail %q", code, detail)
		}
		res, err := parseSearch(kind, []byte(body), 5)
		if err != nil {
			return
		}
		if len(res) > 5 {
			t.Fatalf("%d results", len(res))
		}
		for _, r := range res {
			if len(r.Title) > 210 || len(r.Snippet) > 510 || len(r.URL) > 510 || !utf8.ValidString(r.Title+r.Snippet) {
				t.Fatalf("unbounded %+v", r)
			}
		}
	})
}
