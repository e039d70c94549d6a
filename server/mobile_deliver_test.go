package server_test

// Hermes Mobile v1's prompts (a choice the agent asks, answered by a
// button or text, or left to expire) and deliver frames (a cron or a
// script posting into a session), over real WebSockets.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

func TestMobilePrompts(t *testing.T) {
	g := mobileGW(t, withAgent(askAgent{}))
	p := connectPhone(t, g, "tel-1")
	other := connectPhone(t, g, "tel-2")

	card := func(input string) mf {
		t.Helper()
		p.send(text(seq("m"), input))
		fs := p.until(func(f mf) bool { return f.T() == "prompt" || (f.T() == "message" && f.B("final")) })
		if last := fs[len(fs)-1]; last.T() != "prompt" {
			t.Fatalf("no card for %q: %v", input, last)
		}
		return fs[len(fs)-1]
	}
	answer := func(c mf, option, text string) mf {
		t.Helper()
		f := map[string]any{"t": "prompt", "prompt_id": c.S("id")}
		if option != "" {
			f["option_id"] = option
		}
		if text != "" {
			f["text"] = text
		}
		p.send(f)
		// What the answer caused may come before prompt_done: keep it.
		fs := p.until(func(d mf) bool { return d.T() == "prompt_done" && d.S("id") == c.S("id") })
		p.unread(fs[:len(fs)-1])
		return fs[len(fs)-1]
	}
	options := func(c mf) string {
		var s []string
		for _, o := range c["options"].([]any) {
			m := o.(map[string]any)
			s = append(s, fmt.Sprintf("%s:%s:%s", m["id"], m["label"], m["style"]))
		}
		return strings.Join(s, ",")
	}

	t.Run("exec_approval", func(t *testing.T) {
		c := card("approve a")
		if c.S("kind") != "exec_approval" || c.S("command") != "rm -rf /tmp/a" || c.S("description") != "removes a scratch directory" ||
			c.S("session") != "mobile:tel-1" || c.N("timeout_seconds") != 300 || c.S("text") != "Run this command?" {
			t.Fatalf("card = %v", c)
		}
		if got := options(c); got != "once:Allow once:primary,session:Allow for this session:,always:Always allow:,deny:Deny:danger" {
			t.Fatalf("options = %s", got)
		}
		// Only the device it is shown to may answer.
		if e := other.wantError(map[string]any{"t": "prompt", "prompt_id": c.S("id"), "option_id": "once"}, "forbidden"); e == nil {
			t.Fatal("no error")
		}
		// A forged option is the safe default, and says so.
		if d := answer(c, "sudo-everything", ""); d.S("option_id") != "deny" || d.B("expired") {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("approval: deny")
		// The card is closed now.
		if d := answer(c, "once", ""); !d.B("expired") {
			t.Fatalf("a second answer: %v", d)
		}
		c = card("approve b")
		if d := answer(c, "once", ""); d.S("option_id") != "once" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("approval: once")
	})
	t.Run("clarify", func(t *testing.T) {
		c := card("clarify")
		if c.S("kind") != "clarify" || c.S("text") != "Which colour?" || c.S("command") != "" {
			t.Fatalf("card = %v", c)
		}
		if got := options(c); got != "c0:red:,c1:green:,other:Other…:" {
			t.Fatalf("options = %s", got)
		}
		if d := answer(c, "c1", ""); d.S("option_id") != "c1" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("answer: green")

		// other without text: the next text message is the answer.
		c = card("clarify")
		if d := answer(c, "c9", ""); d.S("option_id") != "other" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.send(text(seq("m"), "blue"))
		p.finalText("answer: blue")

		// Text instead of an option.
		c = card("clarify")
		if d := answer(c, "", "mauve"); d.S("option_id") != "other" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("answer: mauve")
	})
	t.Run("slash_confirm", func(t *testing.T) {
		// /new asks before forgetting a conversation.
		p.send(text(seq("m"), "remember this"))
		p.finalText("echo: remember this")
		// /new refuses while the turn runs, and it ends a moment after its
		// final text: the avatar's rest, 100 ms of quiet later, is after it.
		p.until(func(f mf) bool { return f.T() == "avatar" && f.S("state") == "idle" })
		c := card("/new")
		if c.S("kind") != "slash_confirm" || options(c) != "once:Start new session:primary,cancel:Cancel:danger" {
			t.Fatalf("card = %v, options %s", c, options(c))
		}
		// "always" is in the protocol's table but not on this card: the
		// safe default applies.
		if d := answer(c, "always", ""); d.S("option_id") != "cancel" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("Kept the current session")
		c = card("/new")
		if d := answer(c, "once", ""); d.S("option_id") != "once" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("New session")
	})
	t.Run("choice pickers are clarify cards", func(t *testing.T) {
		c := card("/fast")
		if c.S("kind") != "clarify" || !strings.HasPrefix(options(c), "c0:On:") {
			t.Fatalf("card = %v, options %s", c, options(c))
		}
		if d := answer(c, "c0", ""); d.S("option_id") != "c0" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("Fast mode on")
	})
	t.Run("a reconnecting device is shown its open cards", func(t *testing.T) {
		c := card("approve c")
		p = connectPhone(t, g, "tel-1")
		again := p.expect("prompt", nil)
		if again.S("id") != c.S("id") || again.N("timeout_seconds") > 300 {
			t.Fatalf("card after reconnect = %v", again)
		}
		if d := answer(again, "once", ""); d.S("option_id") != "once" {
			t.Fatalf("prompt_done = %v", d)
		}
		p.finalText("approval: once")
	})
}

func TestMobilePromptExpires(t *testing.T) {
	g := mobileGW(t, withAgent(askAgent{}), func(c *server.AppConfig) { c.Server.Mobile.PromptTTL = 300 * time.Millisecond })
	p := connectPhone(t, g, "tel-1")
	p.send(text("m1", "approve x"))
	c := p.expect("prompt", nil)
	if c.N("timeout_seconds") != 1 {
		t.Fatalf("timeout_seconds = %d for a 300 ms card", c.N("timeout_seconds"))
	}
	if d := p.expect("prompt_done", nil); d.S("id") != c.S("id") || !d.B("expired") || d.S("option_id") != "" {
		t.Fatalf("prompt_done = %v", d)
	}
	p.send(map[string]any{"t": "prompt", "prompt_id": c.S("id"), "option_id": "once"})
	if d := p.expect("prompt_done", nil); !d.B("expired") {
		t.Fatalf("answer to an expired card: %v", d)
	}
}

func TestMobileDeliver(t *testing.T) {
	g := mobileGW(t, func(c *server.AppConfig) {
		c.Server.Mobile.DeliverTokens = []string{"cron-token"}
	})
	laptop := g.Dial(t, "laptop")
	target := connectPhone(t, g, "tel-1")
	laptop.Expect("channel.created", is(t, "channel.created", "chat_id", "mobile:tel-1"))
	// A local service over the admin socket: no delivery token needed.
	cron := helloPhone(t, dialPhoneLocal(t, g), mhello(testgw.Token, "cron", "cron"))

	t.Run("text into the target's lane", func(t *testing.T) {
		cron.send(map[string]any{"t": "deliver", "id": "d1", "target": "mobile:tel-1", "text": "Reminder: stand up"})
		if fs := answers(cron.barrier()); len(fs) != 0 {
			t.Fatalf("the deliverer got %s", mtypes(fs))
		}
		if got := target.finalText("Reminder"); got != "Reminder: stand up" {
			t.Fatalf("delivered %q", got)
		}
		m := laptop.Expect("message", func(f client.Frame) bool { return f.ChatID == "mobile:tel-1" })
		if testgw.Str(t, m, "role") != "cron" || testgw.Str(t, m, "text") != "Reminder: stand up" {
			t.Fatalf("the laptop got %s", m.Raw)
		}
		n := laptop.Expect("notification", nil)
		if testgw.Str(t, n, "kind") != "cron" || n.ChatID != "mobile:tel-1" {
			t.Fatalf("notification %s", n.Raw)
		}
		// Without the prefix too.
		cron.send(map[string]any{"t": "deliver", "id": "d2", "target": "tel-1", "text": "second"})
		target.finalText("second")
	})
	t.Run("a long message in chunks of 3,500 characters", func(t *testing.T) {
		long := strings.Repeat("0123456789", 800)
		cron.send(map[string]any{"t": "deliver", "id": "d2b", "target": "tel-1", "text": long})
		id, got, fs := target.reply()
		var mine []mf
		for _, f := range fs {
			if f.T() == "message" && f.S("id") == id {
				mine = append(mine, f)
			}
		}
		if got != long || len(mine) != 3 {
			t.Fatalf("%d frames of %d characters", len(mine), len(got))
		}
		for i, f := range mine {
			if c := f.O("chunk"); c.N("index") != i || c.N("total") != 3 || f.B("edit") || f.B("final") != (i == 2) {
				t.Fatalf("frame %d: chunk %v edit %v final %v", i, c, f.B("edit"), f.B("final"))
			}
		}
	})
	t.Run("media in chunks", func(t *testing.T) {
		file := bytes.Repeat([]byte("0123456789abcdef"), 7<<20/32) // 3.5 MiB: two chunks
		cron.send(map[string]any{"t": "deliver", "id": "d3", "target": "tel-1",
			"media": map[string]any{"kind": "image", "filename": "chart.png", "caption": "today", "data": b64s(base64.StdEncoding.EncodeToString(file))}})
		var got []byte
		var id string
		for i := 0; ; i++ {
			f := target.expect("media", nil)
			if id == "" {
				id = f.S("id")
			}
			if f.S("id") != id || f.N("part") != i || f.N("parts") != 2 || f.N("size") != len(file) ||
				f.S("mime") != "image/png" || f.S("filename") != "chart.png" || f.S("kind") != "image" {
				t.Fatalf("media frame %d: part %d/%d size %d %s %s", i, f.N("part"), f.N("parts"), f.N("size"), f.S("mime"), f.S("filename"))
			}
			if (f.S("caption") == "today") != (i == 0) {
				t.Fatalf("caption on part %d", i)
			}
			b, err := base64.StdEncoding.DecodeString(f.S("data"))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b...)
			if f.B("final") {
				break
			}
		}
		if !bytes.Equal(got, file) {
			t.Fatalf("reassembled %d bytes, want the %d sent", len(got), len(file))
		}
	})
	for _, tc := range []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"target offline", map[string]any{"t": "deliver", "id": "d4", "target": "mobile:tel-9", "text": "x"}, "device_offline"},
		{"no target, no home device", map[string]any{"t": "deliver", "id": "d5", "text": "x"}, "bad_frame"},
		{"nothing to deliver", map[string]any{"t": "deliver", "id": "d6", "target": "tel-1"}, "bad_frame"},
		{"text of 12,001 characters", map[string]any{"t": "deliver", "id": "d7", "target": "tel-1", "text": strings.Repeat("x", 12001)}, "too_big"},
		{"media kind not sent to devices", map[string]any{"t": "deliver", "id": "d8", "target": "tel-1", "media": map[string]any{"kind": "audio", "data": b64(10)}}, "unsupported_frame"},
	} {
		t.Run(tc.name, func(t *testing.T) { cron.wantError(tc.frame, tc.code) })
	}
	t.Run("only with a delivery token or over the admin socket", func(t *testing.T) {
		// Loopback TCP proves nothing (a proxy on this host makes everyone
		// loopback), with or without a header naming the client.
		near := connectPhone(t, g, "near")
		near.wantError(map[string]any{"t": "deliver", "id": "d9", "target": "tel-1", "text": "spoofed"}, "forbidden")
		far := connectPhoneWith(t, g, proxied, mhello(testgw.Token, "far", "Far"))
		far.wantError(map[string]any{"t": "deliver", "id": "d10", "target": "tel-1", "text": "spoofed"}, "forbidden")
		svc := connectPhoneWith(t, g, proxied, mhello("cron-token", "cron-svc", "Cron"))
		svc.send(map[string]any{"t": "deliver", "id": "d11", "target": "tel-1", "text": "from the service"})
		target.finalText("from the service")
		// A delivery service's own lane is not listed until used.
		for _, c := range channels(t, laptop) {
			if c.ChatID == "mobile:cron-svc" {
				t.Fatalf("a delivery service got a channel: %+v", c)
			}
		}
	})
	if fs := target.barrier(); countT(fs, "error") != 0 {
		t.Fatalf("the target got errors: %v", fs)
	}
}

func TestMobileDeliverHomeDevice(t *testing.T) {
	g := mobileGW(t, func(c *server.AppConfig) { c.Server.Mobile.HomeDevice = "mobile:tel-1" })
	target := connectPhone(t, g, "tel-1")
	cron := helloPhone(t, dialPhoneLocal(t, g), mhello(testgw.Token, "cron", "cron"))
	cron.send(map[string]any{"t": "deliver", "id": "d1", "text": "to home"})
	target.finalText("to home")
}
