package webtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"

	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// fakePushManagerJS stands in for the browser's push service, which this
// machine cannot reach (Chromium's PushManager.subscribe waits for FCM
// forever here). It hands out a subscription shaped as Chromium's
// (endpoint, expirationTime, keys.p256dh and keys.auth, base64url) whose
// endpoint the test picks in localStorage "test.push.endpoint". Everything
// else — the app's registration, the gateway's answer, the service
// worker — is the real thing.
const fakePushManagerJS = `(() => {
  if (!('PushManager' in self)) return;
  let current = null;
  PushManager.prototype.getSubscription = async function () { return current; };
  PushManager.prototype.subscribe = async function (opts) {
    const endpoint = localStorage.getItem('test.push.endpoint');
    const key = new Uint8Array(opts.applicationServerKey).buffer;
    current = {
      endpoint, expirationTime: null, options: { applicationServerKey: key, userVisibleOnly: true },
      toJSON: () => ({ endpoint, expirationTime: null, keys: {
        p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM',
        auth: 'tBHItJI5svbpez7KI4CCXg' } }),
      unsubscribe: async () => { current = null; return true; },
    };
    return current;
  };
})()`

// TestWebAppPush: the web app registers its Web Push subscription with
// fcm.register carrying an id, and tells the person when the gateway
// refuses it (in Settings, and once a page when it registers again at
// connect); and its service worker names each notification by the push's
// tag, so a lane's news replaces its notification instead of piling up.
func TestWebAppPush(t *testing.T) {
	b := newBrowserIn(t, "push")
	gw := testgw.Start(t, func(c *server.AppConfig) { c.Push.WebPush = true })
	origin := "http://" + gw.Addr
	base := origin + "/"
	ctx, cancel := context.WithTimeout(b.ctx, 4*Step)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: origin}); err != nil {
		t.Fatal(err)
	}
	registrations := chromedp.Events(ctx, serviceworker.WorkerRegistrationUpdated)
	b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fakePushManagerJS}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, serviceworker.Enable, cdp.Empty{})
		return err
	}))
	sent := b.recordSent()
	registers := func() (n int) {
		for _, f := range sent() {
			if f["type"] == "fcm.register" {
				if id, _ := f["id"].(float64); id == 0 {
					t.Fatalf("fcm.register was sent without an id: %v", f)
				}
				n++
			}
		}
		return n
	}
	// pause lets the page run a little while a condition outside it is
	// polled (with a deadline).
	pause := func() { eval[bool](b, `new Promise(r => setTimeout(() => r(true), 50))`) }
	// registered waits until the browser's network log (which may lag
	// behind the gateway) shows n fcm.register frames sent.
	registered := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(Step); registers() < n; pause() {
			if time.Now().After(deadline) {
				t.Fatalf("%d fcm.register frames sent within %v, want %d", registers(), Step, n)
			}
		}
		if got := registers(); got != n {
			t.Fatalf("%d fcm.register frames sent, want %d", got, n)
		}
	}

	b.viewport(360, 740, false)
	b.do(chromedp.Navigate(base + "#pair?token=" + testgw.Token))
	b.wait("the pairing screen", `!!document.querySelector('#pair-token')`)
	b.click(".pair-form button[type=submit]")
	b.waitOnline()
	device := eval[string](b, `__iris.pairing.deviceId`)
	stored := func() string {
		t.Helper()
		d, err := gw.App.Store.Device(context.Background(), device)
		if err != nil {
			t.Fatal(err)
		}
		if d.WebPush == nil {
			return ""
		}
		return d.WebPush.Endpoint
	}

	// Settings' notifications button, marked for the clicks, and the
	// status line after it.
	settings := func() {
		t.Helper()
		b.click(`button[aria-label="Settings"]`)
		b.wait("the settings", `!!document.querySelector('dialog.settings')`)
		eval[bool](b, `(() => { [...document.querySelectorAll('dialog.settings button')].find(e => e.textContent.includes('Turn on notifications')).dataset.test = 'push'; return true; })()`)
	}
	const refused = `(document.querySelector('dialog.settings [data-test=push] ~ [role=status]')?.textContent || '')`

	// A subscription the gateway refuses (an http endpoint: see
	// RegisterPush), turned on in Settings.
	eval[bool](b, `(localStorage.setItem('test.push.endpoint', 'http://push.example.net/wp/abc'), true)`)
	settings()
	b.click(`dialog.settings [data-test=push]`)
	b.wait("the refusal in Settings", refused+`.startsWith("The gateway refused this browser's push subscription")`)
	if got := eval[string](b, refused); !strings.Contains(got, "https endpoint") || !strings.Contains(got, "only while Iris is open") {
		t.Fatalf("Settings say %q, want the gateway's reason and what it means", got)
	}
	registered(1)
	if s := stored(); s != "" {
		t.Fatalf("the gateway kept the refused subscription: %s", s)
	}
	eval[bool](b, `(document.querySelector('dialog.settings [data-test=push] ~ [role=status]').scrollIntoView({block: 'center'}), true)`)
	b.shot("p01-settings-refused")
	b.audit("push refused, settings")
	b.do(chromedp.SendKeys(chromedp.CSS("dialog.settings"), "\x1b"))
	b.wait("the settings closed", `!document.querySelector('dialog.settings')`)

	// At the next connect the app registers again, by itself: the refusal
	// is a notice.
	b.viewport(1280, 800, true)
	b.do(chromedp.Reload())
	b.waitOnline()
	b.wait("the refusal's notice", `[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('The gateway refused notifications for this browser') && e.textContent.includes('https endpoint'))`)
	b.shot("p02-refused-notice")
	b.audit("push refused, notice")

	// A subscription the gateway takes: stored, and no notice.
	const endpoint = "https://fcm.googleapis.com/fcm/send/fake-subscription"
	eval[bool](b, `(localStorage.setItem('test.push.endpoint', `+js(endpoint)+`), true)`)
	registered(2) // the reconnect's, refused too
	b.do(chromedp.Reload())
	b.waitOnline()
	deadline := time.Now().Add(Step)
	for !strings.Contains(stored(), endpoint) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not store the subscription within %v (fcm.register sent %d times)", Step, registers())
		}
		pause()
	}
	registered(3)
	settings()
	if got := eval[string](b, refused); got != "Notifications are on." {
		t.Fatalf("with the subscription kept, Settings say %q", got)
	}
	if eval[bool](b, `[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('refused'))`) {
		t.Fatal("a refusal notice shows though the gateway kept the subscription")
	}
	eval[bool](b, `(document.querySelector('dialog.settings [data-test=push] ~ [role=status]').scrollIntoView({block: 'center'}), true)`)
	b.shot("p03-settings-on")

	// The service worker, with no window of the app visible, shows what
	// the push service delivers, with the payload's fields (push/webpush.go:
	// title, body, chat_id, thread_id, message_id, cursor, type, tag,
	// priority). The tag is the gateway's name for the notification a push
	// replaces: two with one tag leave one notification, the newest; another
	// tag, of the same lane, is another notification.
	var reg serviceworker.RegistrationID
	for ev, err := range registrations {
		if err != nil {
			t.Fatalf("the service worker's registration: %v", err)
		}
		for _, r := range ev.Registrations {
			if strings.HasPrefix(r.ScopeURL, origin) && !r.IsDeleted {
				reg = r.RegistrationID
			}
		}
		if reg != "" {
			break
		}
	}
	b.do(chromedp.Navigate("about:blank"))
	for _, p := range []map[string]any{
		{"title": "Default", "body": "first news", "chat_id": "default", "thread_id": "", "type": "message", "tag": "default", "priority": 3},
		{"title": "Default", "body": "newer news", "chat_id": "default", "thread_id": "", "type": "message", "tag": "default", "priority": 3},
		{"title": "Default", "body": "May I run it?", "chat_id": "default", "thread_id": "", "type": "picker", "tag": "default:asks", "priority": 4},
	} {
		data, _ := json.Marshal(p)
		if _, err := chromedp.Call(ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: origin, RegistrationID: reg, Data: string(data)}); err != nil {
			t.Fatalf("delivering a push: %v", err)
		}
	}
	b.do(chromedp.Navigate(base))
	b.wait("the service worker", `!!navigator.serviceWorker.controller`)
	want := `[{"Tag":"default","Body":"newer news","Lane":"default"},{"Tag":"default:asks","Body":"May I run it?","Lane":"default"}]`
	shown := `(async () => JSON.stringify((await (await navigator.serviceWorker.ready).getNotifications())
		.map(n => ({ Tag: n.tag, Body: n.body, Lane: n.data && n.data.lane })).sort((a, b) => a.Tag < b.Tag ? -1 : 1)))()`
	deadline = time.Now().Add(Step)
	for {
		got := eval[string](b, shown)
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the notifications shown are %s, want %s", got, want)
		}
		pause()
	}
}
