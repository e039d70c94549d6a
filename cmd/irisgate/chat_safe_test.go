//go:build linux

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// hostile is what a model told by a document could write: an OSC 52 that
// sets the terminal's clipboard, SGR 8 that hides what follows, a
// carriage return that draws over the line, a C1 CSI, a bell.
const hostile = "\x1b]52;c;cm0gLXJmIH4=\x07 \x1b[8mhidden\x1b[0m fake\rOVER \u009b2J \x07end"

// TestChatShowsControlCharacters: a reply, a message from another device
// and an approval's command that carry escape sequences reach the
// terminal as visible text (␛, ␍, <U+009B>), never as sequences it would
// act on: the test's terminal, which records every sequence it does not
// know, sees none, and the screen shows them.
func TestChatShowsControlCharacters(t *testing.T) {
	fake := fakeopenai.New(t)
	tools := &agent.Tools{Policy: &agent.Policy{Rules: agent.DefaultRules()}, Timeout: time.Minute}
	tools.List = agent.Builtin(tools)
	m, err := agent.NewModel(agent.ModelConfig{
		Providers: []agent.Provider{{ID: "fake", BaseURL: fake.URL, APIKey: "sk-test", Models: []agent.ModelInfo{{ID: "fake-model", ContextLength: 1000}}}},
		Tools:     tools, MaxIterations: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent, c.Workdir = m, t.TempDir() })
	phone := g.Dial(t, "phone")
	c := startPTYChat(t, g, t.TempDir(), []string{"NO_COLOR=1"}, "--no-history")
	c.waitText(ready)
	c.waitPrompt("you ›")

	args, _ := json.Marshal(map[string]string{"command": "echo " + hostile + " > /tmp/x"})
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "call_1", "terminal", string(args), 3)})
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("reply: "+hostile, 3)})
	phone.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "from the phone: " + hostile})
	picker := phone.Expect("picker.approval", nil)
	c.waitText("? Run this command?")
	phone.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": testgw.Str(t, picker, "picker_id"), "value": "deny"})
	c.waitText("reply: ␛]52;c;cm0gLXJmIH4=␇ ␛[8mhidden␛[0m fake␍OVER <U+009B>2J ␇end")
	rows := c.waitText("from the phone: ␛]52;c;")
	screen := strings.Join(c.vt.raw(), "") // rows at full width: wrapped lines read on
	for _, want := range []string{"[echo ␛]52;c;cm0gLXJmIH4=␇ ␛[8mhidden␛[0m fake␍OVER <U+009B>2J ␇end > /tmp/x]"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the screen lacks %q:\n%s", want, strings.Join(rows, "\n"))
		}
	}
	c.quit()
	if _, bad := c.vt.stats(); len(bad) > 0 {
		t.Fatalf("sequences from the gateway reached the terminal: %q", bad)
	}
}

// TestChatShowsTheDirectoryVisibly: the channel directory hello.ack
// brings, which client.Dial decodes before any frame reaches the chat's
// cleaning, shows a name's escape sequences as visible text too, as does
// the :channels listing (channel.list). The gateway refuses such names
// today; a row it did not check (an older version's, a restored backup)
// or another Iris gateway can still carry one.
func TestChatShowsTheDirectoryVisibly(t *testing.T) {
	g := testgw.Start(t)
	err := g.App.Store.Write(context.Background(), func(tx store.Tx) error {
		return tx.PutChannel(core.Channel{ChatID: "chan_evil", Name: "Evil " + hostile, Kind: core.KindChannel})
	})
	if err != nil {
		t.Fatal(err)
	}
	const want = "Evil ␛]52;c;cm0gLXJmIH4=␇ ␛[8mhidden␛[0m fake␍OVER <U+009B>2J ␇end"
	r := startChat(t, chatOptions{URL: g.URL})
	start := r.expect(ready)
	r.send(":channels")
	listing := r.expect("chan_evil")
	for what, out := range map[string]string{"the welcome": start, ":channels": listing} {
		if !strings.Contains(out, want) {
			t.Errorf("%s does not show the name visibly:\n%s", what, out)
		}
		if strings.ContainsAny(out, "\x1b\r\x07\u009b") {
			t.Errorf("%s wrote control characters from the gateway: %q", what, out)
		}
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\nline": "plain\ttext\nline",
		"\x1b[31mred":       "␛[31mred",
		"a\rb\x00c\x7f":     "a␍b␀c␡",
		"\u009b1m \u0085":   "<U+009B>1m <U+0085>",
		"caf\xe9":           "caf\uFFFD",
		"ünïcode ©":         "ünïcode ©",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
	if got := visibleLine("a\nb"); got != "a␤b" {
		t.Errorf("visibleLine: %q", got)
	}
	f := cleanFrame(client.Frame{Envelope: irisv1.Envelope{Type: "message", ChatID: "x\x1b", Payload: json.RawMessage(`{"text":"\u001b]0;title\u0007","n":12345678901234567890,"list":["\r"]}`)}})
	if f.ChatID != "x␛" || string(f.Payload) != `{"list":["␍"],"n":12345678901234567890,"text":"␛]0;title␇"}` {
		t.Errorf("cleanFrame: %q %s", f.ChatID, f.Payload)
	}
	// What reached the chat decoded: hello.ack, a request's error answer.
	ack := cleaned(irisv1.HelloAck{Channels: []irisv1.Channel{{ChatID: "c\r", Name: "\x1b[2J", Icon: "\u009b"}}})
	if c := ack.Channels[0]; c.ChatID != "c␍" || c.Name != "␛[2J" || c.Icon != "<U+009B>" {
		t.Errorf("cleaned hello.ack: %+v", c)
	}
	if e := cleaned(irisv1.Error{Code: "auth\x07", Message: "no\x1b]0;t"}); e.Code != "auth␇" || e.Message != "no␛]0;t" {
		t.Errorf("cleaned error: %+v", e)
	}
}
