package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
)

// syncBuf is the chat's terminal: every write is kept, under a mutex.
type syncBuf struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []string
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes = append(b.writes, string(p))
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuf) Writes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.writes...)
}

// chatRun is a runChat fed through a pipe.
type chatRun struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *syncBuf
	mark   int // output before it has been matched already
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

func startChat(t *testing.T, o chatOptions) *chatRun {
	t.Helper()
	if o.Token == "" {
		o.Token = testgw.Token
	}
	if o.Device == "" {
		o.Device = "chat-test"
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	r := &chatRun{t: t, in: pw, out: &syncBuf{}, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		r.err = runChat(ctx, o, pr, r.out)
		pr.Close()
	}()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		select {
		case <-r.done:
		case <-time.After(testgw.Wait):
			t.Errorf("the chat did not end within %v", testgw.Wait)
		}
	})
	return r
}

// send types a line.
func (r *chatRun) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("typing %q: %v", line, err)
	}
}

// expect waits until the output after the last match contains want and
// returns the text from there up to the end of the match.
func (r *chatRun) expect(want string) string {
	r.t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	for {
		out := r.out.String()
		if i := strings.Index(out[r.mark:], want); i >= 0 {
			got := out[r.mark : r.mark+i+len(want)]
			r.mark += i + len(want)
			return got
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %q in the chat's output within %v; after the last match it printed:\n%s", want, testgw.Wait, out[r.mark:])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectAll waits for each of wants after the last match, in any order.
func (r *chatRun) expectAll(wants ...string) {
	r.t.Helper()
	from := r.mark
	end := from
	for _, w := range wants {
		r.mark = from
		r.expect(w)
		end = max(end, r.mark)
	}
	r.mark = end
}

// expectRE is expect for a regular expression; it returns the submatches.
func (r *chatRun) expectRE(re *regexp.Regexp) []string {
	r.t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	for {
		out := r.out.String()
		if loc := re.FindStringSubmatchIndex(out[r.mark:]); loc != nil {
			m := re.FindStringSubmatch(out[r.mark:])
			r.mark += loc[1]
			return m
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no match for %s in the chat's output within %v; after the last match it printed:\n%s", re, testgw.Wait, out[r.mark:])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for runChat to return and gives its error.
func (r *chatRun) wait() error {
	r.t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(testgw.Wait):
		r.t.Fatalf("runChat did not return within %v; output:\n%s", testgw.Wait, r.out.String())
		return nil
	}
}

func echoDelay(d time.Duration) func(*server.AppConfig) {
	return func(c *server.AppConfig) { c.Agent = &agent.Echo{Delay: d} }
}

const ready = "Type a message and press Enter."

func TestChatStreamsTheReply(t *testing.T) {
	g := testgw.Start(t, echoDelay(5*time.Millisecond))
	phone := g.Dial(t, "phone")
	r := startChat(t, chatOptions{URL: g.URL})
	start := r.expect(ready)
	for _, want := range []string{"connected to " + g.URL, "Channels", "*  1. Default  default  (default channel)", "── #Default ── no messages yet"} {
		if !strings.Contains(start, want) {
			t.Errorf("the start screen lacks %q:\n%s", want, start)
		}
	}

	const text = "one two three four five six"
	r.send(text)
	echo := phone.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == text })
	if echo.ChatID != "default" || echo.ThreadID != "" {
		t.Errorf("the message went to %s/%s, want the default channel", echo.ChatID, echo.ThreadID)
	}
	r.expect("agent › " + text + "\n")
	r.expect("  ─ " + agent.EchoModel + " · ")
	r.expect("s · 6 tokens\n")

	out := r.out.String()
	if n := strings.Count(out, text); n != 1 {
		t.Errorf("the reply's text is on screen %d times, want once (own line not repeated, reply not reprinted):\n%s", n, out)
	}
	// Streamed: the reply came in several writes, each only what was new.
	var pieces []string
	for _, w := range r.out.Writes() {
		if w != "" && strings.Contains(text, w) && w != "agent › " {
			pieces = append(pieces, w)
		}
	}
	if len(pieces) < 2 || strings.Join(pieces, "") != text {
		t.Errorf("the reply was not streamed as growing suffixes: pieces %q", pieces)
	}

	// A second chat starts with that conversation's history.
	r2 := startChat(t, chatOptions{URL: g.URL, Device: "chat-test-2"})
	hist := r2.expect(ready)
	for _, want := range []string{"── #Default · last 2 message(s) ──", "you › " + text, "agent › " + text} {
		if !strings.Contains(hist, want) {
			t.Errorf("the second chat's start lacks %q:\n%s", want, hist)
		}
	}
	r2.send(":quit")
	if err := r2.wait(); err != nil {
		t.Errorf(":quit: runChat returned %v", err)
	}
	r2.expect("bye.")
}

var (
	createdChan   = regexp.MustCompile(`created channel "Work Stuff" \((chan_[^)]+)\)`)
	createdThread = regexp.MustCompile(`created thread "Sub" in #Work Stuff \((t_[^)]+)\)`)
)

func TestChatChannelsJoinAndLanes(t *testing.T) {
	g := testgw.Start(t)
	phone := g.Dial(t, "phone")
	r := startChat(t, chatOptions{URL: g.URL})
	r.expect(ready)

	r.send(":new Work Stuff")
	chanID := r.expectRE(createdChan)[1]
	// :new goes to the channel it made, as an app does.
	r.expect("you are in it now")
	r.expect("── #Work Stuff ── no messages yet")
	r.send(":channels")
	r.expect("Channels")
	list := r.expect(chanID)
	if !strings.Contains(list, "*  2. Work Stuff") {
		t.Errorf(":channels does not list the new channel second, as the current one:\n%s", list)
	}
	r.send("hello work")
	m := phone.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "hello work" })
	if m.ChatID != chanID || m.ThreadID != "" {
		t.Errorf("the message went to %s/%s, want %s", m.ChatID, m.ThreadID, chanID)
	}
	r.expect("agent › hello work\n")

	r.send(":thread Sub")
	threadID := r.expectRE(createdThread)[1]
	r.expect("── #Work Stuff › Sub ── no messages yet")
	r.send("in the thread")
	m = phone.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "in the thread" })
	if m.ChatID != chanID || m.ThreadID != threadID {
		t.Errorf("the message went to %s/%s, want %s/%s", m.ChatID, m.ThreadID, chanID, threadID)
	}
	r.expect("agent › in the thread\n")

	r.send(":channels")
	r.expect("Channels")
	list = r.expect(threadID)
	if !regexp.MustCompile(`\*  3\.   ↳ Sub`).MatchString(list) {
		t.Errorf(":channels does not show the thread indented under its channel, marked current:\n%s", list)
	}

	// Another lane's traffic is one line each, not the conversation.
	phone.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "ping from the phone"})
	r.expect("[#Default · default] new message: ping from the phone\n")
	r.expect("[#Default · default] new reply: ping from the phone\n")
	if out := r.out.String(); strings.Contains(out, "agent › ping") || strings.Contains(out, "you › ping") {
		t.Errorf("another lane's messages were printed in full:\n%s", out)
	}

	// Joining by name shows that lane's history.
	r.send(":join 2")
	r.expect("── #Work Stuff · last 2 message(s) ──")
	r.send(":join default")
	r.expect("── #Default · last 2 message(s) ──")
	r.expect("you › ping from the phone")
	r.expect("agent › ping from the phone")

	r.send(":join 42")
	r.expect("! there is no channel 42")
	r.send(":frobnicate")
	r.expect("unknown command :frobnicate")
}

func TestChatRefusesBadToken(t *testing.T) {
	g := testgw.Start(t)
	r := startChat(t, chatOptions{URL: g.URL, Token: "not-the-token"})
	err := r.wait()
	if err == nil || !strings.Contains(err.Error(), "refused the token") || !strings.Contains(err.Error(), "invalid token") {
		t.Fatalf("runChat with a bad token returned %v, want a clear refusal", err)
	}

	err = runChat(context.Background(), chatOptions{URL: g.URL, Token: " "}, strings.NewReader(""), io.Discard)
	if !errors.Is(err, errNoToken) || !strings.Contains(err.Error(), "IRISGATE_TOKEN") {
		t.Fatalf("runChat without a token returned %v", err)
	}

	err = startChat(t, chatOptions{URL: g.URL, Chat: "chan_nope"}).wait()
	if err == nil || !strings.Contains(err.Error(), `--chat "chan_nope"`) {
		t.Fatalf("runChat with an unknown --chat returned %v", err)
	}
}

func TestChatStopAndSteer(t *testing.T) {
	g := testgw.Start(t, echoDelay(60*time.Millisecond))
	r := startChat(t, chatOptions{URL: g.URL})
	r.expect(ready)

	words := make([]string, 40)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i+1)
	}
	r.send(strings.Join(words, " "))
	r.expect("agent › w1 w2")
	r.send(":steer go left")
	// The chat labels the steer from the busy state it has seen; what
	// matters is that the running turn took it.
	r.expect("  · steered: go left\n")
	r.send(":stop")
	// The reply's end and the stop's answer are printed by two loops:
	// either may come first.
	r.expectAll("■ stopped", "  ─ "+agent.EchoModel)
	if out := r.out.String(); strings.Contains(out, "w40") {
		t.Errorf("the turn ran to its end despite :stop:\n%s", out)
	}
	if out := r.out.String(); !strings.Contains(out, "agent › … ") {
		t.Errorf("the reply did not resume after the commentary broke its line:\n%s", out)
	}
}

func TestChatHistoryPages(t *testing.T) {
	g := testgw.Start(t)
	phone := g.Dial(t, "phone")
	for i := 1; i <= 12; i++ {
		text := fmt.Sprintf("note %02d", i)
		phone.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": text})
		phone.Expect("message.stop", func(f client.Frame) bool { return testgw.Str(t, f, "final_text") == text })
	}
	r := startChat(t, chatOptions{URL: g.URL})
	start := r.expect(ready)
	if !strings.Contains(start, "last 20 message(s)") || !strings.Contains(start, ":history shows older messages") ||
		strings.Contains(start, "note 02") || !strings.Contains(start, "agent › note 12") {
		t.Errorf("the start does not show the last 20 messages:\n%s", start)
	}
	r.send(":history")
	r.expect("── #Default · 4 older message(s) ──")
	r.expect("you › note 01")
	r.expect("agent › note 02")
	r.expect("that was the beginning of #Default")
	r.send(":history")
	r.expect("(no older messages)")
}

// proxy relays TCP to the gateway and can cut every connection, and
// refuse new ones, to stand for a network that drops.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	refuse bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut(true)
	})
	return p
}

func (p *proxy) URL() string { return "ws://" + p.ln.Addr().String() + "/ws" }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.refuse {
			p.mu.Unlock()
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		go func() { io.Copy(b, c); b.Close() }()
		go func() { io.Copy(c, b); c.Close() }()
	}
}

// cut drops every relayed connection; refuse also turns new ones away.
func (p *proxy) cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) allow() {
	p.mu.Lock()
	p.refuse = false
	p.mu.Unlock()
}

func TestChatReconnectsAndCatchesUp(t *testing.T) {
	g := testgw.Start(t)
	px := newProxy(t, g.Addr)
	phone := g.Dial(t, "phone")
	// The outbox must not be empty when the chat first connects: with
	// hello.ack's sync_cursor 0 the client takes the reconnect for a first
	// connection and does not sync (a bug of client.Client).
	phone.MustDo("channel.create", client.Lane{}, map[string]any{"name": "Elsewhere"})
	r := startChat(t, chatOptions{URL: px.URL()})
	r.expect(ready)

	px.cut(true)
	r.expect("── connection lost ──")
	phone.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "while you were away"})
	phone.Expect("message.stop", nil)
	px.allow()
	r.expect("── reconnected ──")
	r.expect("you › while you were away\n")
	r.expect("agent › while you were away\n")

	r.send("back again")
	r.expect("agent › back again\n")
	if n := strings.Count(r.out.String(), "while you were away"); n != 2 {
		t.Errorf("the missed exchange is on screen %d times, want 2 lines:\n%s", n, r.out.String())
	}
}

func TestChatTakenOverBySameDevice(t *testing.T) {
	g := testgw.Start(t)
	first := startChat(t, chatOptions{URL: g.URL, Device: "chat-twin"})
	first.expect(ready)
	second := startChat(t, chatOptions{URL: g.URL, Device: "chat-twin"})
	second.expect(ready)
	err := first.wait()
	if err == nil || !strings.Contains(err.Error(), `device "chat-twin"`) || !strings.Contains(err.Error(), "--device") {
		t.Fatalf("the replaced chat returned %v, want it to say another chat took its device id over", err)
	}
	second.send("still here")
	second.expect("agent › still here\n")
}

func TestChatInteractiveTypingEndsTheStreamedLine(t *testing.T) {
	g := testgw.Start(t, echoDelay(40*time.Millisecond))
	r := startChat(t, chatOptions{URL: g.URL, Interactive: true})
	r.expect(ready)
	r.send("a b c d e f g h i j k l m n o p")
	r.expect("agent › a b")
	// The terminal echoed the typed line and its Enter: the chat must not
	// add a line break of its own, and the reply resumes on a new line.
	r.send(":nope")
	got := r.expect("unknown command :nope")
	before := strings.TrimSuffix(got, "unknown command :nope")
	if lines := strings.Split(before, "\n"); len(lines) > 1 && !strings.Contains(lines[len(lines)-2], "agent › … ") {
		// A break is right only after a piece that came after the typing.
		t.Errorf("the chat broke the line although the terminal had: %q", got)
	}
	r.expect("agent › … ")
	r.expect("p\n")
}

// scripted is an agent that uses a tool, comments, keeps a todo list and
// reports usage, or fails, so the chat shows every kind of turn event.
type scripted struct{}

func (scripted) Name() string { return "scripted" }

func (scripted) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	switch t.Input {
	case "fail":
		return errors.New("model unreachable")
	case "slow":
		select {
		case <-time.After(2 * thinkingAfter):
		case <-ctx.Done():
			return ctx.Err()
		}
		emit(agent.Event{Kind: agent.Text, Text: "finally"})
		return nil
	}
	pct, cost := 38, 0.0012
	emit(agent.Event{Kind: agent.Reasoning, Text: "I should look\nat the files."})
	emit(agent.Event{Kind: agent.ToolStart, Tool: &core.Tool{Index: 1, Name: "terminal", Preview: "ls -la", Emoji: "💻"}})
	emit(agent.Event{Kind: agent.ToolProgress, Tool: &core.Tool{Index: 1, Name: "terminal", Note: "running"}})
	emit(agent.Event{Kind: agent.ToolEnd, Tool: &core.Tool{Index: 1, Name: "terminal", OK: true, Duration: 0.5, Output: "3 files"}})
	emit(agent.Event{Kind: agent.Commentary, Text: "Found them."})
	emit(agent.Event{Kind: agent.Todos, Todos: []core.Todo{{ID: "1", Content: "look", Status: "completed"}, {ID: "2", Content: "report", Status: "in_progress"}}})
	emit(agent.Event{Kind: agent.Text, Text: "There are "})
	emit(agent.Event{Kind: agent.Text, Text: "3 files.\n"})
	emit(agent.Event{Kind: agent.Text, Text: "Done."})
	emit(agent.Event{Kind: agent.Usage, Model: "openai/gpt-5", Tokens: 42, ContextPct: &pct, Cost: &cost})
	return nil
}

func TestChatShowsToolsCommentaryAndFailures(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent = scripted{} })
	r := startChat(t, chatOptions{URL: g.URL})
	r.expect(ready)

	r.send("what is here?")
	r.expect("  💻 terminal: ls -la\n")
	r.expect("  … terminal: running\n")
	r.expect("  ✓ terminal (0.5s): 3 files\n")
	r.expect("  · Found them.\n")
	r.expect("  todo:\n    [x] look\n    [>] report\n")
	r.expect("agent › There are 3 files.\n        Done.\n")
	r.expect("  (thinking) I should look at the files.\n")
	r.expect("  ─ gpt-5 · ")
	r.expect("s · context 38% · $0.0012 · 42 tokens\n")

	r.send("fail")
	r.expect("system › The agent failed: model unreachable\n")

	r.send("slow")
	r.expect("  … the agent is working\n")
	r.expect("agent › finally\n")
}

func TestChatRendersPickersAndErrorFrames(t *testing.T) {
	out := &syncBuf{}
	s := newChatSession(chatOptions{}, out, func() {})
	s.lane = client.Lane{ChatID: "default"}
	s.dir = []irisv1.Channel{{ChatID: "default", Name: "Default", Kind: "default", IsDefault: true}, {ChatID: "chan_w", Name: "Work", Kind: "channel"}}
	frame := func(typ, chat, payload string) client.Frame {
		return client.Frame{Envelope: client.Envelope{V: 1, Type: typ, ChatID: chat, Payload: []byte(payload)}}
	}
	s.handleFrame(frame("error", "", `{"code":"unsupported","message":"binary frame outside a media upload"}`))
	s.handleFrame(frame("picker.choice", "default", `{"picker_id":"pc_1","title":"Reasoning effort","choices":[{"value":"low","label":"Low"},{"value":"high","label":"High","is_current":true}]}`))
	s.handleFrame(frame("picker.choice", "chan_w", `{"picker_id":"pc_2","title":"Effort","choices":[]}`))
	s.handleFrame(frame("message.update", "default", `{"message_id":"m_1","text":"Hel"}`))
	s.handleFrame(frame("channel.created", "", `{"chat_id":"t_1","name":"Bugs","kind":"thread","parent_chat_id":"chan_w","is_default":false,"favorite":false,"automation":false}`))
	s.handleFrame(frame("message.update", "default", `{"message_id":"m_1","text":"Hello"}`))
	s.handleFrame(frame("message.stop", "default", `{"message_id":"m_1","final_text":"Hello!","ts":1}`))
	s.handleFrame(frame("message.stop", "default", `{"message_id":"m_1","final_text":"Hello!","ts":1}`)) // a replay
	s.handleFrame(frame("status", "", `{"state":"restarting"}`))
	want := "! gateway error (unsupported): binary frame outside a media upload\n" +
		"? Reasoning effort — Low | High (current) (answer it in the app, or with the slash command)\n" +
		"[#Work · chan_w] the agent asks you to choose\n" +
		"agent › Hel\n" +
		"+ new thread Bugs in #Work (t_1)\n" +
		"agent › … lo!\n" +
		"! the gateway is restarting; the chat reconnects by itself\n"
	if got := out.String(); got != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
	}
}
