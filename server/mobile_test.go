package server_test

// Hermes Mobile v1 over real WebSockets: a test per row of the protocol's
// frame tables (device → server, server → device) and of its error codes,
// plus a gateway shared by an Iris device and a Hermes Mobile device.

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// replyAgent answers "echo: <input>" in one piece and keeps the
// conversation (so /new asks before forgetting it).
type replyAgent struct{}

func (replyAgent) Name() string { return "reply" }

func (replyAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	if t.Record != nil {
		t.Record(agent.Msg{Role: "user", Content: t.Input, MessageID: t.InputID})
		t.Record(agent.Msg{Role: "assistant", Content: "echo: " + t.Input})
	}
	emit(agent.Event{Kind: agent.Text, Text: "echo: " + t.Input})
	return nil
}

// askAgent asks the person through the gateway: "approve <x>" asks to run
// a command, "clarify" asks a question; anything else is echoed.
type askAgent struct{ replyAgent }

func (a askAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	switch {
	case t.Asker == nil:
		emit(agent.Event{Kind: agent.Text, Text: "no asker"})
	case strings.HasPrefix(t.Input, "approve"):
		v, err := t.Asker.Approve(ctx, "rm -rf /tmp/"+strings.TrimSpace(strings.TrimPrefix(t.Input, "approve")), "removes a scratch directory")
		if err != nil {
			return err
		}
		emit(agent.Event{Kind: agent.Text, Text: "approval: " + v})
	case t.Input == "clarify":
		v, err := t.Asker.Clarify(ctx, "Which colour?", []string{"red", "green"})
		if err != nil {
			return err
		}
		emit(agent.Event{Kind: agent.Text, Text: "answer: " + v})
	default:
		return a.replyAgent.Run(ctx, t, emit)
	}
	return nil
}

func withAgent(a agent.Agent) func(*server.AppConfig) {
	return func(c *server.AppConfig) { c.Agent = a }
}

func text(id, s string) map[string]any { return map[string]any{"t": "text", "id": id, "text": s} }

var b64cache sync.Map // size → b64s

// b64 is the base64 of n bytes (cached: the large ones are megabytes).
func b64(n int) b64s {
	if s, ok := b64cache.Load(n); ok {
		return s.(b64s)
	}
	s := b64s(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, n)))
	b64cache.Store(n, s)
	return s
}

// finalText waits for the next final message whose text contains want.
func (p *phone) finalText(want string) string {
	p.t.Helper()
	for {
		_, got, _ := p.reply()
		if strings.Contains(got, want) {
			return got
		}
	}
}

// --- hello / ready ---------------------------------------------------------

func TestMobileReady(t *testing.T) {
	g := mobileGW(t, func(c *server.AppConfig) { c.Server.Mobile.AvatarURL = "https://agent.example.com/avatar/" })
	p := dialPhone(t, g, nil)
	p.send(mhello(testgw.Token, "tel-1", "Pixel"))
	r := p.next()
	if r.T() != "ready" || r.N("v") != 1 || r.S("session") != "mobile:tel-1" || r.S("avatar_url") != "https://agent.example.com/avatar/" {
		t.Fatalf("ready = %v", r)
	}
	if d := r.O("device"); d.S("id") != "tel-1" || d.S("name") != "Pixel" {
		t.Fatalf("ready.device = %v", d)
	}
	c := r.O("capabilities")
	want := fmt.Sprint(map[string]any{
		"text": true, "voice": true, "typing": true, "edit": true,
		"avatar_states":   []any{"idle", "thinking", "speaking"},
		"media_in":        []any{"image", "video", "document", "audio"},
		"media_out":       []any{"image", "voice", "video", "document", "animation"},
		"prompts":         []any{"exec_approval", "slash_confirm", "clarify"},
		"max_media_bytes": float64(8388608), "max_text_chars": float64(12000),
	})
	if fmt.Sprint(map[string]any(c)) != want {
		t.Fatalf("capabilities = %v\nwant %s", c, want)
	}
	// Nothing else is said until something happens.
	if fs := answers(p.barrier()); len(fs) != 0 {
		t.Fatalf("frames after ready: %s", mtypes(fs))
	}

	t.Run("device fields truncated to 120 characters", func(t *testing.T) {
		long := strings.Repeat("é", 150)
		p := dialPhone(t, g, nil)
		p.send(mhello(testgw.Token, long, long))
		r := p.next()
		if want := "mobile:" + strings.Repeat("é", 120); r.S("session") != want || r.O("device").S("name") != strings.Repeat("é", 120) {
			t.Fatalf("ready = %v", r)
		}
	})
	t.Run("no device id gets dev-<hex>", func(t *testing.T) {
		p := dialPhone(t, g, nil)
		p.send(map[string]any{"t": "hello", "token": testgw.Token})
		r := p.next()
		id := r.O("device").S("id")
		if !strings.HasPrefix(id, "dev-") || len(id) != 16 || r.S("session") != "mobile:"+id {
			t.Fatalf("ready = %v", r)
		}
	})
	t.Run("t is case-insensitive", func(t *testing.T) {
		p := dialPhone(t, g, nil)
		h := mhello(testgw.Token, "tel-case", "Case")
		h["t"] = "HELLO"
		p.send(h)
		if r := p.next(); r.T() != "ready" {
			t.Fatalf("answer = %v", r)
		}
		p.send(map[string]any{"t": "Ping", "ts": 7})
		if f := p.next(); f.T() != "pong" || f.N("ts") != 7 {
			t.Fatalf("answer to Ping = %v", f)
		}
	})
}

func TestMobileHelloRefused(t *testing.T) {
	g := mobileGW(t, func(c *server.AppConfig) {
		c.Server.Mobile.ExtraTokens = []string{"tel-7=seven-token", "malformed-entry"}
	})
	ctx := context.Background()
	stored, _, err := gateway.CreateToken(ctx, g.App.Store, "bound", "tel-9")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"wrong token", mhello("not-the-token", "tel-1", "P"), "auth_failed"},
		{"no token", map[string]any{"t": "hello", "device": map[string]any{"id": "tel-1"}}, "auth_failed"},
		{"first frame not hello", text("m1", "hi"), "bad_frame"},
		{"malformed hello", map[string]any{"t": "hello", "token": testgw.Token, "device": "tel-1"}, "bad_frame"},
		{"token bound to another device", mhello("seven-token", "tel-8", "P"), "forbidden"},
		{"bound device, another token", mhello(testgw.Token, "tel-7", "P"), "forbidden"},
		{"stored token bound to another device", mhello(stored, "tel-8", "P"), "forbidden"},
		{"device bound by a stored token, another token", mhello(testgw.Token, "tel-9", "P"), "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dialPhone(t, g, nil)
			p.send(tc.frame)
			p.refused(tc.code)
		})
	}
	for _, tc := range []struct{ name, token, device string }{
		{"bound token, its device", "seven-token", "tel-7"},
		{"stored bound token, its device", stored, "tel-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := connectPhoneWith(t, g, nil, mhello(tc.token, tc.device, "P"))
			p.barrier()
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		p := dialPhone(t, g, nil)
		p.sendRaw(websocket.MessageText, []byte("hello?"))
		if _, st, _ := p.closed(); st != websocket.StatusPolicyViolation {
			t.Fatalf("close = %v, want 1008", st)
		}
	})
}

func TestMobileAllowedDevices(t *testing.T) {
	g := mobileGW(t, func(c *server.AppConfig) {
		c.Server.Mobile.AllowedDevices = []string{"tel-1"}
		c.Server.Mobile.DeliverTokens = []string{"cron-token"}
	})
	connectPhone(t, g, "tel-1").barrier()
	p := dialPhone(t, g, nil)
	p.send(mhello(testgw.Token, "tel-2", "Intruder"))
	if e := p.refused("auth_failed"); !strings.Contains(e.S("message"), "allowed") {
		t.Errorf("message = %q", e.S("message"))
	}
	// A delivery service is not a phone: the list does not apply to it.
	connectPhoneWith(t, g, nil, mhello("cron-token", "cron", "Cron")).barrier()
}

func TestMobileHelloTimeout(t *testing.T) {
	g := mobileGW(t, func(c *server.AppConfig) { c.Server.HelloTimeout = 200 * time.Millisecond })
	p := dialPhone(t, g, nil)
	e := p.refused("auth_required")
	if !strings.Contains(e.S("message"), "no hello") {
		t.Errorf("message = %q", e.S("message"))
	}
	// A device that says hello in time is not affected.
	connectPhone(t, g, "tel-1").barrier()
}

func TestMobileRepeatedHello(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	p.wantError(mhello(testgw.Token, "tel-1", "P"), "bad_frame")
	p.barrier()
}

func TestMobileReconnectReplaces(t *testing.T) {
	g := mobileGW(t)
	first := connectPhone(t, g, "tel-1")
	second := connectPhone(t, g, "tel-1")
	if _, st, _ := first.closed(); st != websocket.StatusNormalClosure {
		t.Fatalf("the older connection closed with %v, want a normal closure", st)
	}
	second.send(text("m1", "still here"))
	second.finalText("still here")
}

func TestMobileInternalError(t *testing.T) {
	g := mobileGW(t)
	// A store that fails is an internal error, fatal at hello.
	if err := g.App.Store.Close(); err != nil {
		t.Fatal(err)
	}
	p := dialPhone(t, g, nil)
	p.send(mhello(testgw.Token, "tel-1", "P"))
	p.refused("internal_error")
}

// --- device → server ----------------------------------------------------------

func TestMobileText(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	p.send(text("m1", "hello there world"))
	id, got, frames := p.reply()
	if got != "hello there world" || !strings.HasPrefix(id, "m_") {
		t.Fatalf("reply %s = %q (%s)", id, got, mtypes(frames))
	}

	t.Run("12,000 characters in 4 chunks", func(t *testing.T) {
		long := strings.Repeat("é", 12000)
		p.send(text("m2", long))
		_, got, frames := p.reply()
		if got != long {
			t.Fatalf("reply of %d characters, want 12000", len([]rune(got)))
		}
		if last := frames[len(frames)-1]; last.O("chunk").N("total") != 4 || last.O("chunk").N("index") != 3 {
			t.Fatalf("final frame: chunk %v", last.O("chunk"))
		}
	})
	for _, tc := range []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"12,001 characters", text("m3", strings.Repeat("a", 12001)), "too_big"},
		{"empty text", text("m4", ""), "bad_frame"},
		{"blank text", text("m5", " \n\t "), "bad_frame"},
		{"no text", map[string]any{"t": "text", "id": "m6"}, "bad_frame"},
		{"no id", map[string]any{"t": "text", "text": "hi"}, "bad_frame"},
		{"text not a string", map[string]any{"t": "text", "id": "m7", "text": 42}, "bad_frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := p.wantError(tc.frame, tc.code)
			if id, _ := tc.frame["id"].(string); e.S("id") != id {
				t.Errorf("error id = %q, want %q", e.S("id"), id)
			}
		})
	}
}

func TestMobileBadFrames(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	for _, tc := range []struct {
		name string
		typ  websocket.MessageType
		data string
	}{
		{"not JSON", websocket.MessageText, "hello?"},
		{"truncated JSON", websocket.MessageText, `{"t":"text","id":"1","text":"hi`},
		{"not UTF-8", websocket.MessageText, "{\"t\":\"text\",\"id\":\"1\",\"text\":\"\xff\xfe\"}"},
		{"an array", websocket.MessageText, `[{"t":"text"}]`},
		{"a string", websocket.MessageText, `"text"`},
		{"null", websocket.MessageText, `null`},
		{"no t", websocket.MessageText, `{"id":"1","text":"hi"}`},
		{"t not a string", websocket.MessageText, `{"t":5}`},
		{"id an object", websocket.MessageText, `{"t":"text","id":{},"text":"hi"}`},
		{"binary frame", websocket.MessageBinary, "\x01\x02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.sendRaw(tc.typ, []byte(tc.data))
			fs := p.barrier()
			if len(fs) != 1 || fs[0].T() != "error" || fs[0].S("code") != "bad_frame" || fs[0].B("fatal") {
				t.Fatalf("answer: %v", fs)
			}
		})
	}
}

func TestMobileUnknownFramesIgnored(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	// The general rule wins over the error table's "unknown frame type"
	// row: an unknown t is ignored, never answered.
	for _, f := range []map[string]any{
		{"t": "sticker", "id": "x"}, {"t": "delivered", "id": "x", "device": "tel-1"}, {"t": "x-future", "nested": map[string]any{"a": []any{1}}},
	} {
		p.send(f)
	}
	if fs := answers(p.barrier()); len(fs) != 0 {
		t.Fatalf("unknown frames were answered: %s", mtypes(fs))
	}
}

func TestMobilePing(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	for _, tc := range []struct {
		ts   any
		want string
	}{
		{int64(1712345678901), "1.712345678901e+12"},
		{"abc", "abc"},
		{nil, "<nil>"},
	} {
		f := map[string]any{"t": "ping"}
		if tc.ts != nil {
			f["ts"] = tc.ts
		}
		p.send(f)
		pong := p.next()
		if pong.T() != "pong" || fmt.Sprint(pong["ts"]) != tc.want {
			t.Fatalf("ping %v answered %v", tc.ts, pong)
		}
	}
}

func TestMobileTypingAndAck(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	p.send(map[string]any{"t": "typing"})
	p.send(map[string]any{"t": "ack", "id": "m_whatever"})
	if fs := answers(p.barrier()); len(fs) != 0 {
		t.Fatalf("typing/ack were answered: %s", mtypes(fs))
	}
}

func TestMobileIdempotency(t *testing.T) {
	g := mobileGW(t, withAgent(replyAgent{}))
	laptop := g.Dial(t, "laptop")
	p := connectPhone(t, g, "tel-1")

	p.send(text("m1", "once"))
	p.finalText("echo: once")
	p.send(text("m1", "once")) // a resend after a network drop
	if fs := answers(p.barrier()); len(fs) != 0 {
		t.Fatalf("a duplicate was answered: %s", mtypes(fs))
	}
	// Across a reconnect too.
	p = connectPhone(t, g, "tel-1")
	p.send(text("m1", "once"))
	// Audio and whole media files, by the same key.
	p.send(map[string]any{"t": "audio", "id": "a1", "format": "ogg", "data": b64(100), "text": "voice once"})
	p.finalText("echo: voice once")
	p.send(map[string]any{"t": "audio", "id": "a1", "format": "ogg", "data": b64(100), "text": "voice once"})
	p.send(map[string]any{"t": "media", "id": "f1", "kind": "image", "filename": "a.png", "data": b64(10), "caption": "pic once"})
	p.finalText("pic once")
	p.send(map[string]any{"t": "media", "id": "f1", "kind": "image", "filename": "a.png", "data": b64(10), "caption": "pic once"})
	for i := range 2 {
		p.send(map[string]any{"t": "media", "id": "f2", "kind": "document", "data": b64(10), "caption": "doc once", "part": i, "parts": 2})
	}
	p.finalText("doc once")
	// A chunk of a file already handed over is a duplicate: no new upload.
	p.send(map[string]any{"t": "media", "id": "f2", "kind": "document", "data": b64(10), "caption": "doc once", "part": 0, "parts": 2})
	p.send(map[string]any{"t": "media", "id": "f2", "kind": "document", "data": b64(10), "caption": "doc once", "part": 1, "parts": 2})
	if fs := answers(p.barrier()); len(fs) != 0 {
		t.Fatalf("duplicates were answered: %s", mtypes(fs))
	}
	// A failed frame does not count: its resend goes through.
	p.wantError(map[string]any{"t": "audio", "id": "a2", "format": "ogg", "data": "not base64!"}, "bad_frame")
	p.send(map[string]any{"t": "audio", "id": "a2", "format": "ogg", "data": b64(3), "text": "second try"})
	p.finalText("echo: second try")
	p.send(text("m9", "last"))
	p.finalText("echo: last")

	// The agent got each message once: the laptop saw exactly these.
	var users []string
	for _, f := range until(t, laptop, func(f client.Frame) bool {
		return f.Type == "message.stop" && testgw.Str(t, f, "final_text") == "echo: last"
	}) {
		if f.Type == "message" && testgw.Str(t, f, "role") == "user" {
			users = append(users, strings.SplitN(testgw.Str(t, f, "text"), "\n", 2)[0])
		}
	}
	want := []string{"once", "voice once", "pic once", "doc once", "second try", "last"}
	if !slices.Equal(users, want) {
		t.Fatalf("messages the agent got: %q, want %q", users, want)
	}
}

func TestMobileAudio(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	// What becomes of a recording: TestMobileFilesStored.
	p.send(map[string]any{"t": "audio", "id": "a1", "format": "ogg", "data": b64(2048), "text": "turn on the lights"})
	p.finalText("turn on the lights")
	for _, tc := range []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"mp3", map[string]any{"t": "audio", "id": "a3", "format": "mp3", "data": b64(10)}, "unsupported_frame"},
		{"no format", map[string]any{"t": "audio", "id": "a4", "data": b64(10)}, "bad_frame"},
		{"no data", map[string]any{"t": "audio", "id": "a5", "format": "ogg"}, "bad_frame"},
		{"no id", map[string]any{"t": "audio", "format": "ogg", "data": b64(10)}, "bad_frame"},
		{"not base64", map[string]any{"t": "audio", "id": "a6", "format": "ogg", "data": "@@@@"}, "bad_frame"},
		{"8 MiB + 1", map[string]any{"t": "audio", "id": "a7", "format": "ogg", "data": b64(8<<20 + 1)}, "too_big"},
		{"text of 12,001 characters", map[string]any{"t": "audio", "id": "a8", "format": "ogg", "data": b64(10), "text": strings.Repeat("a", 12001)}, "too_big"},
	} {
		t.Run(tc.name, func(t *testing.T) { p.wantError(tc.frame, tc.code) })
	}
	// Exactly 8 MiB is accepted: wire/mobile's TestLimitBoundaries (the
	// megabytes of base64 are costly here under -race).
}

func TestMobileMedia(t *testing.T) {
	g, ag := keeperGW(t)
	p := connectPhone(t, g, "tel-1")
	media := func(id, kind string, size, part, parts int) map[string]any {
		return map[string]any{"t": "media", "id": id, "kind": kind, "data": b64(size), "part": part, "parts": parts}
	}
	turns := 0
	// file waits for the agent's next turn, started by phone p, and
	// returns its one file.
	file := func(t *testing.T, p *phone) core.Media {
		t.Helper()
		turns++
		turn := lastTurn(t, ag, turns)
		if len(turn.Media) != 1 {
			t.Fatalf("the agent got %d files", len(turn.Media))
		}
		p.finalText("noted: ")
		return turn.Media[0]
	}

	// Files reaching the agent and Iris devices: TestMobileFilesStored.
	t.Run("filename truncated to 200, mime from the filename", func(t *testing.T) {
		// Cut to 200 characters the name loses its extension: the bytes
		// ("ZZZ…") tell the type then.
		name := strings.Repeat("n", 250) + ".pdf"
		p.send(map[string]any{"t": "media", "id": "f2", "kind": "document", "filename": name, "data": b64(10)})
		if m := file(t, p); m.Filename != strings.Repeat("n", 200) || m.Mime != "text/plain" {
			t.Fatalf("the agent's file: %+v", m)
		}
		p.send(map[string]any{"t": "media", "id": "f3", "kind": "document", "filename": "r.pdf", "data": b64(10)})
		if m := file(t, p); m.Mime != "application/pdf" {
			t.Fatalf("the agent's file: %+v", m)
		}
	})
	t.Run("a mime type that is not one is derived from the filename", func(t *testing.T) {
		p.send(map[string]any{"t": "media", "id": "f3b", "kind": "image", "mime": "not a type", "filename": "a.png", "data": b64(10)})
		if m := file(t, p); m.Mime != "image/png" {
			t.Fatalf("the agent's file: %+v", m)
		}
	})
	t.Run("chunks assembled before the agent sees the file", func(t *testing.T) {
		p.send(map[string]any{"t": "media", "id": "f4", "kind": "video", "mime": "video/mp4", "filename": "v.mp4", "caption": "clip", "data": b64(300 << 10), "part": 0, "parts": 3})
		p.send(media("f4", "video", 300<<10, 2, 3)) // parts may come out of order
		if fs := answers(p.barrier()); len(fs) != 0 {
			t.Fatalf("an unfinished file reached the agent: %s", mtypes(fs))
		}
		p.send(media("f4", "video", 124<<10, 1, 3))
		if m := file(t, p); m.Size != 724<<10 || m.Kind != "video" {
			t.Fatalf("the agent's file: %+v", m)
		}
	})
	for _, tc := range []struct {
		name  string
		frame map[string]any
		code  string
	}{
		{"kind sticker", media("e1", "sticker", 10, 0, 1), "unsupported_frame"},
		{"no kind", map[string]any{"t": "media", "id": "e2", "data": b64(10)}, "bad_frame"},
		{"no data", map[string]any{"t": "media", "id": "e3", "kind": "image"}, "bad_frame"},
		{"no id", map[string]any{"t": "media", "kind": "image", "data": b64(10)}, "bad_frame"},
		{"parts 0", media("e4", "image", 10, 0, 0), "bad_frame"},
		{"parts 2049", media("e5", "image", 10, 0, 2049), "bad_frame"},
		{"part beyond parts", media("e6", "image", 10, 3, 3), "bad_frame"},
		{"negative part", media("e7", "image", 10, -1, 3), "bad_frame"},
		{"not base64", map[string]any{"t": "media", "id": "e8", "kind": "image", "data": "%%%%"}, "bad_frame"},
		{"caption of 12,001 characters", map[string]any{"t": "media", "id": "e9", "kind": "image", "data": b64(10), "caption": strings.Repeat("c", 12001)}, "too_big"},
	} {
		t.Run(tc.name, func(t *testing.T) { p.wantError(tc.frame, tc.code) })
	}
	t.Run("2048 parts is the ceiling", func(t *testing.T) {
		p.send(media("f5", "document", 4096, 0, 2048))
		if fs := answers(p.barrier()); len(fs) != 0 {
			t.Fatalf("answer: %v", fs)
		}
	})
	t.Run("8 MiB per file and per device's buffers", func(t *testing.T) {
		// (A single frame over 8 MiB: wire/mobile's TestLimitBoundaries.)
		p := connectPhone(t, g, "tel-2")
		p.send(media("h1", "image", 7<<20, 0, 2))
		// Another upload may take the device's buffers to 8 MiB, not past.
		p.wantError(media("h2", "image", 1<<20+1, 0, 2), "too_big")
		p.send(media("h3", "image", 1<<20, 0, 2))
		// A part that makes its file larger than 8 MiB drops the upload
		// with its 7 MiB…
		p.wantError(media("h1", "image", 1<<20+1, 1, 2), "too_big")
		// …so there is room again.
		p.send(media("h4", "image", 1<<20+1, 0, 2))
		if fs := answers(p.barrier()); len(fs) != 0 {
			t.Fatalf("the dropped upload still holds memory: %v", fs)
		}
	})
	t.Run("8 unfinished uploads per device", func(t *testing.T) {
		p := connectPhone(t, g, "tel-4")
		for i := range 8 {
			p.send(media(fmt.Sprintf("u%d", i), "image", 10, 0, 2))
		}
		p.wantError(media("u8", "image", 10, 0, 2), "too_big")
		// An open upload still takes its parts.
		p.send(media("u0", "image", 10, 1, 2))
		file(t, p)
		p.send(media("u8", "image", 10, 0, 2))
		if fs := answers(p.barrier()); len(fs) != 0 {
			t.Fatalf("answer: %v", fs)
		}
		// A disconnect frees the buffers: a new connection has room for 8.
		// (Only errors count here: a connection made while the last turn
		// winds down may be greeted with that turn's stream.)
		p = connectPhone(t, g, "tel-4")
		for i := range 8 {
			p.send(media(fmt.Sprintf("v%d", i), "image", 10, 0, 2))
		}
		if fs := p.barrier(); countT(fs, "error") != 0 {
			t.Fatalf("answer: %v", fs)
		}
	})
	t.Run("parts must not change within a file", func(t *testing.T) {
		p := connectPhone(t, g, "tel-5")
		p.send(media("k1", "image", 10, 0, 3))
		p.wantError(media("k1", "image", 10, 1, 2), "bad_frame")
	})
}

func TestMobilePromptFrameErrors(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	p.wantError(map[string]any{"t": "prompt", "option_id": "once"}, "bad_frame")
	p.wantError(map[string]any{"t": "prompt", "prompt_id": "pk_x"}, "bad_frame")
	p.wantError(map[string]any{"t": "prompt", "prompt_id": "pk_x", "text": "  "}, "bad_frame")
	p.wantError(map[string]any{"t": "prompt", "prompt_id": "pk_x", "text": strings.Repeat("t", 12001)}, "too_big")
	// An unknown card: prompt_done{expired}, the connection stays.
	p.send(map[string]any{"t": "prompt", "prompt_id": "pk_unknown", "option_id": "once"})
	if d := p.next(); d.T() != "prompt_done" || d.S("id") != "pk_unknown" || !d.B("expired") {
		t.Fatalf("answer = %v", d)
	}
}

// --- server → device ------------------------------------------------------------

func TestMobileStreamingEdits(t *testing.T) {
	g := mobileGW(t, slowEcho(2*time.Millisecond))
	p := connectPhone(t, g, "tel-1")
	input := words(900) // over 3,500 characters: two chunks
	p.send(text("m1", input))
	id, got, frames := p.reply()
	if got != input {
		t.Fatalf("final text differs: %d characters, want %d", len(got), len(input))
	}
	var mine []mf
	for _, f := range frames {
		if f.T() == "message" {
			if f.S("id") != id {
				t.Fatalf("message frame of another id: %v", f)
			}
			mine = append(mine, f)
		}
	}
	if mine[0].B("edit") || mine[0].B("final") {
		t.Fatalf("first frame: %v", mine[0])
	}
	finals := 0
	for i, f := range mine[1:] {
		if !f.B("edit") {
			t.Fatalf("frame %d after the first is not an edit: %v", i+1, f)
		}
		if f.B("final") {
			finals++
		}
	}
	if finals != 1 || !mine[len(mine)-1].B("final") {
		t.Fatalf("%d final frames; the last must be the one", finals)
	}
	if last := mine[len(mine)-1].O("chunk"); last.N("total") != 2 {
		t.Fatalf("final chunk %v, want 2 chunks", last)
	}
	// The edit rate is bounded: 900 updates became a few edits.
	edits := len(mine) - 1 - 2 // minus the first and the final pair
	if edits > 900/10 {
		t.Fatalf("%d edit frames for 900 updates: not coalesced", edits)
	}
	t.Logf("900 updates → %d message frames", len(mine))
}

func TestMobileAvatarAndTyping(t *testing.T) {
	// A quiet spell longer than the turn, however loaded the machine: the
	// avatar must not rest between the reply and agent.idle.
	g := mobileGW(t, withAgent(replyAgent{}), func(c *server.AppConfig) { c.Server.Mobile.AvatarQuiet = time.Second })
	p := connectPhone(t, g, "tel-1")
	p.send(text("m1", "hi"))
	fs := p.until(func(f mf) bool { return f.T() == "avatar" && f.S("state") == "idle" })
	var seq []string
	for _, f := range fs {
		switch f.T() {
		case "avatar":
			seq = append(seq, "avatar:"+f.S("state"))
		case "typing":
			seq = append(seq, fmt.Sprintf("typing:%v", f.B("stop")))
		case "message":
			if f.B("final") {
				seq = append(seq, "message:final")
			}
		}
	}
	want := []string{"avatar:thinking", "typing:false", "avatar:speaking", "message:final", "typing:true", "avatar:idle"}
	if !slices.Equal(seq, want) {
		t.Fatalf("frames of a turn: %v\nwant %v", seq, want)
	}
}

func TestMobileFrameTooBig(t *testing.T) {
	g := mobileGW(t)
	p := connectPhone(t, g, "tel-1")
	// 16 MiB is the frame limit: one byte more is fatal.
	prefix := `{"t":"text","id":"x","text":"`
	frame := []byte(prefix + strings.Repeat("a", 16<<20+1-len(prefix)-2) + `"}`)
	if len(frame) != 16<<20+1 {
		t.Fatalf("frame of %d bytes", len(frame))
	}
	p.sendRaw(websocket.MessageText, frame)
	p.refused("too_big")
}

// --- both dialects ----------------------------------------------------------------

// TestMobileWithIris shares one gateway between an Iris device and a
// Hermes Mobile device. The phone's session is a lane of its own
// (DECISIONS.md), listed as a channel named after the device: the laptop
// reads and writes it like any channel. The phone sees the agent's side of
// its lane, whoever asked (the protocol has no frame for a person's
// words), and nothing of other lanes.
func TestMobileWithIris(t *testing.T) {
	g := mobileGW(t, withAgent(replyAgent{}))
	laptop := g.Dial(t, "laptop")
	laptop.Expect("status", nil)
	p := connectPhoneWith(t, g, nil, mhello(testgw.Token, "tel-1", "Pixel 9"))
	lane := client.Lane{ChatID: "mobile:tel-1"}

	created := laptop.Expect("channel.created", nil)
	if e := entry(t, created); e.ChatID != "mobile:tel-1" || e.Name != "Pixel 9" || e.Kind != "channel" || e.IsDefault {
		t.Fatalf("channel.created = %s", created.Raw)
	}

	// The phone's words and the agent's reply reach the laptop.
	p.send(text("m1", "from the phone"))
	p.finalText("echo: from the phone")
	laptop.Expect("message", func(f client.Frame) bool {
		return f.ChatID == lane.ChatID && testgw.Str(t, f, "role") == "user" && testgw.Str(t, f, "text") == "from the phone"
	})
	stop := laptop.Expect("message.stop", func(f client.Frame) bool { return f.ChatID == lane.ChatID })
	if testgw.Str(t, stop, "final_text") != "echo: from the phone" {
		t.Fatalf("message.stop = %s", stop.Raw)
	}

	// The laptop writes into the phone's lane: the phone gets the reply,
	// not the laptop's words.
	send(t, laptop, lane, "from the laptop")
	_, got, fs := p.reply()
	if got != "echo: from the laptop" {
		t.Fatalf("reply = %q", got)
	}
	for _, f := range fs {
		if f.T() == "message" && f.S("text") == "from the laptop" {
			t.Fatalf("the phone got the laptop's words as a message: %v", f)
		}
	}

	// Other lanes are not the phone's.
	send(t, laptop, def, "in the default channel")
	laptop.Expect("message.stop", func(f client.Frame) bool { return f.ChatID == "default" })
	laptop.Expect("agent.idle", func(f client.Frame) bool { return f.ChatID == "default" })
	if fs := p.barrier(); countT(fs, "message") != 0 || countT(fs, "avatar") > 1 {
		t.Fatalf("the phone got frames of another lane: %s", mtypes(fs))
	}

	// History has the whole conversation of the lane.
	h, err := history(t, laptop, lane, nil)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range h.Messages {
		texts = append(texts, m.Role+":"+m.Text)
	}
	want := []string{"user:from the phone", "assistant:echo: from the phone", "user:from the laptop", "assistant:echo: from the laptop"}
	if !slices.Equal(texts, want) {
		t.Fatalf("history = %q\nwant %q", texts, want)
	}

	// A renamed lane keeps its name when the phone comes back, and is not
	// listed twice.
	laptop.MustDo("channel.rename", lane, map[string]any{"chat_id": lane.ChatID, "name": "My phone"})
	p = connectPhone(t, g, "tel-1")
	p.barrier()
	n := 0
	for _, c := range channels(t, laptop) {
		if c.ChatID == lane.ChatID {
			n++
			if c.Name != "My phone" {
				t.Fatalf("the lane's name became %q", c.Name)
			}
		}
	}
	if n != 1 {
		t.Fatalf("the lane is listed %d times", n)
	}

	// A deleted lane is listed again when the phone next writes.
	laptop.MustDo("channel.delete", client.Lane{}, map[string]any{"chat_id": lane.ChatID})
	p.send(text("m2", "still mine"))
	p.finalText("echo: still mine")
	again := laptop.Expect("channel.created", func(f client.Frame) bool { return testgw.Str(t, f, "chat_id") == lane.ChatID })
	if entry(t, again).Name != "tel-1" {
		t.Fatalf("re-created lane: %s", again.Raw)
	}
}

// TestMobileIrisUnaffected: Hermes Mobile's larger frame limit is its own;
// an Iris device keeps the Iris limit and error format.
func TestMobileIrisUnaffected(t *testing.T) {
	g := mobileGW(t)
	r := dialRaw(t, g)
	r.writeJSON(helloFrame(testgw.Token, "laptop"))
	if ack, err := r.read(); err != nil || ack.Type != "hello.ack" {
		t.Fatalf("hello.ack: %v %v", ack, err)
	}
	big := fmt.Sprintf(`{"v":1,"id":2,"type":"ping","payload":{"pad":%q}}`, strings.Repeat("a", 2<<20))
	r.write(websocket.MessageText, []byte(big))
	if got, st := r.untilClose(); st != websocket.StatusMessageTooBig || count(got, "error") != 1 {
		t.Fatalf("close %v after %s", st, typesOf(got))
	}
}
