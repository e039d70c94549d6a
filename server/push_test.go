package server_test

// Push end to end against the fake ntfy server (internal/fakentfy, which
// answers as ntfy v2.13 does): what an away phone is woken with, what a
// device learns when it registers an address ntfy would refuse.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// awayPhone says hello with an ntfy topic and leaves.
func awayPhone(t *testing.T, g *testgw.GW, id, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	c, err := client.Dial(ctx, g.URL, client.Options{Token: testgw.Token, DeviceID: id, NtfyTopic: topic})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for range c.Events() {
	}
	g.WaitOffline(t, id)
}

// Issue 14 item 6: an approval wakes an away phone as an approval:
// priority 4, the question tag and the picker's title, though the
// notification committed after the picker has the same lane.
func TestApprovalPushKeepsItsUrgency(t *testing.T) {
	nt := fakentfy.New(t)
	r := agStart(t, func(_ *agent.ModelConfig, c *server.AppConfig) {
		if c != nil {
			c.Push = server.PushConfig{NtfyServer: nt.URL, WebApp: "https://iris.example.invalid/", Hold: 2 * time.Second, Content: "full"}
		}
	})
	awayPhone(t, r.g, "phone", "phone-topic")
	cmd := r.dangerous("junk")
	tablet := r.dial("tablet")
	send(t, tablet, def, "clean up")
	p := expectApproval(t, tablet, cmd)
	got := nt.Wait(t, 1, testgw.Wait)
	if m := got[0]; m.Priority != 4 || !slices.Equal(m.Tags, []string{"question"}) || m.Title != p.Title || m.Body != cmd {
		t.Fatalf("the approval woke the phone with %+v", m)
	}
	// Without --ntfy-click a tap opens the chat in the web app.
	if u, err := url.Parse(got[0].Click); err != nil || u.Host != "iris.example.invalid" || u.Fragment != "/c/default" || u.Query().Get("chat_id") != "default" || u.Query().Get("cursor") == "" {
		t.Fatalf("click %q", got[0].Click)
	}
	selectChoice(t, tablet, p.PickerID, "deny")
	until(t, tablet, is(t, "agent.idle"))
}

// Issue 14 item 6: a cron post and its notification are one push, with
// the job's name for title, the cron tag, and the post's message id.
func TestCronPushKeepsItsTitleAndTag(t *testing.T) {
	nt := fakentfy.New(t)
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Push = server.PushConfig{NtfyServer: nt.URL, NtfyClick: "https://chat.example.invalid/", Hold: 2 * time.Second, Content: "full"}
	})
	awayPhone(t, g, "phone", "phone-topic")
	tablet := g.Dial(t, "tablet")
	runCronText(t, g, "standup", "Time for the standup")
	post := tablet.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "cron" })
	tablet.Expect("notification", nil)
	m := nt.Wait(t, 1, testgw.Wait)[0]
	if m.Title != "standup" || !slices.Equal(m.Tags, []string{"alarm_clock"}) || m.Priority != 3 || m.Body != "Time for the standup" ||
		!strings.Contains(m.Click, "message_id="+testgw.Str(t, post, "message_id")) {
		t.Fatalf("the cron post woke the phone with %+v", m)
	}
	waitPending(t, g, 0)
	if got := nt.Messages(); len(got) != 1 {
		t.Fatalf("%d pushes for one cron post: %+v", len(got), got)
	}
}

// Issue 14 item 10: a menu a device opens for itself (/reasoning) wakes
// no other device; the reply that follows does, at default priority.
func TestCommandPickerWakesNobody(t *testing.T) {
	nt := fakentfy.New(t)
	g := testgw.Start(t, func(c *server.AppConfig) { c.Push = server.PushConfig{NtfyServer: nt.URL, Content: "full"} })
	awayPhone(t, g, "phone", "phone-topic")
	tablet := g.Dial(t, "tablet")
	tablet.MustDo("message.send", def, map[string]any{"text": "/reasoning"})
	tablet.Expect("picker.choice", nil)
	// A push the picker had queued for the phone would go out before, or
	// merged into, the push of this reply: they share the lane.
	send(t, tablet, def, "after the menu")
	tablet.Expect("message.stop", nil)
	got := nt.Wait(t, 1, testgw.Wait)
	waitPending(t, g, 0)
	got = nt.Messages()
	if len(got) != 1 || got[0].Body != "after the menu" || got[0].Priority != 3 || !slices.Equal(got[0].Tags, []string{"speech_balloon"}) {
		t.Fatalf("pushes to the away phone: %+v", got)
	}
}

// Issue 14 item 8 and issue 12 item 7: an address ntfy would refuse is
// refused when a device registers it, with an error it can show. A hello
// is still accepted (a valid owner is never locked out), and an error
// frame says why push is off; fcm.register is refused with its id. An
// fcm.register with an id gets exactly one reply: a pong with the id,
// or the error.
func TestRegistrationRefusesAddressesNtfyRefuses(t *testing.T) {
	nt := fakentfy.New(t)
	g := testgw.Start(t, func(c *server.AppConfig) { c.Push = server.PushConfig{NtfyServer: nt.URL} })
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	c, err := client.Dial(ctx, g.URL, client.Options{Token: testgw.Token, DeviceID: "phone", NtfyTopic: "my.phone"})
	if err != nil {
		t.Fatalf("a hello with a bad topic was refused: %v", err)
	}
	defer c.CloseNow()
	for f := range c.Events() {
		if err := testgw.Schema(t).Server(f.Raw); err != nil {
			t.Fatal(err)
		}
		if f.Type != "error" {
			continue
		}
		var e struct{ Code, Message string }
		f.Decode(&e)
		if f.ID != 0 || e.Code != "unsupported" || !strings.Contains(e.Message, `"my.phone"`) || !strings.Contains(e.Message, "push through ntfy stays off") {
			t.Fatalf("error %s", f.Raw)
		}
		break
	}
	st := g.App.Store
	if d, _ := st.Device(ctx, "phone"); d.NtfyTopic != "" {
		t.Fatalf("stored the topic %q", d.NtfyTopic)
	}

	tablet := g.Dial(t, "tablet")
	for _, tc := range []struct{ name, fcm, topic, says string }{
		{"reserved topic", "", "docs", "reserves for its own pages"},
		{"topic with a dot", "", "my.phone", "only letters, digits"},
		{"topic too long", "", strings.Repeat("a", 65), "1–64 characters"},
		{"FCM token with a space", "tok en", "", "fcm_token"},
	} {
		f, err := tablet.Do("fcm.register", client.Lane{}, map[string]any{"fcm_token": tc.fcm, "ntfy_topic": tc.topic})
		wantCode(t, err, "unsupported")
		if f.ID == 0 || !strings.Contains(err.Error(), tc.says) {
			t.Fatalf("%s: %s (%v)", tc.name, f.Raw, err)
		}
	}
	if d, _ := st.Device(ctx, "tablet"); d.NtfyTopic != "" || d.FCMToken != "" {
		t.Fatalf("a refused registration stored %+v", d)
	}
	reg := tablet.MustDo("fcm.register", client.Lane{}, map[string]any{"ntfy_topic": "tablet-topic_1"})
	ping := tablet.MustDo("ping", client.Lane{}, map[string]any{})
	if reg.Type != "pong" || reg.ID == 0 {
		t.Fatalf("fcm.register answered %s", reg.Raw)
	}
	tablet.Expect("pong", func(f client.Frame) bool { return f.ID == ping.ID })
	n := 0
	for _, f := range tablet.Seen {
		if f.ID == reg.ID {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("fcm.register got %d replies: %+v", n, tablet.Seen)
	}
	if d, _ := st.Device(ctx, "tablet"); d.NtfyTopic != "tablet-topic_1" {
		t.Fatalf("stored topic %q", d.NtfyTopic)
	}
	// Without an id, success says nothing, and a refusal still says why
	// (an error without an id).
	for _, topic := range []string{"tablet-topic_2", "a/b"} {
		if err := tablet.Send(ctx, "fcm.register", client.Lane{}, map[string]any{"ntfy_topic": topic}); err != nil {
			t.Fatal(err)
		}
	}
	if e := tablet.Expect("error", nil); e.ID != 0 || !strings.Contains(string(e.Payload), "a/b") {
		t.Fatalf("error %s", e.Raw)
	}
	for _, f := range tablet.Seen {
		if f.ID == 0 && f.Type == "pong" {
			t.Fatalf("an fcm.register without an id was answered: %s", f.Raw)
		}
	}
	if d, _ := st.Device(ctx, "tablet"); d.NtfyTopic != "tablet-topic_2" {
		t.Fatalf("stored topic %q", d.NtfyTopic)
	}
}

// Issue 14 item 8: push outcomes are counted in /metrics, by backend and
// outcome; a token the ntfy server does not know is an auth failure.
func TestPushOutcomesInMetrics(t *testing.T) {
	nt := fakentfy.New(t)
	nt.Set(func(s *fakentfy.Server) { s.Tokens = map[string][]string{"tk_good": {"*"}} })
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Push = server.PushConfig{NtfyServer: nt.URL, NtfyToken: "tk_stale"}
	})
	awayPhone(t, g, "phone", "phone-topic")
	tablet := g.Dial(t, "tablet")
	send(t, tablet, def, "wake up")
	const line = `irisgate_push_total{backend="ntfy",outcome="auth"} 1`
	metrics := func() string {
		res, err := http.Get("http://" + g.Addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	// The outcome is counted before the try ends, which changes the queue.
	g.WaitPush(t, line+" in /metrics", func() bool { return nt.Requests() > 0 && strings.Contains(metrics(), line) })
	if n := nt.Requests(); n != 1 {
		t.Fatalf("%d requests, want one then a backoff", n)
	}
}

// waitPending waits until the push queue holds n pushes.
func waitPending(t *testing.T, g *testgw.GW, n int) {
	t.Helper()
	g.WaitPush(t, fmt.Sprintf("%d pushes pending", n), func() bool {
		got, err := g.SQLite(t).PendingPushes(context.Background())
		return err == nil && got == n
	})
}
