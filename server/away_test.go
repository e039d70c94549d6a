package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// fakeNtfy records what is published to it.
type fakeNtfy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []ntfyMsg
	seen chan struct{}
}

type ntfyMsg struct {
	Topic, Title, Body string
}

func newFakeNtfy(t *testing.T) *fakeNtfy {
	f := &fakeNtfy{seen: make(chan struct{}, 100)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.got = append(f.got, ntfyMsg{Topic: strings.TrimPrefix(r.URL.Path, "/"), Title: r.Header.Get("Title"), Body: string(b)})
		f.mu.Unlock()
		f.seen <- struct{}{}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNtfy) messages() []ntfyMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ntfyMsg(nil), f.got...)
}

func TestPushWakesOnlyAwayDevicesAndSetsLastPushed(t *testing.T) {
	nt := newFakeNtfy(t)
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Push = server.PushConfig{NtfyServer: nt.srv.URL, Content: "full"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	phone, err := client.Dial(ctx, g.URL, client.Options{Token: testgw.Token, DeviceID: "phone", NtfyTopic: "phone-topic"})
	if err != nil {
		t.Fatal(err)
	}
	if caps := phone.Welcome().ServerCaps; caps["push"] != "ntfy" || caps["push_ntfy_server"] != nt.srv.URL {
		t.Fatalf("server_caps = %v", caps)
	}
	start := phone.Welcome().SyncCursor
	phone.Close()
	for range phone.Events() {
	}

	tablet := g.Dial(t, "tablet")
	tablet.MustDo("message.send", def, map[string]any{"text": "wake the phone"})
	stop := tablet.Expect("message.stop", nil)
	tablet.Expect("agent.idle", nil)
	select {
	case <-nt.seen:
	case <-time.After(testgw.Wait):
		t.Fatal("no push for the away device")
	}
	msgs := nt.messages()
	if len(msgs) != 1 || msgs[0].Topic != "phone-topic" || msgs[0].Body != "wake the phone" {
		t.Fatalf("pushes = %+v (the tablet is online and must get none)", msgs)
	}

	// Back online: the ack says what push already showed; sync replays it
	// with its cursor so the app can skip re-notifying.
	back := g.Dial(t, "phone")
	lp := back.Welcome().LastPushedCursor
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

func TestCronPostsIntoItsChannel(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	ctx := context.Background()
	j, err := cron.Add(ctx, g.App.Store, store.CronJob{Name: "standup", Schedule: "every 1h", Text: "Time for the standup"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := cron.RunNow(ctx, g.App.Store, j.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "cron" })
	if testgw.Str(t, m, "text") != "Time for the standup" || m.ChatID != "default" {
		t.Fatalf("cron message = %s", m.Raw)
	}
	n := d.Expect("notification", nil)
	if testgw.Str(t, n, "kind") != "cron" || testgw.Str(t, n, "title") != "standup" {
		t.Fatalf("notification = %s", n.Raw)
	}
	// It ran once and is scheduled again, an hour on.
	got, _ := g.App.Store.CronJob(ctx, j.ID)
	if !got.Enabled || time.Until(got.NextRun) < 50*time.Minute {
		t.Fatalf("after the run: %+v", got)
	}
}

func TestSendAPI(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.MobileDeliverTokens = []string{"deliver-secret"} })
	d := g.Dial(t, "phone")
	post := func(body string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/api/send", bytes.NewBufferString(body))
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
	code, body := post(`{"chat_id":"default","text":"backup finished"}`, nil)
	if code != 200 {
		t.Fatalf("loopback send: %d %s", code, body)
	}
	var ok struct {
		MessageID string `json:"message_id"`
	}
	json.Unmarshal([]byte(body), &ok)
	m := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == ok.MessageID })
	if testgw.Str(t, m, "text") != "backup finished" {
		t.Fatalf("delivered %s", m.Raw)
	}
	// Through a proxy the caller is not loopback: a token is needed.
	fwd := map[string]string{"X-Forwarded-For": "203.0.113.9"}
	if code, _ := post(`{"chat_id":"default","text":"x"}`, fwd); code != http.StatusForbidden {
		t.Fatalf("forwarded without token: %d", code)
	}
	fwd["Authorization"] = "Bearer deliver-secret"
	if code, body := post(`{"chat_id":"default","text":"with token"}`, fwd); code != 200 {
		t.Fatalf("forwarded with token: %d %s", code, body)
	}
	if code, _ := post(`{"chat_id":"chan_nope","text":"x"}`, nil); code != http.StatusNotFound {
		t.Fatalf("unknown channel: %d", code)
	}
	if code, _ := post(`not json`, nil); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
}

func TestWebPushRegistration(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Push.WebPush = true })
	d := g.Dial(t, "browser")
	if key, _ := d.Welcome().ServerCaps["vapid_public_key"].(string); len(key) < 40 {
		t.Fatalf("no VAPID key in hello.ack: %v", d.Welcome().ServerCaps)
	}
	sub := `{"endpoint":"https://push.example.invalid/abc","keys":{"p256dh":"BExample","auth":"secret"}}`
	if err := d.Send(context.Background(), "fcm.register", client.Lane{}, map[string]any{"webpush": sub}); err != nil {
		t.Fatal(err)
	}
	d.MustDo("ping", client.Lane{}, map[string]any{}) // fcm.register has no reply: wait on a later one
	dev, err := g.App.Store.Device(context.Background(), "browser")
	if err != nil || dev.WebPush != sub {
		t.Fatalf("stored subscription %q, %v", dev.WebPush, err)
	}
	if _, err := d.Do("fcm.register", client.Lane{}, map[string]any{"webpush": `{"endpoint":"ftp://x"}`}); err == nil {
		t.Fatal("a bad subscription was accepted")
	}
	res, err := http.Get("http://" + g.Addr + "/api/webpush")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /api/webpush: %v %v", res, err)
	}
	res.Body.Close()
}

func TestCronPostsAreInHistory(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	ctx := context.Background()
	j, _ := cron.Add(ctx, g.App.Store, store.CronJob{Name: "digest", Schedule: "every 1h", Text: "Daily digest"}, time.Now())
	cron.RunNow(ctx, g.App.Store, j.ID, time.Now())
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
