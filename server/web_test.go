package server_test

// Issue 19, item 4: the web tools through the gateway, against a local
// web server and a fake SearXNG.

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/internal/fakesearxng"
)

func webStart(t *testing.T, cfg agent.WebConfig) *agRig {
	return agStart(t, agWithModel(func(mc *agent.ModelConfig) {
		mc.Tools.List = append(mc.Tools.List, agent.WebTools(mc.Tools, cfg)...)
	}))
}

// TestWebFetchAsksForTheNetwork: web_fetch asks with the network picker
// the terminal uses; a denial fetches nothing, "session" lets the next
// fetches through unasked. The gateway's own address stays out of reach
// without --web-allow, whatever the person answers.
func TestWebFetchAsksForTheNetwork(t *testing.T) {
	var hits atomic.Int32
	// The page is on 127.0.0.2, which the owner allows; the gateway
	// listens on 127.0.0.1, which stays refused.
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<title>Local page</title><script>no()</script><p>Hello from the page.</p>")
	}))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	site.Listener.Close()
	site.Listener = ln
	site.Start()
	defer site.Close()
	r := webStart(t, agent.WebConfig{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	r.sbCall("web_fetch", "url", site.URL+"/a")
	r.reply("denied")
	a := r.dial("phone")
	send(t, a, def, "read the page")
	p := sbApproval(t, a)
	if p.Command != "fetch "+site.URL+"/a" || !strings.Contains(p.Description, "network") {
		t.Fatalf("the picker shows %+v", p)
	}
	selectChoice(t, a, p.PickerID, "deny")
	if e := endOf(t, until(t, a, is(t, "agent.idle"))); *e.OK || hits.Load() != 0 {
		t.Fatalf("denied: %+v, %d hits", e, hits.Load())
	}

	r.sbCall("web_fetch", "url", site.URL+"/a")
	r.sbCall("web_fetch", "url", site.URL+"/b")
	r.reply("read twice")
	send(t, a, def, "read it now")
	p = sbApproval(t, a)
	selectChoice(t, a, p.PickerID, "session")
	got := until(t, a, is(t, "agent.idle"))
	if n := len(agOnly(got, "picker.approval")); n != 0 || hits.Load() != 2 {
		t.Fatalf("%d more pickers, %d hits", n, hits.Load())
	}
	reqs := r.requests(5)
	if !agSaid(t, reqs[3], "tool", "Title: Local page") || !agSaid(t, reqs[3], "tool", "Hello from the page.") || agSaid(t, reqs[3], "tool", "no()") {
		t.Fatalf("the model read %v", agLast(t, reqs[3]))
	}

	gw := "http://" + r.g.Addr + "/"
	r.sbCall("web_fetch", "url", gw)
	r.reply("refused")
	got = agTurn(t, a, def, "read the gateway")
	if e := endOf(t, got); *e.OK || !strings.Contains(e.Output, "loopback") {
		t.Fatalf("the gateway's own port: %+v", e)
	}
}

// TestWebSearchThroughGateway: web_search asks the configured SearXNG and
// the model reads the results.
func TestWebSearchThroughGateway(t *testing.T) {
	sx := fakesearxng.New(t, fakesearxng.Result{URL: "https://example.org/irisgate", Title: "irisgate", Content: "A self-hosted gateway."})
	s, err := agent.NewSearch(agent.SearchConfig{Provider: "searxng", URL: sx.URL})
	if err != nil {
		t.Fatal(err)
	}
	r := webStart(t, agent.WebConfig{Search: s, NoFetch: true})
	r.sbCall("web_search", "query", "irisgate gateway")
	r.reply("found it")
	a := r.dial("phone")
	got := agTurn(t, a, def, "search")
	if e := endOf(t, got); !*e.OK || !strings.Contains(e.Output, "https://example.org/irisgate") {
		t.Fatalf("end %+v", e)
	}
	reqs := r.requests(2)
	if !agOffers(reqs[0], "web_search") || agOffers(reqs[0], "web_fetch") || !agSaid(t, reqs[1], "tool", "A self-hosted gateway.") {
		t.Fatalf("the model was offered / read: %v", agLast(t, reqs[1]))
	}
	if q := sx.Queries(); len(q) != 1 || q[0] != "irisgate gateway" {
		t.Fatalf("queries %q", q)
	}
}
