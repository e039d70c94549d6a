package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// mf is one Hermes Mobile frame as a device receives it.
type mf map[string]any

func (f mf) T() string { return f.S("t") }

func (f mf) S(k string) string {
	s, _ := f[k].(string)
	return s
}

func (f mf) B(k string) bool {
	b, _ := f[k].(bool)
	return b
}

func (f mf) N(k string) int {
	n, _ := f[k].(float64)
	return int(n)
}

func (f mf) O(k string) mf {
	o, _ := f[k].(map[string]any)
	return mf(o)
}

func (f mf) String() string {
	b, _ := json.Marshal(f)
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// phone is a Hermes Mobile device over a real WebSocket, with
// github.com/coder/websocket directly. A reader goroutine hands frames
// to the test, which checks each against the protocol's server frame
// tables as it reads it.
type phone struct {
	t    testing.TB
	ws   *websocket.Conn
	in   chan mf
	stop chan struct{}
	done chan struct{}
	err  error // why reading ended; read after done
	back []mf  // frames put back to be read again
}

// unread puts frames back: the next reads return them first, in order.
func (p *phone) unread(fs []mf) { p.back = append(slices.Clone(fs), p.back...) }

var pingSeq atomic.Int64

// mobileWait is how long a phone waits for an expected frame: longer than
// an Iris device's, since some frames here are megabytes of base64 that a
// loaded machine under -race takes seconds to parse.
const mobileWait = 30 * time.Second

// dialPhone opens a socket without saying hello; hdr may be nil.
func dialPhone(t testing.TB, g *testgw.GW, hdr http.Header) *phone {
	t.Helper()
	return dialPhoneVia(t, g.URL, &websocket.DialOptions{HTTPHeader: hdr})
}

// dialPhoneVia opens a socket to url with opts, without saying hello.
func dialPhoneVia(t testing.TB, url string, opts *websocket.DialOptions) *phone {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mobileWait)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(64 << 20)
	p := &phone{t: t, ws: ws, in: make(chan mf, 256), stop: make(chan struct{}), done: make(chan struct{})}
	go p.read()
	t.Cleanup(func() {
		close(p.stop)
		ws.CloseNow()
		<-p.done
	})
	return p
}

func (p *phone) read() {
	defer close(p.done)
	defer close(p.in)
	for {
		typ, data, err := p.ws.Read(context.Background())
		if err != nil {
			p.err = err
			return
		}
		f := mf{}
		if typ != websocket.MessageText {
			f = mf{"t": "<binary>"}
		} else if err := json.Unmarshal(data, &f); err != nil {
			f = mf{"t": "<not a JSON object>", "raw": string(data)}
		}
		select {
		case p.in <- f:
		case <-p.stop:
			return
		}
	}
}

// mhello is a hello frame.
func mhello(token, id, name string) map[string]any {
	return map[string]any{"t": "hello", "token": token,
		"device": map[string]any{"id": id, "name": name, "platform": "android", "app_version": "1.0.0"},
		"user":   map[string]any{"id": "u-1", "name": "Eugene"}}
}

// connectPhone says hello with the test token and returns the device
// after its ready.
func connectPhone(t testing.TB, g *testgw.GW, id string) *phone {
	t.Helper()
	return connectPhoneWith(t, g, nil, mhello(testgw.Token, id, id))
}

func connectPhoneWith(t testing.TB, g *testgw.GW, hdr http.Header, hello map[string]any) *phone {
	t.Helper()
	return helloPhone(t, dialPhone(t, g, hdr), hello)
}

// helloPhone says hello on p and returns it after its ready.
func helloPhone(t testing.TB, p *phone, hello map[string]any) *phone {
	t.Helper()
	p.send(hello)
	r := p.next()
	if r.T() != "ready" {
		t.Fatalf("answer to hello: %v", r)
	}
	return p
}

func (p *phone) send(v any) {
	p.t.Helper()
	p.sendRaw(websocket.MessageText, marshalFrame(p.t, v))
}

// b64s is base64 text: marshalFrame copies it into the frame as it is,
// sparing the tests (and the race detector) a scan of megabytes of JSON.
type b64s string

// marshalFrame is json.Marshal, with b64s members spliced in verbatim.
func marshalFrame(t testing.TB, v any) []byte {
	m, ok := v.(map[string]any)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	small := map[string]any{}
	var big []string
	for k, x := range m {
		switch x := x.(type) {
		case b64s:
			big = append(big, k)
		case map[string]any:
			small[k] = json.RawMessage(marshalFrame(t, x))
		default:
			small[k] = x
		}
	}
	b, err := json.Marshal(small)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:len(b)-1] // the closing brace
	for _, k := range big {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, `":"`...)
		b = append(b, m[k].(b64s)...)
		b = append(b, '"')
	}
	return append(b, '}')
}

func (p *phone) sendRaw(typ websocket.MessageType, data []byte) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mobileWait)
	defer cancel()
	if err := p.ws.Write(ctx, typ, data); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

// nextWithin returns the next frame, false after d or when the
// connection ended.
func (p *phone) nextWithin(d time.Duration) (mf, bool) {
	p.t.Helper()
	if len(p.back) > 0 {
		f := p.back[0]
		p.back = p.back[1:]
		return f, true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case f, ok := <-p.in:
		if !ok {
			return nil, false
		}
		checkMobileFrame(p.t, f)
		return f, true
	case <-tm.C:
		return nil, false
	}
}

func (p *phone) next() mf {
	p.t.Helper()
	f, ok := p.nextWithin(mobileWait)
	if !ok {
		p.t.Fatalf("phone: no frame within %v (%v)", mobileWait, p.err)
	}
	return f
}

// until reads frames until stop holds for one and returns them all, that
// one last.
func (p *phone) until(stop func(mf) bool) []mf {
	p.t.Helper()
	deadline := time.Now().Add(mobileWait)
	var got []mf
	for {
		f, ok := p.nextWithin(max(time.Until(deadline), 0))
		if !ok {
			p.t.Fatalf("phone: the awaited frame did not come within %v (got %s)", mobileWait, mtypes(got))
		}
		got = append(got, f)
		if stop(f) {
			return got
		}
	}
}

// expect reads until a frame of type typ for which match (nil: any) holds.
func (p *phone) expect(typ string, match func(mf) bool) mf {
	p.t.Helper()
	got := p.until(func(f mf) bool { return f.T() == typ && (match == nil || match(f)) })
	return got[len(got)-1]
}

// barrier round-trips a ping and returns what came before the pong: the
// session handles frames in order, so whatever an earlier frame caused at
// once is among them.
func (p *phone) barrier() []mf {
	p.t.Helper()
	ts := pingSeq.Add(1)
	p.send(map[string]any{"t": "ping", "ts": ts})
	got := p.until(func(f mf) bool { return f.T() == "pong" && f.N("ts") == int(ts) })
	return got[:len(got)-1]
}

// errorFor sends v and returns the error frame it gets (before a barrier).
func (p *phone) errorFor(v any) mf {
	p.t.Helper()
	p.send(v)
	for _, f := range p.barrier() {
		if f.T() == "error" {
			return f
		}
	}
	p.t.Fatalf("no error frame answered %v", v)
	return nil
}

// wantError asserts a non-fatal error frame of code for v; the connection
// stays usable.
func (p *phone) wantError(v any, code string) mf {
	p.t.Helper()
	f := p.errorFor(v)
	if f.S("code") != code || f.B("fatal") {
		p.t.Fatalf("error = %v, want a non-fatal %s", f, code)
	}
	return f
}

// closed reads until the gateway closes the connection and returns the
// frames before the close, its status and reason.
func (p *phone) closed() ([]mf, websocket.StatusCode, string) {
	p.t.Helper()
	var got []mf
	for {
		f, ok := p.nextWithin(mobileWait)
		if !ok {
			break
		}
		got = append(got, f)
	}
	select {
	case <-p.done:
	case <-time.After(mobileWait):
		p.t.Fatalf("phone: connection still open (got %s)", mtypes(got))
	}
	var ce websocket.CloseError
	if errors.As(p.err, &ce) {
		return got, ce.Code, ce.Reason
	}
	return got, -1, ""
}

// refused asserts that the gateway answered with one fatal error of code
// and closed with 1008 and the code as the reason.
func (p *phone) refused(code string) mf {
	p.t.Helper()
	got, st, reason := p.closed()
	if len(got) != 1 || got[0].T() != "error" {
		p.t.Fatalf("frames before the close: %s, want one error", mtypes(got))
	}
	if got[0].S("code") != code || !got[0].B("fatal") {
		p.t.Fatalf("error = %v, want a fatal %s", got[0], code)
	}
	if st != websocket.StatusPolicyViolation || reason != code {
		p.t.Fatalf("close = %v %q, want 1008 %q", st, reason, code)
	}
	return got[0]
}

// reply reads the frames of the next complete agent message (until a
// final message frame) and returns its id, its text (the final frames
// concatenated) and every frame read.
func (p *phone) reply() (id, text string, frames []mf) {
	p.t.Helper()
	frames = p.until(func(f mf) bool { return f.T() == "message" && f.B("final") })
	last := frames[len(frames)-1]
	id = last.S("id")
	total := last.O("chunk").N("total")
	var mine []mf
	for _, f := range frames {
		if f.T() == "message" && f.S("id") == id {
			mine = append(mine, f)
		}
	}
	if len(mine) < total {
		p.t.Fatalf("message %s: %d frames, the final says %d chunks", id, len(mine), total)
	}
	var b strings.Builder
	for i, f := range mine[len(mine)-total:] {
		if f.O("chunk").N("index") != i {
			p.t.Fatalf("message %s: final chunks out of order: %s", id, mtypes(mine))
		}
		b.WriteString(f.S("text"))
	}
	return id, b.String(), frames
}

// answers drops the frames a finished turn trails (typing stop, the
// avatar resting): what is left answers something.
func answers(fs []mf) []mf {
	var out []mf
	for _, f := range fs {
		if f.T() != "avatar" && f.T() != "typing" {
			out = append(out, f)
		}
	}
	return out
}

func mtypes(fs []mf) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.T()
	}
	return strings.Join(s, ",")
}

func countT(fs []mf, typ string) int {
	n := 0
	for _, f := range fs {
		if f.T() == typ {
			n++
		}
	}
	return n
}

var mobileCodes = []string{"bad_frame", "auth_failed", "forbidden", "unsupported_frame", "too_big", "device_offline", "auth_required", "internal_error"}

// checkMobileFrame checks a frame against the protocol's tables of server
// frames: its type is one of them and its fields are there with their
// types (and values within the protocol's sets and limits).
func checkMobileFrame(t testing.TB, f mf) {
	t.Helper()
	bad := func(why string) { t.Errorf("gateway sent a frame that breaks the protocol (%s): %v", why, f) }
	str := func(k string, required bool) {
		v, ok := f[k]
		if !ok {
			if required {
				bad(k + " missing")
			}
			return
		}
		if _, ok := v.(string); !ok {
			bad(k + " not a string")
		}
	}
	integer := func(m mf, k string) {
		n, ok := m[k].(float64)
		if !ok || n != float64(int64(n)) {
			bad(k + " not an integer")
		}
	}
	boolean := func(k string, required bool) {
		v, ok := f[k]
		if !ok {
			if required {
				bad(k + " missing")
			}
			return
		}
		if _, ok := v.(bool); !ok {
			bad(k + " not a bool")
		}
	}
	switch f.T() {
	case "ready":
		integer(f, "v")
		str("session", true)
		str("avatar_url", true)
		d := f.O("device")
		if d.S("id") == "" || d["name"] == nil {
			bad("device")
		}
		c := f.O("capabilities")
		for _, k := range []string{"text", "voice", "typing", "edit"} {
			if _, ok := c[k].(bool); !ok {
				bad("capabilities." + k)
			}
		}
		for _, k := range []string{"avatar_states", "media_in", "media_out", "prompts"} {
			if _, ok := c[k].([]any); !ok {
				bad("capabilities." + k)
			}
		}
		integer(c, "max_media_bytes")
		integer(c, "max_text_chars")
	case "message":
		str("id", true)
		str("text", true)
		boolean("final", true)
		boolean("edit", false)
		ch := f.O("chunk")
		integer(ch, "index")
		integer(ch, "total")
		if i, n := ch.N("index"), ch.N("total"); i < 0 || i >= n {
			bad("chunk index out of range")
		}
		if utf8.RuneCountInString(f.S("text")) > 3500 {
			bad("more than 3,500 characters")
		}
	case "media":
		for _, k := range []string{"id", "kind", "mime", "filename"} {
			str(k, true)
		}
		str("caption", false)
		str("data", false)
		str("url", false)
		integer(f, "part")
		integer(f, "parts")
		integer(f, "size")
		boolean("final", true)
		if !slices.Contains([]string{"image", "voice", "video", "document", "animation"}, f.S("kind")) {
			bad("media kind")
		}
	case "prompt":
		for _, k := range []string{"id", "kind", "text", "session"} {
			str(k, true)
		}
		str("command", false)
		str("description", false)
		integer(f, "timeout_seconds")
		if !slices.Contains([]string{"exec_approval", "slash_confirm", "clarify"}, f.S("kind")) {
			bad("prompt kind")
		}
		opts, ok := f["options"].([]any)
		if !ok || len(opts) == 0 {
			bad("options")
		}
		for _, o := range opts {
			m, _ := o.(map[string]any)
			for _, k := range []string{"id", "label", "style"} {
				if _, ok := m[k].(string); !ok {
					bad("option " + k)
				}
			}
			if s := m["style"]; s != "primary" && s != "danger" && s != "" {
				bad("option style")
			}
		}
	case "prompt_done":
		str("id", true)
		str("option_id", false)
		boolean("expired", false)
	case "avatar":
		if !slices.Contains([]string{"idle", "thinking", "speaking"}, f.S("state")) {
			bad("avatar state")
		}
	case "typing":
		boolean("stop", false)
	case "pong":
	case "error":
		str("message", true)
		boolean("fatal", true)
		if !slices.Contains(mobileCodes, f.S("code")) {
			bad("error code")
		}
	default:
		bad("unknown frame type")
	}
}

// mobileGW starts a gateway whose avatar rests quickly (tests wait for it).
func mobileGW(t *testing.T, edit ...func(*server.AppConfig)) *testgw.GW {
	t.Helper()
	quick := func(c *server.AppConfig) { c.Server.Mobile.AvatarQuiet = 100 * time.Millisecond }
	return testgw.Start(t, append([]func(*server.AppConfig){quick}, edit...)...)
}

// proxied is the header a reverse proxy adds.
var proxied = http.Header{"X-Forwarded-For": []string{"203.0.113.7"}}

func seq(prefix string) string { return fmt.Sprintf("%s%d", prefix, pingSeq.Add(1)) }
