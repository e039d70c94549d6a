package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

func TestPushWakesOnlyAwayDevicesAndSetsLastPushed(t *testing.T) {
	nt := fakentfy.New(t)
	nt.Set(func(s *fakentfy.Server) { s.Tokens = map[string][]string{"tk_ntfy": {"phone-topic"}} })
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Push = server.PushConfig{NtfyServer: nt.URL, NtfyToken: "tk_ntfy", NtfyClick: "https://chat.example.invalid/", Content: "full"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	phone, err := client.Dial(ctx, g.URL, client.Options{Token: testgw.Token, DeviceID: "phone", NtfyTopic: "phone-topic"})
	if err != nil {
		t.Fatal(err)
	}
	if caps := phone.HelloAck().ServerCaps; caps.Push != "ntfy" || caps.PushNtfyServer != nt.URL {
		t.Fatalf("server_caps = %+v", caps)
	}
	start := phone.HelloAck().SyncCursor
	phone.Close()
	for range phone.Events() {
	}
	// Away only once the hub has forgotten it: a message sent before that
	// goes to it live and wakes nothing (failed 1 in ~10 runs under load).
	g.WaitOffline(t, "phone")

	tablet := g.Dial(t, "tablet")
	tablet.MustDo("message.send", def, map[string]any{"text": "wake the phone"})
	stop := tablet.Expect("message.stop", nil)
	tablet.Expect("agent.idle", nil)
	msgs := nt.Wait(t, 1, testgw.Wait)
	if len(msgs) != 1 || msgs[0].Topic != "phone-topic" || msgs[0].Body != "wake the phone" {
		t.Fatalf("pushes = %+v (the tablet is online and must get none)", msgs)
	}
	// The configured access token and click URL reach the ntfy server;
	// the click URL names the message the push announces.
	if msgs[0].Auth != "Bearer tk_ntfy" || !strings.HasPrefix(msgs[0].Click, "https://chat.example.invalid/?") ||
		!strings.Contains(msgs[0].Click, "message_id="+testgw.Str(t, stop, "message_id")) {
		t.Fatalf("ntfy: Authorization %q, Click %q", msgs[0].Auth, msgs[0].Click)
	}

	// The cursor is recorded once the ntfy server has answered, which is
	// after the fake saw the request.
	waitLastPushed(t, g, "phone", start)

	// Back online: the ack says what push already showed; sync replays it
	// with its cursor so the app can skip re-notifying.
	back := g.Dial(t, "phone")
	lp := back.HelloAck().LastPushedCursor
	if lp <= start {
		t.Fatalf("last_pushed_cursor = %d, want past %d", lp, start)
	}
	back.MustDo("sync", client.Lane{}, map[string]any{"cursor": start})
	replayed := back.Expect("message.stop", func(f client.Frame) bool {
		return testgw.Str(t, f, "message_id") == testgw.Str(t, stop, "message_id")
	})
	if replayed.Cursor != lp {
		t.Fatalf("the pushed frame replays with cursor %d, last_pushed_cursor is %d", replayed.Cursor, lp)
	}
}

// TestPushCapsWithFCMAndNtfy: with both FCM and ntfy configured the app
// is told push "fcm", and push_ntfy_server is empty, as the schema has it
// "when the backend is not ntfy".
func TestPushCapsWithFCMAndNtfy(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "demo-project", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "irisgate@demo-project.iam.gserviceaccount.com", "token_uri": "http://127.0.0.1:1/token",
	})
	saFile := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(saFile, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Push = server.PushConfig{FCMServiceAccount: saFile, NtfyServer: "https://ntfy.example.invalid"}
	})
	caps := g.Dial(t, "phone").HelloAck().ServerCaps
	if caps.Push != "fcm" || caps.PushNtfyServer != "" {
		t.Fatalf("server_caps = %+v", caps)
	}
}

// TestPushSkipsADeviceThatIsBack: the gateway's pusher knows who is
// online. A push still queued for a device when it reconnects (a retry
// of a failing backend, say) is dropped: the device has the frame live or
// from sync.
func TestPushSkipsADeviceThatIsBack(t *testing.T) {
	nt := fakentfy.New(t)
	g := testgw.Start(t, func(c *server.AppConfig) { c.Push = server.PushConfig{NtfyServer: nt.URL} })
	ctx := context.Background()
	if err := g.App.Store.SetPushRegistration(ctx, "phone", "", "phone-topic"); err != nil {
		t.Fatal(err)
	}
	g.Dial(t, "phone")
	if err := g.App.Push.Enqueue(ctx, "phone", push.Note{Body: "queued while away", Cursor: 1, Collapse: "default"}); err != nil {
		t.Fatal(err)
	}
	g.App.Push.SendDue(ctx)
	if msgs := nt.Messages(); len(msgs) != 0 {
		t.Fatalf("pushed to a device that is online: %+v", msgs)
	}
	if n, _ := g.SQLite(t).PendingPushes(ctx); n != 0 {
		t.Fatalf("%d pushes kept for a device that is online", n)
	}
}

func TestCronPostsIntoItsChannel(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	j := runCronText(t, g, "standup", "Time for the standup")
	m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "cron" })
	if testgw.Str(t, m, "text") != "Time for the standup" || m.ChatID != "default" {
		t.Fatalf("cron message = %s", m.Raw)
	}
	n := d.Expect("notification", nil)
	if testgw.Str(t, n, "kind") != "cron" || testgw.Str(t, n, "title") != "standup" {
		t.Fatalf("notification = %s", n.Raw)
	}
	// It ran once and is scheduled again, an hour on.
	got, _ := g.App.Store.CronJob(context.Background(), j.ID)
	if !got.Enabled || time.Until(got.NextRun) < 50*time.Minute {
		t.Fatalf("after the run: %+v", got)
	}
}

// TestCronSilentReplyDeliversNothing: a job whose prompt the agent
// answers with exactly [SILENT] (surrounding blank space aside) posts no
// message and no notification, and leaves nothing in history; an answer
// that merely starts with it is posted. (The echo agent answers with the
// prompt itself.)
func TestCronSilentReplyDeliversNothing(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	ctx := context.Background()
	run := func(prompt string) {
		t.Helper()
		j, err := cron.Add(ctx, g.App.Store, store.CronJob{Name: "quiet", Schedule: "every 1h", Prompt: prompt}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := g.App.GW.RunCron(ctx, j, nil); err != nil {
			t.Fatalf("running %q: %v", prompt, err)
		}
	}
	run("[SILENT]")
	run(" [SILENT]\n")
	run("[SILENT] but not quite")
	// Commits are ordered: had a silent job posted, its frames would come
	// before the last job's message.
	got := until(t, d, func(f client.Frame) bool { return f.Type == "message" && testgw.Str(t, f, "role") == "cron" })
	if m := got[len(got)-1]; testgw.Str(t, m, "text") != "[SILENT] but not quite" {
		t.Fatalf("the first cron message is %s", m.Raw)
	}
	none(t, "phone", got, func(f client.Frame) bool { return f.Type == "notification" })
	d.Expect("notification", nil) // the posted job's
	h := d.MustDo("history", def, map[string]any{})
	var p struct{ Messages []struct{ Text string } }
	h.Decode(&p)
	if len(p.Messages) != 1 || p.Messages[0].Text != "[SILENT] but not quite" {
		t.Fatalf("history = %+v", p.Messages)
	}
}

func TestSendAPI(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.Mobile.DeliverTokens = []string{"deliver-secret"} })
	d := g.Dial(t, "phone")
	// post sends JSON over TCP with hdr, or with hdr nil over the admin
	// socket, as irisgate send does on the gateway's machine.
	post := func(body string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/api/send", bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		hc := http.DefaultClient
		if hdr == nil {
			hc = localHTTP(g)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := post(`{"chat_id":"default","text":"backup finished"}`, nil)
	if code != 200 {
		t.Fatalf("local send: %d %s", code, body)
	}
	var ok struct {
		MessageID string `json:"message_id"`
	}
	json.Unmarshal([]byte(body), &ok)
	m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == ok.MessageID })
	if testgw.Str(t, m, "text") != "backup finished" {
		t.Fatalf("delivered %s", m.Raw)
	}
	// It is kept in history, for a device away longer than the outbox keeps
	// frames.
	h := d.MustDo("history", def, map[string]any{})
	var page struct {
		Messages []struct {
			MessageID string `json:"message_id"`
			Role      string `json:"role"`
			Text      string `json:"text"`
		} `json:"messages"`
	}
	h.Decode(&page)
	if len(page.Messages) != 1 || page.Messages[0].MessageID != ok.MessageID || page.Messages[0].Role != "assistant" || page.Messages[0].Text != "backup finished" {
		t.Fatalf("history %s", h.Raw)
	}
	// Over TCP a token is needed, from loopback as through a proxy,
	// whichever header (or none) a proxy names the client in.
	for _, h := range []map[string]string{
		{}, {"Forwarded": "for=203.0.113.9"}, {"X-Real-IP": "203.0.113.9"}, {"X-Forwarded-For": "203.0.113.9"},
	} {
		if code, body := post(`{"chat_id":"default","text":"spoofed"}`, h); code != http.StatusForbidden || !strings.Contains(body, "delivery token") {
			t.Fatalf("forwarded (%v) without token: %d %s", h, code, body)
		}
	}
	fwd := map[string]string{"X-Forwarded-For": "203.0.113.9"}
	fwd["Authorization"] = "Bearer deliver-secret"
	if code, body := post(`{"chat_id":"default","text":"with token"}`, fwd); code != 200 {
		t.Fatalf("forwarded with token: %d %s", code, body)
	}
	if code, _ := post(`{"chat_id":"chan_nope","text":"x"}`, nil); code != http.StatusNotFound {
		t.Fatalf("unknown channel: %d", code)
	}
	if code, body := post(`not json`, nil); code != http.StatusBadRequest || !strings.Contains(body, "must be JSON") {
		t.Fatalf("bad body: %d %s", code, body)
	}
	// Too long: the text's own limit, then the body's, each named.
	if code, body := post(`{"chat_id":"default","text":"`+strings.Repeat("a", 64<<10+1)+`"}`, nil); code != http.StatusBadRequest || !strings.Contains(body, "the limit is 65536") {
		t.Fatalf("text over the limit: %d %s", code, body)
	}
	if code, body := post(`{"chat_id":"default","text":"`+strings.Repeat("a", 1<<20)+`"}`, nil); code != http.StatusBadRequest || !strings.Contains(body, "larger than 1048576 bytes") {
		t.Fatalf("body over the limit: %d %s", code, body)
	}
}

func TestWebPushRegistration(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Push.WebPush = true })
	d := g.Dial(t, "browser")
	if key := d.HelloAck().ServerCaps.VAPIDPublicKey; len(key) < 40 {
		t.Fatalf("no VAPID key in hello.ack: %+v", d.HelloAck().ServerCaps)
	}
	sub := `{"endpoint":"https://push.example.invalid/abc","keys":{"p256dh":"BExample","auth":"secret"}}`
	d.MustDo("fcm.register", client.Lane{}, map[string]any{"webpush": sub})
	dev, err := g.App.Store.Device(context.Background(), "browser")
	if err != nil || dev.WebPush == nil || dev.WebPush.Endpoint != "https://push.example.invalid/abc" || dev.WebPush.Keys != (record.WebPushKeys{P256dh: "BExample", Auth: "secret"}) {
		t.Fatalf("stored subscription %+v, %v", dev.WebPush, err)
	}
	if _, err := d.Do("fcm.register", client.Lane{}, map[string]any{"webpush": `{"endpoint":"ftp://x"}`}); err == nil {
		t.Fatal("a bad subscription was accepted")
	}
	webKey := func(g *testgw.GW) string {
		t.Helper()
		res, err := http.Get("http://" + g.Addr + "/api/webpush")
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("GET /api/webpush: %v %v", res, err)
		}
		defer res.Body.Close()
		var k struct {
			PublicKey string `json:"public_key"`
		}
		json.NewDecoder(res.Body).Decode(&k)
		return k.PublicKey
	}
	key := d.HelloAck().ServerCaps.VAPIDPublicKey
	if got := webKey(g); got != key {
		t.Fatalf("GET /api/webpush offers %q, hello.ack %q", got, key)
	}
	// The keys are made on first start only: browsers subscribed with
	// them stay reachable after a restart.
	g.Close()
	again := testgw.StartIn(t, g.Dir, func(c *server.AppConfig) { c.Push.WebPush = true })
	if got := webKey(again); got != key {
		t.Fatalf("after a restart the VAPID key is %q, was %q", got, key)
	}
}

func TestCronPostsAreInHistory(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	runCronText(t, g, "digest", "Daily digest")
	d.Expect("notification", nil)
	h := d.MustDo("history", def, map[string]any{})
	var p struct {
		Messages []struct{ Role, Text, Model string }
	}
	h.Decode(&p)
	if len(p.Messages) != 1 || p.Messages[0].Text != "Daily digest" || p.Messages[0].Role != "assistant" || p.Messages[0].Model != "cron: digest" {
		t.Fatalf("history = %+v", p.Messages)
	}
}

func TestCronSlashCommand(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	sys := func() string {
		f := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "system" })
		return testgw.Str(t, f, "text")
	}
	d.MustDo("message.send", def, map[string]any{"text": "/cron add every 2h | Check the deploy queue"})
	if txt := sys(); !strings.Contains(txt, "Added cron_") {
		t.Fatalf("add: %q", txt)
	}
	jobs, _ := g.App.Store.CronJobs(context.Background())
	if len(jobs) != 1 || jobs[0].Prompt != "Check the deploy queue" || jobs[0].ChatID != "default" {
		t.Fatalf("jobs = %+v", jobs)
	}
	d.MustDo("message.send", def, map[string]any{"text": "/cron pause " + jobs[0].ID})
	sys()
	if j, _ := g.App.Store.CronJob(context.Background(), jobs[0].ID); j.Enabled {
		t.Fatal("not paused")
	}
	d.MustDo("message.send", def, map[string]any{"text": "/cron"})
	if txt := sys(); !strings.Contains(txt, "paused") {
		t.Fatalf("list: %q", txt)
	}
	d.MustDo("message.send", def, map[string]any{"text": "/cron add nonsense | x"})
	if txt := sys(); !strings.Contains(txt, "not a schedule") {
		t.Fatalf("bad schedule: %q", txt)
	}
}

// waitLastPushed waits until the store records a push to device past
// cursor.
func waitLastPushed(t *testing.T, g *testgw.GW, device string, cursor int64) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testgw.Wait)
	for {
		d, err := g.App.Store.Device(context.Background(), device)
		if err == nil && d.LastPushedCursor > cursor {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("last_pushed_cursor of %s never passed %d", device, cursor)
		}
	}
}
