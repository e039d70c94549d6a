package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Step is how long one browser step may take.
const Step = 15 * time.Second

// chromium finds the browser: $CHROMIUM when set, else Debian's
// /usr/bin/chromium or one on the PATH. Without one the test is skipped, or
// fails when CI is set.
func chromium(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("CHROMIUM")}
	if cands[0] == "" {
		cands = append(cands, "/usr/bin/chromium")
		for _, n := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(n); err == nil {
				cands = append(cands, p)
			}
		}
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c
		}
	}
	msg := "the web app's browser tests need Chromium: none at $CHROMIUM, /usr/bin/chromium or on the PATH " +
		"(install Debian's package: apt-get install chromium; .ci/run does)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so this is a failure")
	}
	t.Skip(msg + "; skipped because CI is not set")
	return ""
}

// browser is one headless Chromium tab.
type browser struct {
	t      *testing.T
	ctx    context.Context
	shots  string // where screenshots go
	width  int64
	height int64
	dark   bool

	mu     sync.Mutex
	errors []string // uncaught exceptions in the page
}

// newBrowser starts Chromium with a fresh profile, with the flags this
// machine needs: no sandbox (root), no GPU, and no background networking
// (the machine's network is closed). Its screenshots go to
// testdata/artifacts/webtest/.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	return newBrowserIn(t, "")
}

// newBrowserIn is newBrowser with the screenshots in a folder of their own
// below testdata/artifacts/webtest/, so tests do not clear each other's.
func newBrowserIn(t *testing.T, sub string) *browser {
	t.Helper()
	path := chromium(t)
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("hide-scrollbars", true), chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, width: 1280, height: 800}
	// The first Run starts the browser; it must not have a timeout.
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	t.Cleanup(func() { cancelTab(); cancelAlloc() })

	shots, err := filepath.Abs(filepath.Join("..", "testdata", "artifacts", "webtest", sub))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b.shots = shots
	old, _ := filepath.Glob(filepath.Join(shots, "*.png"))
	for _, f := range old { // screenshots of an earlier run, failures included
		os.Remove(f)
	}

	// The page's console and exceptions go to the test log; an uncaught
	// exception fails the test at the end.
	logCtx, stopLog := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stopLog(); wg.Wait() })
	console := chromedp.Events(logCtx, runtime.ConsoleAPICalled)
	exceptions := chromedp.Events(logCtx, runtime.ExceptionThrown)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev, err := range console {
			if err != nil {
				return
			}
			var parts []string
			for _, a := range ev.Args {
				if len(a.Value) > 0 {
					parts = append(parts, strings.Trim(string(a.Value), `"`))
				} else {
					parts = append(parts, a.Description)
				}
			}
			t.Logf("console.%s: %s", ev.Type, strings.Join(parts, " "))
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg = d.Exception.Description
			}
			t.Logf("page exception: %s (%s:%d)", msg, d.URL, d.LineNumber)
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.errors) > 0 {
			t.Errorf("the page threw %d uncaught exceptions, the first: %s", len(b.errors), b.errors[0])
		}
	})
	return b
}

// recordSent records the WebSocket frames the page sends from now on, as
// the browser's network log sees them (nothing in the page is patched);
// the function returned gives the JSON frames sent so far.
func (b *browser) recordSent() func() []map[string]any {
	b.t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	var mu sync.Mutex
	var frames []map[string]any
	sent := chromedp.Events(ctx, network.WebSocketFrameSent) // subscribed before the domain is on
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range sent {
			if err != nil {
				return
			}
			var f map[string]any
			if ev.Response != nil && ev.Response.Opcode == 1 && json.Unmarshal(ev.Response.PayloadData, &f) == nil {
				mu.Lock()
				frames = append(frames, f)
				mu.Unlock()
			}
		}
	}()
	b.t.Cleanup(func() { cancel(); <-done })
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.Enable, network.EnableParams{})
		return err
	}))
	return func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), frames...)
	}
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Step)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail("browser step failed: %v", err)
	}
}

// eval runs JavaScript (awaiting a promise) and decodes its result.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("evaluating %q: %v", truncate(js, 200), err)
	}
	return v
}

// wait polls a JavaScript condition until it is truthy.
func (b *browser) wait(what, cond string) {
	b.t.Helper()
	b.waitFor(what, cond, Step)
}

func (b *browser) waitFor(what, cond string, d time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(40*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil {
		b.fail("waiting for %s: %v", what, err)
	}
}

// click clicks the first element matching sel. A node the page replaced
// between the query and the click is looked up again.
func (b *browser) click(sel string) {
	b.t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(b.ctx, Step)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return
		}
		if try < 3 && strings.Contains(err.Error(), "Could not find node") {
			continue
		}
		b.fail("clicking %s: %v", sel, err)
	}
}

// enter presses Enter the way a keyboard does: SendKeys' "\r" also sends a
// char event, which inserts a newline even when the page cancelled the
// keydown, as a composer that sends on Enter does.
var enter = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, input.DispatchKeyEventParams{
			Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
		})
		if err != nil {
			return err
		}
	}
	return nil
})

// wheel turns the mouse wheel over the middle of the element sel, as a
// person scrolling does (dy < 0: up), and waits for the page to scroll.
func (b *browser) wheel(sel string, dy float64) {
	b.t.Helper()
	r := eval[[]float64](b, `(() => { const r = document.querySelector(`+js(sel)+`).getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()`)
	before := eval[float64](b, `document.querySelector(`+js(sel)+`).scrollTop`)
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, wheelEvent, wheelParams{Type: input.DispatchMouseEventTypeMouseWheel, X: r[0], Y: r[1], DeltaY: dy})
		return err
	}))
	b.wait("the wheel to scroll "+sel, fmt.Sprintf(`document.querySelector(%s).scrollTop !== %v`, js(sel), before))
	b.still(sel)
}

// still waits until the element sel has stopped scrolling (a wheel's or a
// smooth scroll is animated): five frames without a change.
func (b *browser) still(sel string) {
	b.t.Helper()
	eval[bool](b, `new Promise(r => { const t = document.querySelector(`+js(sel)+`); let last = t.scrollTop, still = 0;
		const f = () => { if (t.scrollTop === last) { if (++still >= 5) return r(true); } else { still = 0; last = t.scrollTop; } requestAnimationFrame(f); };
		requestAnimationFrame(f); })`)
}

// wheelParams are Input.dispatchMouseEvent's for a wheel: the protocol
// wants both deltas, which cdproto's type omits when zero.
type wheelParams struct {
	Type   input.DispatchMouseEventType `json:"type"`
	X      float64                      `json:"x"`
	Y      float64                      `json:"y"`
	DeltaX float64                      `json:"deltaX"`
	DeltaY float64                      `json:"deltaY"`
}

var wheelEvent = cdp.Command[wheelParams, cdp.Empty]{Method: input.CommandDispatchMouseEvent}

func (b *browser) typeIn(sel, text string) {
	b.t.Helper()
	b.click(sel)
	b.do(chromedp.SendKeys(chromedp.CSS(sel), text))
}

// fail saves a screenshot and the visible text before failing.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		name := filepath.Join(b.shots, "FAILED-"+strings.ReplaceAll(b.t.Name(), "/", "_")+".png")
		os.WriteFile(name, png, 0o644)
		b.t.Logf("screenshot of the failure: %s", name)
	}
	if txt, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`)); err == nil {
		b.t.Logf("page text:\n%s", txt)
	}
	b.t.Fatalf(format, args...)
}

// viewport sets the window size and the colour scheme.
func (b *browser) viewport(w, h int64, dark bool) {
	b.t.Helper()
	b.width, b.height, b.dark = w, h, dark
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	b.do(chromedp.EmulateViewport(w, h), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	}))
}

// shot saves a screenshot of the viewport under testdata/artifacts/webtest.
func (b *browser) shot(name string) string {
	b.t.Helper()
	// Let animations and late layout settle.
	eval[bool](b, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => r(true), 150))))`)
	ctx, cancel := context.WithTimeout(b.ctx, Step)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.fail("screenshot %s: %v", name, err)
	}
	mode := "light"
	if b.dark {
		mode = "dark"
	}
	file := filepath.Join(b.shots, fmt.Sprintf("%s-%dx%d-%s.png", name, b.width, b.height, mode))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", file)
	return file
}

// js quotes a Go string for JavaScript.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// auditJS finds controls without an accessible name, fields without a
// label, and visible text below WCAG AA contrast (4.5:1, 3:1 when large)
// against the background it is drawn on. Disabled controls are exempt, as
// in WCAG.
const auditJS = `(() => {
  const problems = [];
  const visible = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
  const desc = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\s+/).join('.') : '');
  for (const b of document.querySelectorAll('button, a[href], [role=option]')) {
    if (!visible(b)) continue;
    const name = (b.getAttribute('aria-label') || b.textContent || b.title || '').trim();
    if (!name) problems.push('no accessible name: ' + desc(b));
  }
  for (const f of document.querySelectorAll('input, select, textarea')) {
    if (f.type === 'hidden' || f.hidden || !visible(f)) continue;
    if (!(f.labels && f.labels.length) && !f.getAttribute('aria-label') && !f.getAttribute('aria-labelledby')) problems.push('no label: ' + desc(f));
  }
  const rgba = (s) => { const m = s.match(/[\d.]+/g) || [0, 0, 0, 0]; return [+m[0], +m[1], +m[2], m[3] === undefined ? 1 : +m[3]]; };
  const lum = ([r, g, b]) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bgOf = (e) => {
    for (let n = e; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c[3] > 0.5) return c;
      if (n.tagName === 'DIALOG' || n === document.documentElement) break;
    }
    return rgba(getComputedStyle(document.body).backgroundColor);
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let t; (t = walker.nextNode());) {
    const e = t.parentElement;
    if (!e || seen.has(e) || !t.textContent.trim() || !visible(e)) continue;
    seen.add(e);
    if (e.closest('[disabled], [aria-hidden=true], .sr-only, dialog:not([open])')) continue;
    const cs = getComputedStyle(e);
    const fg = rgba(cs.color), bg = bgOf(e);
    const a = lum(fg), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const px = parseFloat(cs.fontSize), bold = +cs.fontWeight >= 700;
    const need = px >= 24 || (bold && px >= 18.66) ? 3 : 4.5;
    if (ratio < need) problems.push('contrast ' + ratio.toFixed(2) + ' < ' + need + ': ' + desc(e) + ' "' + t.textContent.trim().slice(0, 30) + '"');
  }
  return problems;
})()`

// audit fails the test on accessibility problems in what is on screen.
func (b *browser) audit(where string) {
	b.t.Helper()
	if problems := eval[[]string](b, auditJS); len(problems) > 0 {
		b.t.Errorf("accessibility problems (%s, %dpx, dark=%v):\n  %s", where, b.width, b.dark, strings.Join(problems, "\n  "))
	}
}
