package webtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/store"
)

// deliver posts a text (and optionally a PNG) into a lane through the
// gateway's /api/send, as `irisgate send` does, and returns the message id.
func (e *env) deliver(t *testing.T, chatID, text string, pic []byte) string {
	t.Helper()
	var req *http.Request
	if pic == nil {
		body, _ := json.Marshal(map[string]any{"chat_id": chatID, "text": text})
		req, _ = http.NewRequest(http.MethodPost, "http://"+e.gw.Addr+"/api/send", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mw.WriteField("chat_id", chatID)
		mw.WriteField("text", text)
		fw, _ := mw.CreateFormFile("file", "chart.png")
		fw.Write(pic)
		mw.Close()
		req, _ = http.NewRequest(http.MethodPost, "http://"+e.gw.Addr+"/api/send", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
	}
	// Through the admin socket, as irisgate send on the gateway's machine
	// (over TCP a delivery token would be needed).
	sock := e.gw.App.AdminSocket()
	local := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	res, err := local.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ok struct {
		MessageID string `json:"message_id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&ok); err != nil || res.StatusCode != 200 || ok.MessageID == "" {
		t.Fatalf("delivering %q: %d %v", text, res.StatusCode, err)
	}
	return ok.MessageID
}

// chartPNG is a picture big enough to move the bottom of a chat when it
// loads (320×200).
func chartPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 320, 200))
	for y := 0; y < 200; y++ {
		for x := 0; x < 320; x++ {
			img.Set(x, y, color.RGBA{uint8(40 + x/3), uint8(90 + y/2), 180, 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	return buf.Bytes()
}

// personShowsJS scrolls the element sel into view the way a person's
// scrolling does (a wheel turned first: the app lets go of the bottom only
// for a person).
func personShowsJS(sel string) string {
	return `(() => { const t = document.querySelector('.timeline'); t.dispatchEvent(new WheelEvent('wheel', {deltaY: -100}));
		document.querySelector(` + js(sel) + `).scrollIntoView({block: 'center'}); })()`
}

// Where the timeline is: the distance from its bottom, in pixels.
const fromBottomJS = `(() => { const t = document.querySelector('.timeline'); return Math.round(t.scrollHeight - t.scrollTop - t.clientHeight); })()`

// TestWebAppReading covers how a conversation reads (issue 15): a chat
// with an image opens at its bottom and stays there, a "jump to latest"
// button when the person reads above, the origin of cron and script
// posts, runs of one sender grouped, the time never broken beside a long
// footer, "50 of 150" search results that page, previews of channels
// never opened, the pairing hint and link, and an auto-thread renamed to
// the model's title. Phone and desktop widths, light and dark, with
// screenshots under testdata/artifacts/webtest/reading/.
func TestWebAppReading(t *testing.T) {
	b := newBrowserIn(t, "reading")
	e := startEnv(t)
	ctx := context.Background()
	d2 := e.gw.Dial(t, "phone-2")
	lane := client.Lane{ChatID: "default"}
	step := func(name string, fn func()) {
		t.Helper()
		t0 := time.Now()
		fn()
		t.Logf("step %q took %v", name, time.Since(t0).Round(time.Millisecond))
	}
	say := func(l client.Lane, text, answer string) {
		t.Helper()
		if answer != "" {
			e.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text(answer, 2)})
		}
		d2.MustDo("message.send", l, map[string]any{"text": text})
		d2.Expect("agent.idle", func(f client.Frame) bool { return f.ChatID == l.ChatID })
	}

	// Before the browser pairs: a conversation in Default with a cron
	// post, three deliveries in a row and a picture near its end; other
	// channels the browser will not open; 150 messages with one word.
	for i := 1; i <= 8; i++ {
		say(lane, fmt.Sprintf("question %d", i), fmt.Sprintf("Answer number %d, with a footer.", i))
	}
	j, err := cron.Add(ctx, e.gw.App.Store, store.CronJob{Name: "standup", Schedule: "every 1h", Text: "Time for the standup", ChatID: "default"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := cron.RunNow(ctx, e.gw.App.Store, j.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	d2.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "Time for the standup" })
	for _, w := range []string{"one", "two", "three"} {
		e.deliver(t, "default", "Backup step "+w+" done", nil)
	}
	e.deliver(t, "default", "Weekly chart", chartPNG())
	say(lane, "thanks", "You're welcome.")

	reports := testgw.Str(t, d2.MustDo("channel.create", client.Lane{}, map[string]any{"name": "Reports", "kind": "channel"}), "chat_id")
	e.deliver(t, reports, "Nightly backup finished", nil)
	notes := testgw.Str(t, d2.MustDo("channel.create", client.Lane{}, map[string]any{"name": "Notes", "kind": "channel"}), "chat_id")
	say(client.Lane{ChatID: notes}, "remember the milk", "I will remind you about the milk.")
	walrus := testgw.Str(t, d2.MustDo("channel.create", client.Lane{}, map[string]any{"name": "Walrus watch", "kind": "channel"}), "chat_id")
	for i := 0; i < 150; i++ {
		e.deliver(t, walrus, fmt.Sprintf("walrus sighting number %d", i), nil)
	}

	sent := b.recordSent()
	step("pairing hint and link", func() {
		b.viewport(360, 740, false)
		b.do(chromedp.Navigate(e.base + "#pair?token=" + testgw.Token))
		b.wait("the pairing screen", `!!document.querySelector('#pair-token')`)
		hint := eval[string](b, `document.querySelector('#pair-token').parentElement.querySelector('.hint').textContent`)
		if strings.Contains(hint, "token add") || !strings.Contains(hint, "irisgate token create") || !strings.Contains(hint, "irisgate pair") {
			t.Fatalf("the pairing hint says %q", hint)
		}
		if got := eval[string](b, `document.querySelector('#pair-token').value`); got != testgw.Token {
			t.Fatalf("the pairing link filled the token with %q", got)
		}
		b.shot("r01-pairing-link")
		b.audit("pairing")
		b.click(".pair-form button[type=submit]")
		b.wait("the channel list", `!!document.querySelector('.channel-list a.chan[data-lane="default"]')`)
		b.waitOnline()
		if h := eval[string](b, `location.hash`); strings.Contains(h, "token") {
			t.Fatalf("the token stays in the address: %q", h)
		}
		// A pairing link opened once paired is not kept in the address.
		b.do(chromedp.Navigate(e.base + "#pair?token=another-token"))
		b.wait("the notice", `[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('paired already')) && !location.hash.includes('token')`)
	})

	step("previews of channels never opened", func() {
		preview := func(chatID string) string {
			return `(document.querySelector('a.chan[data-lane="` + chatID + `"] .chan-preview')?.textContent || '')`
		}
		b.wait("every channel's last message in the list", preview(reports)+` === 'Script: Nightly backup finished' && `+
			preview(notes)+` === 'I will remind you about the milk.' && `+preview(walrus)+` === 'Script: walrus sighting number 149' && `+
			preview("default")+` === "You're welcome."`)
		// Only the list's lines were asked for, not the timelines: one
		// history page of one message per lane, and no lane loaded.
		asked := map[string]int{}
		for _, f := range sent() {
			if f["type"] != "history" {
				continue
			}
			p, _ := f["payload"].(map[string]any)
			chat, _ := f["chat_id"].(string)
			if p["limit"] != 1.0 || p["before_message_id"] != nil {
				t.Errorf("the channel list sent a history request for more than a preview: %v", f)
			}
			asked[chat]++
		}
		for _, c := range []string{"default", reports, notes, walrus} {
			if asked[c] != 1 {
				t.Errorf("%s: %d preview requests, want 1 (all: %v)", c, asked[c], asked)
			}
		}
		if loaded := eval[[]string](b, `[...__iris.lanes.values()].filter(l => l.historyLoaded || l.items.size > 0).map(l => l.key)`); len(loaded) > 0 {
			t.Errorf("lanes loaded before any was opened: %v", loaded)
		}
		b.shot("r02-channels-previews")
		b.audit("channel list")
	})

	atBottom := func(what string) {
		t.Helper()
		// Images decode and lay out after the first frames: the view must
		// follow them to the bottom and stay there.
		b.wait(what+": the picture loaded", `[...document.querySelectorAll('.items img.preview')].some(i => i.complete && i.naturalWidth > 0)`)
		b.wait(what+": at the bottom after the picture", `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(`+fromBottomJS+` <= 2))))`)
		if !eval[bool](b, `(() => { const last = [...document.querySelectorAll('.items > li')].pop().getBoundingClientRect(); const t = document.querySelector('.timeline').getBoundingClientRect(); return last.bottom <= t.bottom + 1 && last.top >= t.top; })()`) {
			t.Fatalf("%s: the newest message is not in view", what)
		}
	}

	step("a chat with a picture opens at its bottom", func() {
		b.click(`a.chan[data-lane="default"]`)
		b.wait("the chat", `document.querySelector('.layout').dataset.view === 'chat' && __iris.lane('default').historyLoaded`)
		atBottom("phone, first open")
		if !eval[bool](b, `document.querySelector('.jump').hidden`) {
			t.Fatal("the jump button shows at the bottom")
		}
		b.shot("r03-chat-picture")
		b.audit("chat with a picture")
		// Again from the cache, at desktop width and dark.
		b.viewport(1280, 800, true)
		b.do(chromedp.Reload())
		b.wait("the chat again", `!!document.querySelector('.items > li.msg')`)
		b.waitOnline()
		atBottom("desktop, reloaded")
		b.shot("r04-chat-picture")
		b.audit("desktop chat")
		b.viewport(360, 740, true)
		b.do(chromedp.Reload())
		b.wait("the chat again", `!!document.querySelector('.items > li.msg')`)
		b.waitOnline()
		atBottom("phone, dark, reloaded")
		b.shot("r05-chat-picture")
	})

	step("origin labels and runs of one sender", func() {
		type bubble struct {
			Text, Origin, Group, Label string
			Top, Bottom                float64
		}
		read := func() map[string]bubble {
			out := map[string]bubble{}
			for _, m := range eval[[]bubble](b, `[...document.querySelectorAll('.items > li.msg')].map(li => {
				const r = li.querySelector('.bubble').getBoundingClientRect(), o = li.querySelector('.origin');
				return { Text: li.querySelector('.text')?.textContent.trim() || '', Origin: li.dataset.origin, Group: li.dataset.group,
					Label: o && o.offsetParent ? o.textContent.trim() : '', Top: r.top, Bottom: r.bottom };
			})`) {
				out[m.Text] = m
			}
			return out
		}
		ms := read()
		want := map[string][3]string{ // origin, group, label shown
			"Time for the standup":            {"cron", "single", "Cron · standup"},
			"Backup step one done":            {"delivery", "first", "Sent by a script"},
			"Backup step two done":            {"delivery", "mid", ""},
			"Backup step three done":          {"delivery", "mid", ""},
			"Weekly chart":                    {"delivery", "last", ""},
			"Answer number 8, with a footer.": {"agent", "single", ""},
			"thanks":                          {"user", "single", ""},
		}
		for text, w := range want {
			m, ok := ms[text]
			if !ok {
				t.Fatalf("%q is not on the page", text)
			}
			if m.Origin != w[0] || m.Group != w[1] || m.Label != w[2] {
				t.Errorf("%q: origin %q, group %q, label %q; want %v", text, m.Origin, m.Group, m.Label, w)
			}
		}
		inRun := ms["Backup step two done"].Top - ms["Backup step one done"].Bottom
		between := ms["Backup step one done"].Top - ms["Time for the standup"].Bottom
		if inRun > 4 || between < 6 {
			t.Errorf("a run's bubbles are %.0f px apart and runs %.0f px: want runs closer together than the rest", inRun, between)
		}
		b.do(chromedp.Evaluate[chromedp.Void](personShowsJS(`.items > li.msg[data-origin="cron"]`)))
		b.shot("r06-origins")
		b.audit("origin labels")
		b.viewport(1280, 800, false)
		b.do(chromedp.Evaluate[chromedp.Void](personShowsJS(`.items > li.msg[data-origin="cron"]`)))
		b.shot("r07-origins")
		b.audit("origin labels, desktop")
	})

	step("jump to latest", func() {
		b.viewport(360, 740, false)
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.timeline').scrollTo(0, 1e9)`))
		b.wait("the bottom", fromBottomJS+` <= 2`)
		b.wheel(".timeline", -500) // the person scrolls up
		b.wait("the jump button", `!document.querySelector('.jump').hidden && document.querySelector('.jump').textContent.includes('Jump to latest')`)
		top := eval[float64](b, `document.querySelector('.timeline').scrollTop`)
		e.deliver(t, "default", "A new report arrived", nil)
		b.waitText("the new delivery", "A new report arrived")
		b.wait("the count of new messages", `document.querySelector('.jump').textContent.includes('1 new message')`)
		if now := eval[float64](b, `document.querySelector('.timeline').scrollTop`); now != top {
			t.Fatalf("a new message moved the view from %v to %v while the person read above", top, now)
		}
		if got := eval[string](b, `[...document.querySelectorAll('.items > li.msg')].pop().querySelector('.origin')?.textContent.trim() || ''`); got != "Sent by a script" {
			t.Fatalf("the live delivery is labelled %q", got) // it came as role cron, not from history
		}
		b.shot("r08-jump")
		b.audit("jump button")
		b.click(".jump")
		b.wait("the bottom after the jump", fromBottomJS+` <= 2 && document.querySelector('.jump').hidden`)
	})

	step("a scroll with no input event is the person's", func() {
		// Find-in-page (Ctrl+F), a screen reader's virtual cursor and a link
		// to an anchor scroll the timeline without a wheel, touch, key or
		// pointer event: the view must stay where they took it, not snap
		// back to the bottom. The app lets go of the bottom and says so with
		// the jump button.
		b.viewport(360, 740, false)
		b.wait("the bottom", fromBottomJS+` <= 2 && document.querySelector('.jump').hidden`)
		b.still(".timeline")
		const cronInView = `(() => { const r = document.querySelector('.items > li.msg[data-origin="cron"]').getBoundingClientRect(),
			t = document.querySelector('.timeline').getBoundingClientRect(); return r.top >= t.top && r.bottom <= t.bottom; })()`
		if eval[bool](b, cronInView) {
			t.Fatal("the cron post is in view at the bottom already: nothing to find")
		}
		// What the browser does with a match (headless Chromium's window.find
		// selects it without scrolling): it scrolls it into view, sending no
		// input event.
		eval[bool](b, `(document.querySelector('.items > li.msg[data-origin="cron"]').scrollIntoView({block: 'center'}), true)`)
		b.wait("the found message, still in view", cronInView+` && !document.querySelector('.jump').hidden`)
		settled := `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`
		eval[bool](b, settled)
		if !eval[bool](b, cronInView) {
			t.Fatalf("the view left the found message (%v px from the bottom)", eval[int](b, fromBottomJS))
		}
		b.shot("r08b-find-in-page")
		b.click(".jump")
		b.wait("the bottom after the jump", fromBottomJS+` <= 2 && document.querySelector('.jump').hidden`)
		b.still(".timeline") // the jump scrolls smoothly

		eval[bool](b, `(document.querySelector('.timeline').scrollTop = 0, true)`)
		b.wait("the top, kept", `document.querySelector('.timeline').scrollTop === 0 && !document.querySelector('.jump').hidden`)
		eval[bool](b, settled)
		if top := eval[float64](b, `document.querySelector('.timeline').scrollTop`); top != 0 {
			t.Fatalf("a programmatic scroll to the top was moved to %v", top)
		}
		b.click(".jump")
		b.wait("the bottom after the jump", fromBottomJS+` <= 2 && document.querySelector('.jump').hidden`)
	})

	step("the time does not break beside a long footer", func() {
		b.viewport(360, 740, false)
		eval[bool](b, `(localStorage.setItem('iris.settings', JSON.stringify({...JSON.parse(localStorage.getItem('iris.settings') || '{}'), runtime: 'full'})), true)`)
		b.do(chromedp.Reload())
		b.wait("full footers", `[...document.querySelectorAll('.runtime')].some(e => e.textContent.includes('ctx'))`)
		broken := eval[[]string](b, `[...document.querySelectorAll('.msg-meta time')].filter(t => t.getBoundingClientRect().height > parseFloat(getComputedStyle(t).lineHeight) * 1.3).map(t => t.textContent)`)
		if len(broken) > 0 {
			t.Fatalf("%d timestamps break over lines: %q", len(broken), broken)
		}
		b.do(chromedp.Evaluate[chromedp.Void](personShowsJS(`.items > li.msg[data-origin="agent"]:has(.runtime)`)))
		b.shot("r09-full-footer")
		b.viewport(360, 740, true)
		b.shot("r10-full-footer")
	})

	step("search says how many and pages", func() {
		b.viewport(360, 740, false)
		b.click(`button[aria-label="Search in this chat"]`)
		b.wait("the search dialog", `!!document.querySelector('#search-input')`)
		b.click("#scope-all")
		b.typeIn("#search-input", "walrus")
		b.wait("the first page", `document.querySelectorAll('.results .result').length === 50`)
		if got := eval[string](b, `document.querySelector('.search-status').textContent`); got != "50 of 150 results." {
			t.Fatalf("the search says %q", got)
		}
		b.shot("r11-search")
		b.audit("search")
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.results').scrollTo(0, 1e9)`))
		b.shot("r11-search-more")
		b.click(".more-results")
		b.wait("the second page", `document.querySelectorAll('.results .result').length === 100 && document.querySelector('.search-status').textContent === '100 of 150 results.'`)
		b.click(".more-results")
		b.wait("the last page", `document.querySelectorAll('.results .result').length === 150 && document.querySelector('.search-status').textContent === '150 results.' && !document.querySelector('.more-results')`)
		ids := eval[int](b, `new Set([...document.querySelectorAll('.results .result')].map(e => e.dataset.messageId)).size`)
		if ids != 150 {
			t.Fatalf("the pages hold %d different messages, want 150", ids)
		}
		b.viewport(1280, 800, true)
		b.shot("r12-search")
		b.click(`dialog[open] button[aria-label="Close"]`)
		b.wait("the search closed", `!document.querySelector('dialog')`)
	})

	step("an auto-thread takes the model's title", func() {
		b.viewport(1280, 800, false)
		eval[bool](b, `(localStorage.setItem('iris.settings', JSON.stringify({...JSON.parse(localStorage.getItem('iris.settings') || '{}'), autoThread: true})), true)`)
		b.do(chromedp.Reload())
		b.wait("the default chat", `document.querySelector('.chat-title')?.textContent === 'Default'`)
		b.waitOnline()
		e.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Three days in Lisbon: Alfama, Belém and Sintra.", 3)},
			fakeopenai.Script{Chunks: fakeopenai.Text("Lisbon in three days", 2)})
		b.send("Plan the trip to Lisbon")
		b.wait("the thread's chat", `document.querySelector('.chat-sub')?.textContent === 'Thread in Default'`)
		b.waitFinal("Three days in Lisbon: Alfama, Belém and Sintra.")
		b.wait("the model's title", `document.querySelector('.chat-title')?.textContent === 'Lisbon in three days' &&
			[...document.querySelectorAll('.chan-row.thread .chan-name')].some(e => e.textContent === 'Lisbon in three days')`)
		b.shot("r13-auto-thread-title")
	})
}
