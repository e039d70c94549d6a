package webtest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// What the browser tests share: a gateway with a model behind a proxy,
// and reading the page.

// env is a gateway whose agent is the real model backend talking to a
// fake OpenAI server, reached by the browser through a proxy the test can
// cut.
type env struct {
	gw    *testgw.GW
	proxy *testgw.Proxy
	fake  *fakeopenai.Server
	work  string // the agent's working directory
	base  string // the app's address, through the proxy
}

func startEnv(t *testing.T) *env {
	t.Helper()
	fake := fakeopenai.New(t)
	tools := &agent.Tools{Policy: &agent.Policy{Rules: agent.DefaultRules()}}
	tools.List = agent.Builtin(tools)
	model, err := agent.NewModel(agent.ModelConfig{
		Providers: []agent.Provider{{ID: "fake", Label: "Fake", BaseURL: fake.URL, APIKey: "k",
			Models: []agent.ModelInfo{{ID: "fake-model", Label: "Fake model", ContextLength: 8000}}}},
		Tools: tools, MaxRetries: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	gw := testgw.Start(t, func(c *server.AppConfig) {
		c.Agent = model
		c.Workdir = work
		c.AskTimeout = time.Minute
	})
	p := gw.NewProxy(t)
	base := "http://" + strings.TrimSuffix(strings.TrimPrefix(p.URL, "ws://"), "/ws") + "/"
	return &env{gw: gw, proxy: p, fake: fake, work: work, base: base}
}

// Counting what the page shows.
const countJS = `(text, sel) => [...document.querySelectorAll(sel || '.items > li.msg')].filter(e => (e.querySelector('.text')?.textContent || '').trim() === text).length`

func (b *browser) count(text string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`(%s)(%s)`, countJS, js(text)))
}

func (b *browser) waitText(what, text string) {
	b.t.Helper()
	b.wait(what, fmt.Sprintf(`(%s)(%s) > 0`, countJS, js(text)))
}

func (b *browser) waitFinal(text string) {
	b.t.Helper()
	b.wait("the reply "+js(text), fmt.Sprintf(`[...document.querySelectorAll('.items > li.msg.assistant[data-status=done] .text')].some(e => e.textContent.trim() === %s)`, js(text)))
}

func (b *browser) send(text string) {
	b.t.Helper()
	b.typeIn("#composer-input", text)
	b.do(enter)
}

// menu opens an options menu once no other dialog is still closing.
func (b *browser) menu(label string) {
	b.t.Helper()
	b.wait("no dialog open", `!document.querySelector('dialog')`)
	b.click(`button[aria-label=` + js(label) + `]`)
	b.wait("the menu", `!!document.querySelector('dialog.sheet[open]')`)
}

func (b *browser) connState() string {
	b.t.Helper()
	return eval[string](b, `document.querySelector('.conn-dot').dataset.state`)
}

func (b *browser) waitOnline() {
	b.t.Helper()
	b.wait("the connection to be online", `document.querySelector('.conn-dot')?.dataset.state === 'online'`)
}

// checkOnce proves nothing was lost or doubled: every message the page
// shows once, the offline exchange complete, and (when d is given) every
// message in the gateway's history on the page exactly once.
func checkOnce(t *testing.T, b *browser, d *testgw.Device, lane client.Lane) {
	t.Helper()
	dups := eval[[]string](b, `(() => { const seen = new Set(), dup = []; for (const e of document.querySelectorAll('.items > li[data-key]')) { if (seen.has(e.dataset.key)) dup.push(e.dataset.key); seen.add(e.dataset.key); } return dup; })()`)
	if len(dups) > 0 {
		t.Fatalf("items shown twice: %v", dups)
	}
	for _, s := range []string{"offline-1", "offline-2", "offline-3", "reply-1", "reply-2", "reply-3", "sent while offline", "reply-to-queued", "Hello there"} {
		if n := b.count(s); n != 1 {
			t.Fatalf("%q shows %d times, want once", s, n)
		}
	}
	if n := b.count("to-be-deleted"); n != 0 {
		t.Fatalf("the message deleted while offline still shows (%d)", n)
	}
	if b.count("sent while offline") == 1 && !eval[bool](b, `[...document.querySelectorAll('.items > li.msg.user')].some(e => e.textContent.includes('sent while offline') && e.dataset.status !== 'pending')`) {
		t.Fatal("the message queued offline is still waiting")
	}
	if d != nil {
		checkHistory(t, b, d, lane)
	}
}

// checkHistory proves the page shows every message of the gateway's
// history for the lane exactly once, in the gateway's order.
func checkHistory(t *testing.T, b *browser, d *testgw.Device, lane client.Lane) {
	t.Helper()
	h := d.MustDo("history", lane, map[string]any{"limit": 200})
	var page struct {
		Messages []struct {
			ID string `json:"message_id"`
		} `json:"messages"`
	}
	if err := h.Decode(&page); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range page.Messages {
		if n := eval[int](b, `document.querySelectorAll('.items > li[data-key=`+js(m.ID)+`]').length`); n != 1 {
			t.Fatalf("history message %s shows %d times", m.ID, n)
		}
		want = append(want, m.ID)
	}
	// And in the gateway's order.
	got := eval[[]string](b, `(() => { const ids = new Set(`+jsList(want)+`); return [...document.querySelectorAll('.items > li[data-key]')].map(e => e.dataset.key).filter(k => ids.has(k)); })()`)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the page shows the conversation in another order than the gateway's history:\n got %v\nwant %v", got, want)
	}
}

func jsList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = js(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// testPNG is a small image with some colour, for the preview.
func testPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for y := 0; y < 32; y++ {
		for x := 0; x < 48; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 5), uint8(y * 8), 200, 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	return buf.Bytes()
}
