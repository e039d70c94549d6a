package webtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
)

// TestWebApp follows one browser, step by step, through what a person
// does with the app: pairing, a streaming reply, the / drawer and the
// pickers, an approval, files both ways, search, channels and threads,
// history paging, going offline and reloading while offline, deleting.
func TestWebApp(t *testing.T) {
	start := time.Now()
	b := newBrowser(t)
	e := startEnv(t)
	lane := client.Lane{ChatID: "default"}
	var media, search bool

	// Another device, and a channel with 120 messages from before the
	// browser paired: it only gets them by paging through history.
	d2 := e.gw.Dial(t, "phone-2")
	ch := d2.MustDo("channel.create", client.Lane{}, map[string]any{"name": "Archive", "kind": "channel"})
	archive := testgw.Str(t, ch, "chat_id")
	// One at a time: a lane queues at most gateway.MaxQueuedTurns.
	for i := 1; i <= 60; i++ {
		d2.MustDo("message.send", client.Lane{ChatID: archive}, map[string]any{"text": fmt.Sprintf("old-%02d", i)})
		d2.Expect("agent.idle", nil)
	}
	t.Logf("seeded 120 messages in %v", time.Since(start).Round(time.Millisecond))

	step := func(name string, fn func()) {
		t.Helper()
		t0 := time.Now()
		fn()
		t.Logf("step %q took %v", name, time.Since(t0).Round(time.Millisecond))
	}

	step("pair", func() {
		b.viewport(360, 740, false)
		b.do(chromedp.Navigate(e.base))
		b.wait("the pairing screen", `!!document.querySelector('#pair-token')`)
		if got := eval[string](b, `document.querySelector('#pair-url').value`); got != e.proxy.URL {
			t.Fatalf("the default gateway address is %q, want the page's own /ws %q", got, e.proxy.URL)
		}
		b.shot("01-pairing")
		b.audit("pairing")
		b.typeIn("#pair-token", "not-the-token\n")
		b.wait("the refusal of a wrong token", `document.querySelector('#pair-error')?.textContent.length > 0`)
		eval[bool](b, `(document.querySelector('#pair-token').value = '', true)`)
		b.typeIn("#pair-token", testgw.Token+"\n")
		b.wait("the channel list", `!!document.querySelector('.channel-list a.chan[data-lane="default"]')`)
		b.waitOnline()
		if eval[string](b, `JSON.parse(localStorage.getItem('iris.pairing')).token`) != testgw.Token {
			t.Fatal("the pairing was not remembered in localStorage")
		}
		media = eval[bool](b, `__iris.caps.media === true`)
		search = eval[bool](b, `__iris.caps.search === true`)
		b.shot("02-channels")
		b.click(`a.chan[data-lane="default"]`)
		b.wait("the chat view", `document.querySelector('.layout').dataset.view === 'chat' && !!document.querySelector('#composer-input')`)
	})

	const reasoning = "The person greets me, so I greet them back."
	const reply = "Hello! I am the fake model, and this reply streams in several pieces."
	step("send and watch the stream", func() {
		chunks := fakeopenai.Reasoning("reasoning_content", reasoning, 3)
		chunks = append(chunks, fakeopenai.Text(reply, 12)...)
		e.fake.Push(fakeopenai.Script{Chunks: chunks, Gap: 60 * time.Millisecond})
		eval[bool](b, `(window.__partials = new Set(), new MutationObserver(() => {
			for (const el of document.querySelectorAll('.msg.assistant[data-status=streaming] .text')) { const s = el.textContent.trim(); if (s) window.__partials.add(s); }
		}).observe(document.querySelector('.items'), {subtree: true, childList: true, characterData: true}), true)`)
		b.send("Hello there")
		b.waitText("my message", "Hello there")
		b.waitFinal(reply)
		partials := eval[[]string](b, `[...window.__partials]`)
		grew := 0
		for _, p := range partials {
			if p != reply && strings.HasPrefix(reply, p) {
				grew++
			}
		}
		if grew < 2 {
			t.Fatalf("saw %d partial texts of the streaming bubble (%q), want it to grow in place", grew, partials)
		}
		bubble := `[...document.querySelectorAll('.items > li.msg.assistant')].find(e => e.querySelector('.text')?.textContent.trim() === ` + js(reply) + `).querySelector('.bubble')`
		if !eval[bool](b, bubble+`.firstElementChild.matches('details.reasoning')`) {
			t.Fatal("the reasoning is not shown above the reply's text")
		}
		if got := eval[string](b, bubble+`.querySelector('details.reasoning').textContent`); !strings.Contains(got, reasoning) {
			t.Fatalf("reasoning shows %q", got)
		}
		if got := eval[string](b, bubble+`.querySelector('.runtime')?.textContent || ''`); !strings.Contains(got, "fake-model") {
			t.Fatalf("the runtime footer shows %q, want the model", got)
		}
		b.wait("✓✓ on my message", `[...document.querySelectorAll('.items > li.msg.user')].some(e => e.querySelector('.text').textContent.trim() === 'Hello there' && e.querySelector('.ticks')?.textContent === '✓✓')`)
		if n := b.count("Hello there"); n != 1 {
			t.Fatalf("my message shows %d times", n)
		}
	})

	step("the / drawer and the model picker", func() {
		b.typeIn("#composer-input", "/mod")
		b.wait("the command drawer", `!document.querySelector('#cmd-drawer').hidden && document.querySelector('#cmd-drawer .cmd-name')?.textContent === '/model'`)
		b.shot("03-drawer")
		b.do(enter)
		if got := eval[string](b, `document.querySelector('#composer-input').value`); got != "/model " {
			t.Fatalf("choosing /model left %q in the composer", got)
		}
		b.do(enter)
		b.wait("the model picker", `!!document.querySelector('.picker-model select')`)
		if got := eval[string](b, `document.querySelector('.picker-model select').value`); got != "fake/fake-model" {
			t.Fatalf("the model picker preselects %q", got)
		}
		b.click(".picker-model button[type=submit]")
		b.wait("the picker's answer", `!!document.querySelector('.picker-model .picker-done')`)
		b.wait("the gateway's reply to the picker", `[...document.querySelectorAll('.items > li.msg.system .text')].some(e => e.textContent.includes('Model: fake-model'))`)
	})

	step("answer an approval", func() {
		dir := filepath.Join(e.work, "tmpdir")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "junk.txt"), []byte("junk"), 0o644)
		e.fake.Push(
			fakeopenai.Script{Chunks: fakeopenai.ToolCall("Let me clean that up first.", "call_rm", "terminal", `{"command":"rm -rf ./tmpdir"}`, 3)},
			fakeopenai.Script{Chunks: fakeopenai.Text("Removed tmpdir for you.", 4)},
		)
		b.send("Please clean up tmpdir")
		b.wait("the approval picker", `document.querySelector('.picker-approval pre.cmd code')?.textContent === 'rm -rf ./tmpdir'`)
		b.wait("the busy row", `!document.querySelector('.busy-row').hidden && document.querySelector('.chat-sub').textContent === 'waiting for your answer'`)
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("tmpdir is gone before the approval: %v", err)
		}
		b.shot("04-approval")
		b.audit("approval")
		b.click(`.picker-approval button[data-value="once"]`)
		b.waitFinal("Removed tmpdir for you.")
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("tmpdir is still there after the approval (%v)", err)
		}
		if got := eval[string](b, `document.querySelector('.picker-approval .picker-done')?.textContent || ''`); !strings.Contains(got, "Allow once") {
			t.Fatalf("the approval card says %q", got)
		}
		b.wait("the tool card", `[...document.querySelectorAll('.items > li.tool')].some(e => e.textContent.includes('terminal') && e.textContent.includes('rm -rf ./tmpdir') && e.textContent.includes('✓'))`)
		b.wait("the idle state", `document.querySelector('.busy-row').hidden`)
		if !eval[bool](b, `[...document.querySelectorAll('.items > li.commentary')].some(e => e.textContent.includes('Let me clean that up first.'))`) {
			t.Fatal("the commentary before the tool call does not show")
		}
	})

	step("todo strip, a file from the agent, and a clarify question", func() {
		os.WriteFile(filepath.Join(e.work, "report.txt"), []byte("quarterly numbers\n"), 0o644)
		e.fake.Push(
			fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c_todo", "todo", `{"todos":[{"id":"a","content":"Read the report","status":"completed"},`+
				`{"id":"b","content":"Ask which format","status":"in_progress"},{"id":"c","content":"Write the summary","status":"pending"}]}`, 2)},
			fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c_file", "send_file", `{"path":"report.txt"}`, 2)},
			fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "c_ask", "clarify", `{"question":"Which format do you want?","choices":["Markdown","Plain text"]}`, 2)},
			fakeopenai.Script{Chunks: fakeopenai.Text("Here is the summary, as a haiku.", 3)},
		)
		b.send("Summarize the report")
		b.wait("the todo strip", `!document.querySelector('.todo-strip').hidden && document.querySelectorAll('.todo-strip .todo').length === 3 && !!document.querySelector('.todo-strip .todo.in_progress')`)
		b.wait("the clarify question", `document.querySelector('.picker-clarify h3')?.textContent === 'Which format do you want?' && document.querySelectorAll('.picker-clarify .picker-actions button').length === 2`)
		b.shot("05-clarify")
		b.audit("clarify and todo strip")
		b.typeIn(`.picker-clarify input[aria-label="Your answer"]`, "As a haiku\n")
		b.waitFinal("Here is the summary, as a haiku.")
		if got := eval[string](b, `document.querySelector('.picker-clarify .picker-done')?.textContent || ''`); !strings.Contains(got, "As a haiku") {
			t.Fatalf("the clarify card says %q", got)
		}
		if !media {
			t.Log("SKIPPED the agent's file: the gateway offers no media (issue 4)")
			return
		}
		reply := `[...document.querySelectorAll('.items > li.msg.assistant')].find(e => e.querySelector('.text')?.textContent.trim() === 'Here is the summary, as a haiku.')`
		b.wait("the agent's file on its reply", reply+`?.querySelector('.file[data-media-id] .file-name')?.textContent === 'report.txt'`)
		b.click(`button[aria-label="Download report.txt"]`)
		b.wait("the download", reply+`.querySelector('a.saved')`)
		if got := eval[string](b, `(async () => (await fetch(`+reply+`.querySelector('a.saved').href)).text())()`); got != "quarterly numbers\n" {
			t.Fatalf("the agent's file reads %q", got)
		}
	})

	step("a choice picker", func() {
		b.send("/reasoning")
		b.wait("the choice picker", `!!document.querySelector('.picker-choice button[data-value="high"]')`)
		b.click(`.picker-choice button[data-value="high"]`)
		b.wait("the gateway's reply", `[...document.querySelectorAll('.items > li.msg.system .text')].some(e => e.textContent.includes('Reasoning effort: high'))`)
	})

	step("steer and stop while the agent is busy", func() {
		story := strings.Repeat("Once upon a time there was a gateway that never lost a message. ", 8)
		e.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text(story, 40), Gap: 100 * time.Millisecond})
		b.send("Tell me a long story")
		b.wait("the story streaming", `[...document.querySelectorAll('.items > li.msg.assistant[data-status=streaming] .text')].some(e => e.textContent.includes('Once upon'))`)
		if got := eval[string](b, `document.querySelector('.composer .send').getAttribute('aria-label')`); got != "Steer" {
			t.Fatalf("while the agent is busy the send button says %q", got)
		}
		b.send("Make it shorter")
		b.wait("the steer, echoed", `[...document.querySelectorAll('.items > li.msg.user')].some(e => e.querySelector('.text')?.textContent.trim() === 'Make it shorter' && e.dataset.status !== 'pending')`)
		b.click(".busy-row .stop")
		b.wait("the stop", `document.querySelector('.busy-row').hidden && document.querySelector('.composer .send').getAttribute('aria-label') === 'Send'`)
		cut := eval[string](b, `[...document.querySelectorAll('.items > li.msg.assistant .text')].map(e => e.textContent.trim()).find(t => t.startsWith('Once upon')) || ''`)
		if cut == "" || len(cut) >= len(strings.TrimSpace(story)) {
			t.Fatalf("after the stop the story reads %d of %d characters", len(cut), len(story))
		}
	})

	step("upload and download files", func() {
		if !media {
			t.Log("SKIPPED upload and download: this gateway's hello.ack says server_caps.media=false " +
				"(media.upload.* and media.pull are not implemented yet, issue 4)")
			return
		}
		dir := t.TempDir()
		pic := filepath.Join(dir, "pixel-art.png")
		picBytes := testPNG()
		os.WriteFile(pic, picBytes, 0o644)
		notes := filepath.Join(dir, "notes.txt")
		const notesText = "Notes from the browser test.\nSecond line: ünïcödé ✓\n"
		os.WriteFile(notes, []byte(notesText), 0o644)
		downloads := t.TempDir()
		ctx, cancel := context.WithTimeout(b.ctx, Step)
		_, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
		cancel()
		if err != nil {
			t.Fatal(err)
		}

		b.do(chromedp.SetUploadFiles(chromedp.CSS("#file-input"), []string{pic, notes}))
		b.wait("both uploads acknowledged", `document.querySelectorAll('.attachments .att.done').length === 2`)
		e.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Got both files.", 2)})
		b.send("Here are two files")
		b.waitFinal("Got both files.")
		mine := `[...document.querySelectorAll('.items > li.msg.user')].find(e => e.querySelector('.text')?.textContent.trim() === 'Here are two files')`
		b.wait("the attachments on my message", mine+`?.querySelectorAll('.file[data-media-id]').length === 2`)
		b.wait("the image preview", mine+`.querySelector('img.preview')?.naturalWidth > 0`)
		got := eval[string](b, `(async () => { const img = `+mine+`.querySelector('img.preview');
			const buf = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
			let s = ''; for (const x of buf) s += String.fromCharCode(x); return btoa(s); })()`)
		if got != base64.StdEncoding.EncodeToString(picBytes) {
			t.Fatal("the image pulled back differs from the one uploaded")
		}
		b.click(`button[aria-label="Download notes.txt"]`)
		b.wait("the download", mine+`.querySelector('.file.kind-document a.saved')`)
		text := eval[string](b, `(async () => (await fetch(`+mine+`.querySelector('.file.kind-document a.saved').href)).text())()`)
		if text != notesText {
			t.Fatalf("the downloaded text is %q", text)
		}
		deadline := time.Now().Add(Step)
		for {
			data, err := os.ReadFile(filepath.Join(downloads, "notes.txt"))
			if err == nil && string(data) == notesText {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the browser did not save notes.txt to the download folder (%v)", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.shot("06-files")
		b.audit("files")
	})

	step("search", func() {
		b.click(`button[aria-label="Search in this chat"]`)
		b.wait("the search dialog", `!!document.querySelector('#search-input')`)
		b.click("#scope-all")
		b.typeIn("#search-input", "tmpdir")
		b.wait("search results", `[...document.querySelectorAll('.results .result')].some(e => e.textContent.includes('tmpdir'))`)
		status := eval[string](b, `document.querySelector('.search-status').textContent`)
		local := strings.Contains(status, "saved on this device")
		switch {
		case search && local:
			t.Fatalf("the gateway offers search but the app searched its cache: %q", status)
		case !search:
			t.Log("SKIPPED gateway search: hello.ack says server_caps.search=false (issue 4); checked the app's own search of its cache instead")
		}
		b.shot("07-search")
		b.audit("search")
		b.click(".results .result")
		b.wait("the found message, highlighted", `!!document.querySelector('.items > li.flash')`)
		if !eval[bool](b, `document.querySelector('.items > li.flash').textContent.includes('tmpdir')`) {
			t.Fatal("the highlighted message is not the one found")
		}
	})

	step("channels", func() {
		b.click(".chat-head .back")
		b.wait("the list", `document.querySelector('.layout').dataset.view === 'list'`)
		b.click(".new-channel")
		b.typeIn("#prompt-input", "Reports\n")
		b.wait("the new channel's chat", `document.querySelector('.chat-title')?.textContent === 'Reports'`)
		b.click(".chat-head .back")
		b.menu("Options for Reports")
		b.click(`dialog.sheet[open] .sheet-item:nth-child(1)`)
		b.menu("Options for Reports")
		b.click(`dialog.sheet[open] li:nth-child(4) .sheet-item`) // New thread…
		b.typeIn("#prompt-input", "Q3 numbers\n")
		b.wait("the thread's chat", `document.querySelector('.chat-title')?.textContent === 'Q3 numbers' && document.querySelector('.chat-sub').textContent === 'Thread in Reports'`)
		b.click(".chat-head .back")
		b.wait("the thread under its channel", `[...document.querySelectorAll('.chan-row.thread .chan-name')].some(e => e.textContent === 'Q3 numbers')`)
		b.menu("Options for Q3 numbers")
		b.click(`dialog.sheet[open] li:nth-child(2) .sheet-item`) // Rename…
		b.wait("the rename prompt", `document.querySelector('#prompt-input')?.value === 'Q3 numbers'`)
		eval[bool](b, `(document.querySelector('#prompt-input').value = '', true)`)
		b.typeIn("#prompt-input", "Q3 figures\n")
		b.wait("the renamed thread", `[...document.querySelectorAll('.chan-row.thread .chan-name')].some(e => e.textContent === 'Q3 figures')`)
		b.menu("Options for Reports")
		b.click(`dialog.sheet[open] li:nth-child(3) .sheet-item`) // Icon and colour…
		b.wait("the icon dialog", `!!document.querySelector('#icon-color')`)
		eval[bool](b, `(() => { const c = document.querySelector('#icon-color'); c.value = '#aa3377'; c.dispatchEvent(new Event('input')); return true; })()`)
		b.click(`dialog[open] button[type=submit]`)
		b.wait("the new colour", `[...document.querySelectorAll('.chan-row:not(.thread) .chan')].some(e => e.textContent.includes('Reports') && getComputedStyle(e.querySelector('.avatar')).backgroundColor === 'rgb(170, 51, 119)')`)
		b.wait("the favourite", `[...document.querySelectorAll('.chan-name')].some(e => e.textContent.includes('Reports') && e.textContent.includes('★'))`)
		if !eval[bool](b, `document.querySelector('.channel-list .chan-name').textContent.includes('Reports')`) {
			t.Fatal("a favourite is not first in the list")
		}
		b.shot("08-channels")
		b.audit("channel list")
		b.menu("Options for Reports")
		b.click(`dialog.sheet[open] .sheet-item.danger`)
		b.wait("the confirmation", `!!document.querySelector('dialog[open] .btn.danger')`)
		b.click(`dialog[open] .btn.danger`)
		b.wait("the channel and its thread gone", `![...document.querySelectorAll('.chan-name')].some(e => e.textContent.includes('Reports') || e.textContent.includes('Q3'))`)
		b.click(`a.chan[data-lane="default"]`)
		b.wait("the default chat", `document.querySelector('.layout').dataset.view === 'chat' && document.querySelector('.chat-title')?.textContent !== 'Reports'`)
	})

	step("history paging", func() {
		b.click(".chat-head .back")
		b.click(`a.chan[data-lane=` + js(archive) + `]`)
		b.wait("the newest page", `__iris.lane(`+js(archive)+`).historyLoaded && document.querySelectorAll('.items > li.msg').length === 50`)
		if n := b.count("old-01"); n != 0 {
			t.Fatalf("the oldest message shows before paging (%d)", n)
		}
		b.waitFor("paging back to the beginning", `(document.querySelector('.timeline').dispatchEvent(new WheelEvent('wheel', {deltaY: -1000})),
			document.querySelector('.timeline').scrollTop = 0,
			document.querySelector('.history-state').textContent.includes('beginning') && (`+countJS+`)('old-01') === 1)`, 2*Step)
		for i := 1; i <= 60; i++ {
			if n := b.count(fmt.Sprintf("old-%02d", i)); n != 1 {
				t.Fatalf("old-%02d shows %d times", i, n)
			}
		}
		if n := b.count("ok"); n != 60 {
			t.Fatalf("%d of the 60 replies show", n)
		}
		checkHistory(t, b, d2, client.Lane{ChatID: archive})
		b.shot("09-history")
		b.click(".chat-head .back")
		b.click(`a.chan[data-lane="default"]`)
		b.wait("the default chat", `document.querySelector('.chat-title')?.textContent === 'Default'`)
	})

	// say sends from the other device and waits for the agent's answer
	// (frames of earlier turns, still buffered, are dropped first).
	say := func(text string) client.Frame {
		t.Helper()
		for {
			if _, ok := d2.NextWithin(20 * time.Millisecond); !ok {
				break
			}
		}
		echo := d2.MustDo("message.send", lane, map[string]any{"text": text})
		d2.Expect("agent.idle", func(f client.Frame) bool { return f.ChatID == lane.ChatID })
		return echo
	}
	step("go offline and back while another device talks", func() {
		b.wait("the service worker in control", `!!navigator.serviceWorker.controller`)
		ctx, cancel := context.WithTimeout(b.ctx, Step)
		inst, err := chromedp.Call(ctx, page.GetInstallabilityErrors, cdp.Empty{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, ie := range inst.InstallabilityErrors {
			t.Errorf("the app is not installable: %s", ie.ErrorID)
		}
		eval[bool](b, `(__iris.debug = __iris.conn.opts.debug = true)`)
		e.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Noted.", 1)})
		delID := testgw.Str(t, say("to-be-deleted"), "message_id")
		b.waitText("the other device's message", "to-be-deleted")

		e.proxy.Pause()
		e.proxy.Cut()
		b.wait("the offline state", `['offline', 'connecting'].includes(document.querySelector('.conn-dot').dataset.state) && !document.querySelector('.connbar').hidden`)
		b.send("sent while offline")
		b.wait("the waiting bubble", `[...document.querySelectorAll('.items > li.msg.user[data-status=pending]')].some(e => e.textContent.includes('sent while offline'))`)
		b.shot("10-offline")
		b.audit("offline")

		d2.MustDo("message.delete", lane, map[string]any{"message_ids": []string{delID}})
		for i := 1; i <= 3; i++ {
			e.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text(fmt.Sprintf("reply-%d", i), 2)})
			say(fmt.Sprintf("offline-%d", i))
		}
		e.fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("reply-to-queued", 2)})
		e.proxy.Resume()
		eval[bool](b, `(window.dispatchEvent(new Event('online')), true)`)
		b.waitOnline()
		b.waitFinal("reply-to-queued")
		b.wait("the deletion", `(`+countJS+`)('to-be-deleted') === 0`)
		checkOnce(t, b, d2, lane)
	})

	step("reload while offline", func() {
		e.proxy.Pause()
		e.proxy.Cut()
		b.wait("the offline state", `document.querySelector('.conn-dot').dataset.state !== 'online'`)
		b.do(chromedp.Reload())
		b.wait("the cached conversation", `document.querySelectorAll('.items > li.msg').length > 5`)
		if s := b.connState(); s == "online" {
			t.Fatalf("the reloaded page is %s while the gateway is unreachable", s)
		}
		checkOnce(t, b, nil, lane)
		b.shot("11-offline-reload")
		e.proxy.Resume()
		eval[bool](b, `(window.dispatchEvent(new Event('online')), true)`)
		b.waitOnline()
		b.wait("the history reload", `__iris.lane('default').historyLoaded`)
		checkOnce(t, b, d2, lane)
	})

	step("delete a message", func() {
		id := eval[string](b, `[...document.querySelectorAll('.items > li.msg.assistant')].find(e => e.querySelector('.text')?.textContent.trim() === 'reply-3').dataset.key`)
		b.wait("no dialog open", `!document.querySelector('dialog')`)
		b.click(`li[data-key=` + js(id) + `] .msg-more`)
		b.wait("the message menu", `!!document.querySelector('dialog.sheet[open]')`)
		b.click(`dialog.sheet[open] .sheet-item.danger`)
		b.wait("the confirmation", `!!document.querySelector('dialog[open] .btn.danger')`)
		b.click(`dialog[open] .btn.danger`)
		b.wait("the message gone", `!document.querySelector('li[data-key=`+js(id)+`]')`)
		d2.Expect("message.deleted", func(f client.Frame) bool { return strings.Contains(string(f.Payload), id) })
	})

	step("screenshots and settings", func() {
		b.viewport(360, 740, true)
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.timeline').scrollTo(0, 1e9)`))
		b.shot("12-chat")
		b.audit("chat")
		b.click(".chat-head .back")
		b.shot("13-channels")
		b.audit("channel list")
		b.click(`a.chan[data-lane="default"]`)
		b.viewport(1280, 800, false)
		b.shot("14-desktop")
		b.audit("desktop")
		b.click(`button[aria-label="Settings"]`)
		b.wait("the settings", `!!document.querySelector('dialog.settings')`)
		b.click("#set-tools-all")
		b.click("#set-runtime-full")
		b.shot("15-settings")
		b.audit("settings")
		b.do(chromedp.SendKeys(chromedp.CSS("dialog.settings"), "\x1b"))
		b.wait("the settings closed", `!document.querySelector('dialog.settings')`)
		b.wait("full tool cards", `!!document.querySelector('.items > li.tool.full pre')`)
		if !eval[bool](b, `[...document.querySelectorAll('.runtime')].some(e => e.textContent.includes('ctx'))`) {
			t.Fatal("the full runtime footer shows no context use")
		}
		b.viewport(1280, 800, true)
		b.shot("16-desktop")
		b.audit("desktop")
		b.viewport(360, 740, true)
		b.do(chromedp.Navigate(e.base + "#/c/default"))
		b.waitOnline()
		eval[bool](b, `(localStorage.removeItem('iris.pairing'), true)`)
		b.do(chromedp.Reload())
		b.wait("the pairing screen", `!!document.querySelector('#pair-token')`)
		b.shot("17-pairing")
		b.audit("pairing")
	})

	if d := time.Since(start); d > 2*time.Minute {
		t.Logf("WARNING: the browser test took %v; it is meant to stay under two minutes", d)
	}
}
