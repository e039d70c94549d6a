package agent

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/fakeopenai"
)

// These tests hold the model backend to what real OpenAI-compatible
// servers send where they differ from OpenAI (each fake case cites the
// server it copies), items 11–14 of issue 14.

// sentCalls returns the tool calls of the assistant message the model
// backend sent back in request i.
func sentCalls(t *testing.T, fake *fakeopenai.Server, i int) []map[string]any {
	t.Helper()
	reqs := fake.Requests()
	if len(reqs) <= i {
		t.Fatalf("%d requests", len(reqs))
	}
	msgs := reqs[i]["messages"].([]any)
	for j := len(msgs) - 1; j >= 0; j-- {
		m := msgs[j].(map[string]any)
		if calls, ok := m["tool_calls"].([]any); ok && m["role"] == "assistant" {
			var out []map[string]any
			for _, c := range calls {
				cm := c.(map[string]any)
				fn := cm["function"].(map[string]any)
				out = append(out, map[string]any{"id": cm["id"], "name": fn["name"], "arguments": fn["arguments"]})
			}
			return out
		}
	}
	t.Fatalf("request %d has no assistant tool calls", i)
	return nil
}

func toolModel(t *testing.T, fake *fakeopenai.Server) *Model {
	tools := &Tools{Policy: &Policy{Rules: DefaultRules()}}
	tools.List = Builtin(tools)
	return newModel(t, fake, tools)
}

// Item 11.
func TestModelToolCallsAsRealServersStreamThem(t *testing.T) {
	a := fakeopenai.Call{ID: "call_a", Name: "terminal", Args: `{"command":"echo one"}`}
	b := fakeopenai.Call{ID: "call_b", Name: "terminal", Args: `{"command":"echo two"}`}
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []fakeopenai.Call
	}{
		{"name in every chunk (vLLM builds, NIM)", fakeopenai.RepeatingName.ToolCalls("", 5, a), []fakeopenai.Call{a}},
		{"name in every chunk, two calls", fakeopenai.RepeatingName.ToolCalls("Both.", 3, a, b), []fakeopenai.Call{a, b}},
		{"no index (Ollama < 0.4.7)", fakeopenai.ToolCallsOllama(false, a, b), []fakeopenai.Call{a, b}},
		{"index 0 for every call (Ollama, LiteLLM ollama_chat)", fakeopenai.ToolCallsOllama(true, a, b), []fakeopenai.Call{a, b}},
		{"OpenAI", fakeopenai.ToolCalls("", 4, fakeopenai.Call(a), fakeopenai.Call(b)), []fakeopenai.Call{a, b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeopenai.New(t)
			fake.Push(fakeopenai.Script{Chunks: tc.chunks}, fakeopenai.Script{Chunks: fakeopenai.Text("Done.", 1)})
			m := toolModel(t, fake)
			var rec recorder
			if err := m.Run(context.Background(), Turn{Input: "run", Cwd: t.TempDir()}, rec.emit); err != nil {
				t.Fatal(err)
			}
			got := sentCalls(t, fake, 1)
			if len(got) != len(tc.want) {
				t.Fatalf("calls %v, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if got[i]["id"] != w.ID || got[i]["name"] != w.Name || got[i]["arguments"] != w.Args {
					t.Errorf("call %d = %v, want %+v", i, got[i], w)
				}
			}
			if n := rec.count(ToolEnd); n != len(tc.want) {
				t.Errorf("%d tools ran", n)
			}
		})
	}
}

// Item 12: wherever the deltas cut the tags, the thinking is reasoning and
// never the reply.
func TestModelThinkTagsInContent(t *testing.T) {
	const thinking, answer = "The person greets me. A short answer.", "Hello! How can I help?"
	content := "<think>\n" + thinking + "\n</think>\n\n" + answer
	for n := 1; n <= len([]rune(content)); n += 3 {
		fake := fakeopenai.New(t)
		fake.Push(fakeopenai.Script{Chunks: fakeopenai.ThinkInline(thinking, answer, n)})
		m := newModel(t, fake, nil)
		var rec recorder
		var rec2 []Msg
		if err := m.Run(context.Background(), Turn{Input: "hi", Record: func(m Msg) { rec2 = append(rec2, m) }}, rec.emit); err != nil {
			t.Fatal(err)
		}
		if got := rec.text(Text); got != answer {
			t.Fatalf("%d pieces: reply %q", n, got)
		}
		if got := strings.TrimSpace(rec.text(Reasoning)); got != thinking {
			t.Fatalf("%d pieces: reasoning %q", n, got)
		}
		if last := rec2[len(rec2)-1]; last.Role != "assistant" || last.Content != answer {
			t.Fatalf("%d pieces: recorded %+v", n, last)
		}
	}
}

// TestModelThinkBlockOpenedByTemplate: a template that opened the block
// (DeepSeek-R1, QwQ) streams the thinking, then "</think>", then the
// answer. Shown as the reply until the tag comes, it is then taken back:
// wherever the deltas cut, the reply and the conversation hold the answer
// alone, and the reasoning holds the thinking.
func TestModelThinkBlockOpenedByTemplate(t *testing.T) {
	const thinking, answer = "The person greets me. A short answer.", "Hello! How can I help?"
	for n := 1; n <= len(thinking)+len(answer)+12; n += 4 {
		fake := fakeopenai.New(t)
		fake.Push(fakeopenai.Script{Chunks: fakeopenai.ThinkOpenedByTemplate(thinking, answer, n)})
		m := newModel(t, fake, nil)
		var rec recorder
		var recorded []Msg
		if err := m.Run(context.Background(), Turn{Input: "hi", Record: func(m Msg) { recorded = append(recorded, m) }}, rec.emit); err != nil {
			t.Fatal(err)
		}
		// The reply as the gateway builds it: text, taken back at
		// TextIsReasoning.
		var reply, reasoning string
		for _, e := range rec.evs {
			switch e.Kind {
			case Text:
				reply += e.Text
			case Reasoning:
				reasoning += e.Text
			case TextIsReasoning:
				if e.Text != reply {
					t.Fatalf("%d pieces: took back %q, the reply so far was %q", n, e.Text, reply)
				}
				reasoning, reply = reasoning+reply, ""
			}
		}
		if reply != answer {
			t.Fatalf("%d pieces: reply %q", n, reply)
		}
		if got := strings.TrimSpace(reasoning); got != thinking {
			t.Fatalf("%d pieces: reasoning %q", n, got)
		}
		if last := recorded[len(recorded)-1]; last.Role != "assistant" || last.Content != answer {
			t.Fatalf("%d pieces: recorded %+v", n, last)
		}
	}
}

// splitAll feeds the parts to a splitter as a stream's deltas and returns
// the reply and the reasoning, reply text taken back where it says so.
func splitAll(parts ...string) (text, reasoning string) {
	var s thinkSplitter
	add := func(p thinkPart) {
		if p.retract {
			reasoning, text = reasoning+text, ""
		}
		text, reasoning = text+p.text, reasoning+p.reasoning
	}
	for _, p := range parts {
		add(s.feed(p))
	}
	add(s.flush())
	return text, reasoning
}

func TestThinkSplitterAtEveryCut(t *testing.T) {
	for _, tc := range []struct{ in, text, reasoning string }{
		{"<think>a b</think>\n\nreply", "reply", "a b"},
		{"reply <think>x</think> more", "reply more", "x"},
		{"no tags at all <", "no tags at all <", ""},
		// The template opened the block: before the first closing tag is
		// the thinking; a closing tag after it is dropped.
		{"before</think>\nafter", "after", "before"},
		{"one\ntwo </think>\n\nreply</think> end", "reply end", "one\ntwo "},
		{"<think>a</think>b</think>c", "bc", "a"},
		{"<think>unclosed", "", "unclosed"},
		{"a <thin b", "a <thin b", ""},
	} {
		if text, reasoning := SplitThink(tc.in); text != tc.text || reasoning != tc.reasoning {
			t.Fatalf("SplitThink(%q): text %q reasoning %q", tc.in, text, reasoning)
		}
		for cut := 0; cut <= len(tc.in); cut++ {
			text, reasoning := splitAll(tc.in[:cut], tc.in[cut:])
			if text != tc.text || reasoning != tc.reasoning {
				t.Fatalf("%q cut at %d: text %q reasoning %q", tc.in, cut, text, reasoning)
			}
		}
	}
}

// Item 13: vLLM refuses /fast's "minimal"; the request goes again with the
// nearest effort it takes, and the next one starts with it.
func TestModelRefusedReasoningEffort(t *testing.T) {
	fake := fakeopenai.New(t)
	fake.Efforts = []string{"low", "medium", "high"}
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("fast", 1)}, fakeopenai.Script{Chunks: fakeopenai.Text("again", 1)},
		fakeopenai.Script{Chunks: fakeopenai.Text("max", 1)})
	m := newModel(t, fake, nil)
	var rec recorder
	for _, in := range []string{"one", "two"} {
		if err := m.Run(context.Background(), Turn{Input: in, Settings: Settings{Reasoning: "minimal"}}, rec.emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Run(context.Background(), Turn{Input: "three", Settings: Settings{Reasoning: "xhigh"}}, rec.emit); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, r := range fake.Requests() {
		sent = append(sent, fmt.Sprint(r["reasoning_effort"]))
	}
	if strings.Join(sent, ",") != "minimal,low,low,xhigh,high" {
		t.Fatalf("efforts sent %v", sent)
	}
	var notes []string
	for _, e := range rec.evs {
		if e.Kind == Commentary {
			notes = append(notes, e.Text)
		}
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "takes reasoning effort low, medium, high, not “minimal”: “low”") {
		t.Fatalf("notes %q", notes)
	}
	if rec.text(Text) != "fastagainmax" {
		t.Fatalf("text %q", rec.text(Text))
	}
}

// Item 14: a server nobody listens for says so, naming it.
func TestModelUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	m, err := NewModel(ModelConfig{Providers: []Provider{{ID: "local", BaseURL: url, Models: []ModelInfo{{ID: "qwen3:8b"}}}}, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(context.Background(), Turn{Input: "x"}, func(Event) {})
	if err == nil || !strings.Contains(err.Error(), "could not reach "+url+": connection refused") || strings.Contains(err.Error(), "broke off") {
		t.Fatalf("err = %v", err)
	}
}

// Item 14: error answers without a message name the status and endpoint;
// a server's own error shape is read.
func TestModelErrorsWithoutTheOpenAIShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   fakeopenai.Script
		want string
	}{
		// Caddy's reverse_proxy in front of a model server that is down.
		{"empty body", fakeopenai.Script{Status: 502, EmptyBody: true}, "/v1/chat/completions answered HTTP 502 Bad Gateway with an empty error"},
		// vLLM before its errors moved under "error".
		{"vLLM top-level", fakeopenai.Script{Status: 400, ErrorBody: `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`}, "HTTP 400 Bad Request: This model's maximum context length is 4096 tokens."},
		// nginx in front of a model server that is down: its own page
		// (ngx_http_special_response.c), text/html.
		{"nginx page", fakeopenai.Script{Status: 502, ErrorType: "text/html", ErrorBody: nginx502}, "HTTP 502 Bad Gateway: 502 Bad Gateway nginx"},
		// Envoy (Istio, some gateways): plain text.
		{"plain text", fakeopenai.Script{Status: 503, ErrorType: "text/plain", ErrorBody: "upstream connect error or disconnect/reset before headers. reset reason: connection failure"}, "HTTP 503 Service Unavailable: upstream connect error or disconnect/reset before headers. reset reason: connection failure"},
		// llama.cpp's llama-server while it loads the model.
		{"llama.cpp loading", fakeopenai.Script{Status: 503, ErrorBody: `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`}, "HTTP 503 Service Unavailable: Loading model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeopenai.New(t)
			fake.Push(tc.sc, tc.sc) // the first try and its one retry (5xx)
			m, err := NewModel(ModelConfig{Providers: []Provider{{ID: "fake", BaseURL: fake.URL, APIKey: "k", Models: []ModelInfo{{ID: "m"}}}}, MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			err = m.Run(context.Background(), Turn{Input: "x"}, func(Event) {})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fake.URL) {
				t.Fatalf("err = %v", err)
			}
			if !tc.sc.EmptyBody && strings.Contains(err.Error(), "empty") {
				t.Fatalf("a body that says something called empty: %v", err)
			}
		})
	}
}

// nginx502 is the page nginx answers 502 with.
const nginx502 = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

func TestBodySnippet(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{nginx502, "502 Bad Gateway nginx"},
		{"<html><head><title>Only a title</title></head></html>", "Only a title"},
		{"<p>Tom &amp; Jerry</p><script>alert(1)</script>", "Tom & Jerry"},
		{"  \n  ", ""},
		{"plain\ttext\n", "plain text"},
		{strings.Repeat("x", 400), strings.Repeat("x", 297) + "…"},
	} {
		if got := bodySnippet([]byte(tc.body), 300); got != tc.want {
			t.Errorf("bodySnippet(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
	// The Hermes bridge reads a proxy's page the same way.
	if got := apiError(502, []byte(nginx502)).Error(); got != "HTTP 502: 502 Bad Gateway nginx" {
		t.Errorf("Hermes behind nginx: %q", got)
	}
}

// FuzzThinkSplitter: however the content is cut, the split is the same,
// and nothing is added to it.
func FuzzThinkSplitter(f *testing.F) {
	for _, s := range []string{"<think>a</think>b", "x</think>y", "x</think>y</think>z", "<thi", "<think><think></think></think>", "a<<think>>b"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, in string, cut int) {
		if cut < 0 {
			cut = -cut
		}
		cut %= len(in) + 1
		t1, r1 := splitAll(in)
		t2, r2 := splitAll(in[:cut], in[cut:])
		if t1 != t2 || r1 != r2 {
			t.Fatalf("%q: whole %q/%q, cut at %d %q/%q", in, t1, r1, cut, t2, r2)
		}
		if len(t1)+len(r1) > len(in) {
			t.Fatalf("%q: more out than in: %q/%q", in, t1, r1)
		}
	})
}

// FuzzErrorFields: any error body is read without a panic, and its
// message is bounded.
func FuzzErrorFields(f *testing.F) {
	for _, s := range []string{``, `{"error":{"message":"x","code":503}}`, `{"error":"no"}`, `{"object":"error","message":"m"}`, `{"detail":[{"msg":"bad"}]}`, `<html>502</html>`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, _, _ := errorFields(body)
		if len(msg) > len(body) {
			t.Fatalf("message %q longer than the body", msg)
		}
	})
}
