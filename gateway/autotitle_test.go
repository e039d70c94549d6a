package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/store"
)

// What a model answers is untrusted text: the title is its first line
// that says something, without the decorations models add.
func TestCleanTitle(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"Capital of France", "Capital of France"},
		{"  \"Capital of France.\"  ", "Capital of France"},
		{"**Title:** Capital of France", "Capital of France"},
		{"# Trip to Lisbon\n\nHere is why I chose it…", "Trip to Lisbon"},
		{"\n\n  Titre : Voyage à Lisbonne\n", "Voyage à Lisbonne"},
		{"<think>The person asks about Paris.\nA title…</think>\nParis facts", "Paris facts"},
		{"The person asks about Paris.</think>Paris facts", "Paris facts"}, // the opening tag was in the template
		{"<think>still thinking when the answer was cut", ""},
		{"Learning C#", "Learning C#"},
		{"Deploy\x00 the\x1b[31m service\u202e", "Deploy the [31m service"},
		{"A title that goes on and on well past any length a channel list could show", "A title that goes on and on well past any…"},
		{"\"\"", ""},
		{"...", ""},
		{"", ""},
	} {
		if got := cleanTitle(c.raw); got != c.want {
			t.Errorf("cleanTitle(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}

// The model that names a thread: the lane's, or the fast model; never the
// Hermes bridge (a whole agent run), none for the echo agent, and for a
// Hermes lane another provider only when the owner opted in.
func TestTitleModel(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	model, err := agent.NewModel(agent.ModelConfig{Providers: []agent.Provider{
		{ID: "local", BaseURL: "http://127.0.0.1:1/v1", Models: []agent.ModelInfo{{ID: "qwen3:8b"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	hermes, err := agent.NewHermes(agent.HermesConfig{URL: "http://127.0.0.1:2", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer hermes.Close()
	both, err := agent.NewSwitch(hermes, model)
	if err != nil {
		t.Fatal(err)
	}
	lane := core.Lane{ChatID: "default", ThreadID: "t_1"}
	for _, c := range []struct {
		name   string
		agent  agent.Agent
		fast   string
		hermes bool   // AutoTitleHermes
		want   string // provider/model, "" for none
	}{
		{"echo", &agent.Echo{}, "", false, ""},
		{"model", model, "", false, "local/qwen3:8b"},
		{"fast model", model, "qwen3:0.6b", false, "local/qwen3:0.6b"},
		{"hermes alone", hermes, "", false, ""},
		{"hermes alone, opted in", hermes, "", true, ""},
		{"hermes first, a model beside it", both, "", false, ""},
		{"hermes first, a model beside it, opted in", both, "", true, "local/qwen3:8b"},
		{"a model lane beside hermes, not opted in", switched(t, model, hermes), "", false, "local/qwen3:8b"},
	} {
		g := New(st, hub.New(st, log, hub.DefaultLimits), log, Config{Agent: c.agent, FastModel: c.fast, AutoTitleHermes: c.hermes})
		p, m, ok := g.titleModel(context.Background(), lane)
		got := ""
		if ok {
			got = p.ID + "/" + m
		}
		if got != c.want {
			t.Errorf("%s: the title model is %q, want %q", c.name, got, c.want)
		}
	}
}

// A title request is bounded in time (its context) and in what it reads,
// and it offers the model no tools.
func TestAskTitleBounds(t *testing.T) {
	fake := fakeopenai.New(t)
	p := agent.Provider{ID: "fake", BaseURL: fake.URL, APIKey: "k"}

	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Capital of France", 3)})
	got, err := askTitle(context.Background(), nil, p, "m", "What is the capital of France?", "Paris.")
	if err != nil || got != "Capital of France" {
		t.Fatalf("askTitle = %q, %v", got, err)
	}
	reqs := fake.Requests()
	req := reqs[len(reqs)-1]
	if _, ok := req["tools"]; ok {
		t.Fatalf("the title request offers tools: %v", req["tools"])
	}
	if req["stream"] != true || req["model"] != "m" {
		t.Fatalf("the title request is %v", req)
	}
	msgs, _ := req["messages"].([]any)
	if len(msgs) != 2 || !strings.Contains(jsonText(msgs[1]), "What is the capital of France?") || !strings.Contains(jsonText(msgs[1]), "Paris.") {
		t.Fatalf("the title request's messages: %v", msgs)
	}

	hold := make(chan struct{})
	defer close(hold)
	fake.Push(fakeopenai.Script{Hold: hold, Chunks: fakeopenai.Text("never", 1)})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := askTitle(ctx, nil, p, "m", "q", "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a held title request returned %v, want the deadline", err)
	}

	// A provider that streams on and on is cut off at the text cap.
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text(strings.Repeat("word ", 4000), 400)})
	long, err := askTitle(context.Background(), nil, p, "m", "q", "a")
	if err != nil || len(long) < titleText || len(long) > titleText+200 {
		t.Fatalf("a long answer gave %d bytes (%v), want about %d", len(long), err, titleText)
	}
	// And one that says little but sends much (a model reasoning at
	// length) is cut off at the body cap.
	fake.Push(fakeopenai.Script{Chunks: append(fakeopenai.Reasoning("reasoning_content", strings.Repeat("hmm ", titleBody/4+1000), 100),
		fakeopenai.Text("Too late", 1)...)})
	if got, err := askTitle(context.Background(), nil, p, "m", "q", "a"); !errors.Is(err, errTitleTooLong) && (err == nil || !strings.Contains(err.Error(), errTitleTooLong.Error())) {
		t.Fatalf("a response over the body cap gave %q, %v", got, err)
	}
}

func jsonText(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["content"].(string)
	return s
}

// switched is a Switch whose first backend is a: its lanes run on a unless
// they picked another.
func switched(t *testing.T, a, b agent.Backend) agent.Agent {
	t.Helper()
	s, err := agent.NewSwitch(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A title request goes through the model backend's HTTP client: a
// provider behind a private CA (here the fake's own certificate, which
// only its client trusts) names threads as it answers turns.
func TestAskTitleModelClient(t *testing.T) {
	fake := fakeopenai.NewTLS(t)
	p := agent.Provider{ID: "private", BaseURL: fake.URL, APIKey: "k"}
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Private title", 2)})
	got, err := askTitle(context.Background(), fake.Client(), p, "m", "q", "a")
	if err != nil || got != "Private title" {
		t.Fatalf("through the model's client: askTitle = %q, %v", got, err)
	}
	// The default client does not trust that CA: the request fails in the
	// handshake, before the fake sees it.
	if _, err := askTitle(context.Background(), nil, p, "m", "q", "a"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("through the default client: %v, want a certificate error", err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the fake got %d requests, want the one through the model's client", n)
	}
}
