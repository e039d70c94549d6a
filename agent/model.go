package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// Provider is an OpenAI-compatible endpoint (OpenAI, OpenRouter, vLLM,
// llama.cpp, Ollama…) and the models a person may pick on it.
type Provider struct {
	ID      string
	Label   string
	BaseURL string
	APIKey  string
	Models  []ModelInfo
}

// ModelInfo describes one model.
type ModelInfo struct {
	ID            string
	Label         string
	ContextLength int     // tokens; 0 means DefaultContextLength
	PriceIn       float64 // USD per million prompt tokens; 0: unknown
	PriceOut      float64 // USD per million completion tokens
}

// DefaultContextLength is assumed for models whose window is not configured.
const DefaultContextLength = 32768

// ModelConfig configures the model backend.
type ModelConfig struct {
	Providers []Provider // the first provider's first model is the default
	Tools     *Tools
	// SystemPrompt opens every conversation.
	SystemPrompt string
	// MaxIterations caps model calls in one turn (model → tools → model…).
	MaxIterations int
	// MaxRetries is how often a failed request (429, 5xx, network) is
	// retried, with backoff, before the turn fails. Default 3; negative:
	// never.
	MaxRetries int
	HTTPClient *http.Client
}

// Model is the agent backend over OpenAI-compatible Chat Completions.
type Model struct {
	cfg     ModelConfig
	clients map[string]openai.Client

	mu sync.Mutex
	// effortFix is what an endpoint and model take instead of a reasoning
	// effort they refused ("" : none at all), learnt from their 400s. It
	// is not persisted: the server behind an address changes (upgraded,
	// another model loaded under the same name), and learning it again
	// costs one refused request per start.
	effortFix map[string]string
}

// NewModel makes the backend. It does not contact the providers.
func NewModel(cfg ModelConfig) (*Model, error) {
	if len(cfg.Providers) == 0 || len(cfg.Providers[0].Models) == 0 {
		return nil, errors.New("agent: a model backend needs a provider with a model")
	}
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = 16
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	cfg.MaxRetries = max(cfg.MaxRetries, 0) // the client panics below zero
	if cfg.Tools == nil {
		cfg.Tools = &Tools{}
	}
	m := &Model{cfg: cfg, clients: make(map[string]openai.Client)}
	for _, p := range cfg.Providers {
		opts := []option.RequestOption{option.WithBaseURL(p.BaseURL), option.WithMaxRetries(cfg.MaxRetries), option.WithMiddleware(normalizeErrors)}
		key := p.APIKey
		if key == "" {
			key = "none" // local servers need no key, the client insists on one
		}
		opts = append(opts, option.WithAPIKey(key))
		if cfg.HTTPClient != nil {
			opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
		}
		m.clients[p.ID] = openai.NewClient(opts...)
	}
	return m, nil
}

// Name implements Agent: the default model.
func (m *Model) Name() string { return m.cfg.Providers[0].Models[0].ID }

// Providers lists the configured providers (for the model picker).
func (m *Model) Providers() []Provider { return m.cfg.Providers }

// Resolve finds the provider and model a lane's settings name, falling
// back to the default.
func (m *Model) Resolve(s Settings) (Provider, ModelInfo) {
	for _, p := range m.cfg.Providers {
		if s.Provider != "" && p.ID != s.Provider {
			continue
		}
		for _, mi := range p.Models {
			if s.Model == "" || mi.ID == s.Model {
				return p, mi
			}
		}
	}
	if s.Model != "" {
		// A model not in the lists is allowed (providers have more models
		// than anyone configures, and /fast may name one): it runs on the
		// named provider, or the default one, with that provider's window.
		p := m.cfg.Providers[0]
		for _, q := range m.cfg.Providers {
			if q.ID == s.Provider {
				p = q
			}
		}
		mi := ModelInfo{ID: s.Model}
		if len(p.Models) > 0 {
			mi.ContextLength = p.Models[0].ContextLength
		}
		return p, mi
	}
	return m.cfg.Providers[0], m.cfg.Providers[0].Models[0]
}

// Run implements Agent.
func (m *Model) Run(ctx context.Context, t Turn, emit func(Event)) error {
	prov, mi := m.Resolve(t.Settings)
	client := m.clients[prov.ID]
	window := mi.ContextLength
	if window == 0 {
		window = DefaultContextLength
	}
	record := t.Record
	if record == nil {
		record = func(Msg) {}
	}
	conv := repair(t.History)
	user := Msg{Role: "user", Content: t.Input, MessageID: t.InputID, Attachments: Attachments(t.Media)}
	conv = append(conv, user)
	record(user)
	env := &ToolEnv{Cwd: t.Cwd, Asker: t.Asker, Yolo: t.Settings.Yolo, Todos: t.Todos, Lane: t.Lane, Cron: t.Cron, emit: emit}
	toolIndex := 0
	var totalTokens int
	var cost float64
	costKnown := mi.PriceIn > 0 || mi.PriceOut > 0

	for iter := 0; ; iter++ {
		if iter >= m.cfg.MaxIterations {
			return fmt.Errorf("stopped after %d model calls in one turn (the iteration cap)", m.cfg.MaxIterations)
		}
		// Steering texts arrive between model calls.
	steer:
		for {
			select {
			case s := <-t.Steer:
				sm := Msg{Role: "user", Content: "[The person adds, while you work:] " + s.Text, MessageID: s.MessageID}
				conv = append(conv, sm)
				record(sm)
			default:
				break steer
			}
		}
		msgs := fitWindow(m.cfg.SystemPrompt, conv, window)
		params := openai.ChatCompletionNewParams{
			Model:         shared.ChatModel(mi.ID),
			Messages:      WithAttachments(toParams(msgs), msgs, AcceptsImages(mi.ID)),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}
		if tools := m.cfg.Tools.params(); len(tools) > 0 {
			params.Tools = tools
		}
		want := t.Settings.Reasoning
		effort := m.effort(prov, mi.ID, want)
		params.ReasoningEffort = shared.ReasoningEffort(effort)
		res, err := m.stream(ctx, client, params, emit)
		// A server that refuses the effort (vLLM takes low, medium, high;
		// /fast sends minimal) is asked again with one it takes, or none,
		// and that is remembered for the endpoint and model.
		for tries := 0; err != nil && effort != "" && !res.started && ctx.Err() == nil && tries < 2; tries++ {
			use, accepted, ok := refusedEffort(err, effort)
			if !ok {
				break
			}
			m.learnEffort(prov, mi.ID, want, use)
			emit(Event{Kind: Commentary, Text: effortNote(prov, want, use, accepted)})
			effort = use
			params.ReasoningEffort = shared.ReasoningEffort(effort)
			res, err = m.stream(ctx, client, params, emit)
		}
		if err != nil {
			if strings.TrimSpace(res.text) != "" {
				// The person saw this much of the reply (it is kept,
				// marked stopped): the model sees it next time too.
				record(Msg{Role: "assistant", Content: res.text})
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return describeAPIError(err, prov.BaseURL, res.started)
		}
		totalTokens += res.completionTokens
		if costKnown {
			cost += float64(res.promptTokens)*mi.PriceIn/1e6 + float64(res.completionTokens)*mi.PriceOut/1e6
		}
		usage := Event{Kind: Usage, Model: mi.ID, Cwd: t.Cwd}
		if res.promptTokens > 0 {
			pct := min(100, res.promptTokens*100/window)
			usage.ContextPct = &pct
		}
		if costKnown {
			c := cost
			usage.Cost = &c
		}
		emit(usage)

		am := Msg{Role: "assistant", Content: res.text, ToolCalls: res.calls}
		conv = append(conv, am)
		record(am)
		if len(res.calls) == 0 {
			emit(Event{Kind: Usage, Tokens: totalTokens})
			return nil
		}
		if res.text != "" {
			emit(Event{Kind: TextIsCommentary, Text: res.text})
		}
		for _, call := range res.calls {
			// Every call gets its result, even those a stop prevents: a
			// conversation with an unanswered tool call is refused by the
			// providers, and the lane could not go on.
			out := notRun
			if ctx.Err() == nil {
				toolIndex++
				out = m.cfg.Tools.run(ctx, env, toolIndex, call)
			}
			tm := Msg{Role: "tool", Content: out, ToolCallID: call.ID}
			conv = append(conv, tm)
			record(tm)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// effort is the reasoning effort to send for a lane's choice: "" for none,
// or what the endpoint and model take instead of one they refused.
func (m *Model) effort(p Provider, model, want string) string {
	if want == "" || want == "none" {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if use, ok := m.effortFix[p.BaseURL+"\x00"+model+"\x00"+want]; ok {
		return use
	}
	return want
}

func (m *Model) learnEffort(p Provider, model, want, use string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.effortFix == nil {
		m.effortFix = map[string]string{}
	}
	m.effortFix[p.BaseURL+"\x00"+model+"\x00"+want] = use
}

func effortNote(p Provider, want, use string, accepted []string) string {
	if use == "" {
		return fmt.Sprintf("ℹ️ The model server at %s refused reasoning effort “%s”, so it is left out from now on.", p.BaseURL, want)
	}
	return fmt.Sprintf("ℹ️ The model server at %s takes reasoning effort %s, not “%s”: “%s” is sent instead from now on.", p.BaseURL, strings.Join(accepted, ", "), want, use)
}

// notRun is the result of a tool call a stop prevented.
const notRun = "error: not run: the person stopped the turn"

// repair makes a stored conversation acceptable to the providers: each
// assistant message's tool calls are followed by exactly one result each
// (a missing one, left by a crash, becomes notRun), and results without
// their call are dropped.
func repair(history []Msg) []Msg {
	out := make([]Msg, 0, len(history))
	for i := 0; i < len(history); i++ {
		m := history[i]
		if m.Role == "tool" {
			continue // an orphan: results are placed with their call below
		}
		out = append(out, m)
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		results := map[string]Msg{}
		j := i + 1
		for ; j < len(history) && history[j].Role == "tool"; j++ {
			if _, dup := results[history[j].ToolCallID]; !dup {
				results[history[j].ToolCallID] = history[j]
			}
		}
		for _, c := range m.ToolCalls {
			r, ok := results[c.ID]
			if !ok {
				r = Msg{Role: "tool", Content: notRun, ToolCallID: c.ID}
			}
			out = append(out, r)
		}
		i = j - 1
	}
	return out
}

// fitWindow returns the messages to send: the system prompt and as much
// of the conversation as fits the context window, dropping whole oldest
// exchanges first (never the current one), so a long conversation never
// fails a request by outgrowing the model. When the current exchange alone
// is too big (a turn with many tool rounds), the oldest tool outputs in it
// are cut short.
func fitWindow(system string, conv []Msg, window int) []Msg {
	budget := window * 3 / 4 // room for the reply
	budget -= estimateTokens(system)
	// Exchanges start at user messages.
	starts := []int{}
	for i, m := range conv {
		if m.Role == "user" && (i == 0 || conv[i-1].Role != "user") {
			starts = append(starts, i)
		}
	}
	total := 0
	for _, m := range conv {
		total += estimateMsg(m)
	}
	from := 0
	for k := 0; k < len(starts)-1 && total > budget; k++ {
		for i := starts[k]; i < starts[k+1]; i++ {
			total -= estimateMsg(conv[i])
		}
		from = starts[k+1]
	}
	out := make([]Msg, 0, len(conv)-from+1)
	if system != "" {
		out = append(out, Msg{Role: "system", Content: system})
	}
	out = append(out, conv[from:]...)
	// The newest round's results are what the model is about to read:
	// they are cut last.
	for i := range out {
		if total <= budget {
			break
		}
		if out[i].Role != "tool" || len(out[i].Content) <= shortOutput {
			continue
		}
		before := estimateMsg(out[i])
		out[i].Content = truncate(out[i].Content, shortOutput/2) + "\n[… output cut to fit the context window …]\n" + tail(out[i].Content, shortOutput/2)
		total += estimateMsg(out[i]) - before
	}
	return out
}

// shortOutput is how much of an old tool output is kept when the window is
// tight.
const shortOutput = 512

func estimateMsg(m Msg) int { return estimateTokens(m.Content) + estimateCalls(m.ToolCalls) }

// estimateTokens is a conservative guess: about four bytes a token, plus
// framing per message.
func estimateTokens(s string) int { return len(s)/3 + 4 }

func estimateCalls(cs []ToolCall) int {
	n := 0
	for _, c := range cs {
		n += estimateTokens(c.Name) + estimateTokens(c.Arguments)
	}
	return n
}

func toParams(msgs []Msg) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case "system":
			out = append(out, openai.SystemMessage(m.Content))
		case "user":
			out = append(out, openai.UserMessage(m.Content))
		case "tool":
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
