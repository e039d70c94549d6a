package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/irisgate/irisgate/agent"
)

// AgentFlags choose and configure the agent backend. Without a model the
// demo echo agent answers, and the gateway says so.
type AgentFlags struct {
	Model         string        `help:"Model id; setting it turns the model backend on (gpt-4.1-mini on OpenAI, openai/gpt-5 on OpenRouter, qwen3:8b on Ollama…)." env:"IRISGATE_MODEL" group:"Agent"`
	BaseURL       string        `help:"OpenAI-compatible endpoint of the model." default:"https://api.openai.com/v1" env:"OPENAI_BASE_URL" group:"Agent"`
	APIKey        string        `help:"API key of that endpoint (local servers need none)." env:"OPENAI_API_KEY" group:"Agent"`
	Models        []string      `help:"More models on the same endpoint, offered by /model." env:"IRISGATE_MODELS" group:"Agent"`
	Provider      []string      `help:"Another endpoint, as ID|BASE_URL|API_KEY_ENV_VAR|MODEL,MODEL (repeatable)." env:"IRISGATE_PROVIDERS" sep:";" group:"Agent"`
	ContextLength int           `help:"Context window of the models, in tokens (older turns are dropped to fit)." default:"${context_length}" env:"IRISGATE_CONTEXT_LENGTH" group:"Agent"`
	PriceIn       float64       `help:"USD per million prompt tokens, for the cost in the runtime footer." env:"IRISGATE_PRICE_IN" group:"Agent"`
	PriceOut      float64       `help:"USD per million completion tokens." env:"IRISGATE_PRICE_OUT" group:"Agent"`
	FastModel     string        `help:"Model /fast switches to (default: same model, minimal reasoning)." env:"IRISGATE_FAST_MODEL" group:"Agent"`
	SystemPrompt  string        `help:"System prompt of every conversation." env:"IRISGATE_SYSTEM_PROMPT" group:"Agent"`
	Workdir       string        `help:"Working directory of the agent's tools." default:"." type:"path" env:"IRISGATE_WORKDIR" group:"Agent"`
	AskTimeout    time.Duration `help:"How long an approval or question waits; silence on an approval denies." default:"${ask_timeout}" env:"IRISGATE_ASK_TIMEOUT" group:"Agent"`
	Dangerous     []string      `help:"Extra regular expressions of terminal commands that need approval." env:"IRISGATE_DANGEROUS" sep:";" group:"Agent"`
	CmdTimeout    time.Duration `help:"Longest a terminal command may run." default:"2m" env:"IRISGATE_COMMAND_TIMEOUT" group:"Agent"`
	MaxIterations int           `help:"Most model calls in one turn (model → tools → model…)." default:"16" env:"IRISGATE_MAX_ITERATIONS" group:"Agent"`
	EchoDelay     time.Duration `help:"Pause between words of the demo echo agent." default:"40ms" env:"IRISGATE_ECHO_DELAY" group:"Agent"`
	SandboxFlags
	ToolsFlags
	HermesFlags

	// modelHTTP is the model backend's HTTP client, handed to the gateway
	// too so auto-thread titles reach the model the way turns do (nil: the
	// OpenAI client's default, for both).
	modelHTTP *http.Client
	// maxFile is serve's --max-media, the largest file send_file offers.
	maxFile int64
}

// HermesFlags connect irisgate to a running Hermes Agent through its API
// server: with a URL set, every turn is a Hermes run.
type HermesFlags struct {
	HermesURL          string        `help:"Hermes Agent's API server (http://127.0.0.1:8642); setting it makes Hermes the agent backend." env:"IRISGATE_HERMES_URL" group:"Hermes"`
	HermesKey          string        `help:"Key of Hermes's API server (its API_SERVER_KEY)." env:"IRISGATE_HERMES_KEY,API_SERVER_KEY" group:"Hermes"`
	HermesTimeout      time.Duration `help:"Longest a Hermes run may take; it is stopped after." default:"30m" env:"IRISGATE_HERMES_TIMEOUT" group:"Hermes"`
	HermesInstructions string        `help:"Extra system prompt sent with every Hermes run (Hermes keeps its own persona)." env:"IRISGATE_HERMES_INSTRUCTIONS" group:"Hermes"`
	AutoTitleHermes    bool          `help:"Let the first model provider configured beside Hermes (--model, --provider) name a Hermes chat's auto-threads: it is sent the thread's first question and reply. Off: those threads keep their first line as title." env:"IRISGATE_AUTO_TITLE_HERMES" group:"Hermes"`
}

// buildHermes makes the Hermes bridge, or nil when no URL is set.
func (f *HermesFlags) buildHermes(log *slog.Logger) (*agent.Hermes, error) {
	if f.HermesURL == "" {
		return nil, nil
	}
	h, err := agent.NewHermes(agent.HermesConfig{URL: f.HermesURL, Key: f.HermesKey, Timeout: f.HermesTimeout, Instructions: f.HermesInstructions})
	if err != nil {
		return nil, fmt.Errorf("--hermes-url: %w", err)
	}
	if f.HermesKey == "" {
		log.Warn("no Hermes API key set (--hermes-key, IRISGATE_HERMES_KEY or API_SERVER_KEY): Hermes will refuse irisgate unless its API server runs without a key")
	}
	log.Info("Hermes backend", "url", h.URL(), "timeout", f.HermesTimeout)
	return h, nil
}

const defaultSystemPrompt = "You are a helpful assistant reached through the person's own gateway, often from a phone: " +
	"be concise. You can run tools in the gateway's working directory, in a sandbox; what leaves it (the network, files elsewhere) and dangerous commands are shown to the person for approval."

// build makes the agent the flags describe. With a Hermes URL, Hermes is
// the backend; a model configured too is offered beside it in /model, so a
// lane may switch to it.
func (f *AgentFlags) build(log *slog.Logger) (agent.Agent, error) {
	h, err := f.buildHermes(log)
	switch {
	case err != nil:
		return nil, err
	case h == nil:
		return f.buildModel(log)
	case f.Model == "":
		return h, nil
	}
	ag, err := f.buildModel(log)
	if err != nil {
		return nil, err
	}
	if m, ok := ag.(*agent.Model); ok {
		return agent.NewSwitch(h, m)
	}
	return h, nil
}

// buildModel makes the model backend (or the echo agent without a model).
func (f *AgentFlags) buildModel(log *slog.Logger) (agent.Agent, error) {
	if f.Model == "" {
		log.Warn("no model configured: the demo echo agent answers (set IRISGATE_MODEL, OPENAI_BASE_URL and OPENAI_API_KEY)")
		return &agent.Echo{Delay: f.EchoDelay}, nil
	}
	mk := func(id string) agent.ModelInfo {
		return agent.ModelInfo{ID: id, ContextLength: f.ContextLength, PriceIn: f.PriceIn, PriceOut: f.PriceOut}
	}
	main := agent.Provider{ID: providerID(f.BaseURL), BaseURL: f.BaseURL, APIKey: f.APIKey, Models: []agent.ModelInfo{mk(f.Model)}}
	for _, m := range f.Models {
		if m = strings.TrimSpace(m); m != "" && m != f.Model {
			main.Models = append(main.Models, mk(m))
		}
	}
	providers := []agent.Provider{main}
	for _, spec := range f.Provider {
		p, err := parseProvider(spec, f)
		if err != nil {
			return nil, err
		}
		providers = append(providers, p)
	}
	policy := &agent.Policy{Rules: agent.DefaultRules()}
	for _, pat := range f.Dangerous {
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("--dangerous %q: %w", pat, err)
		}
		policy.Rules = append(policy.Rules, agent.Rule{Pattern: re, Description: "matches the configured pattern " + pat})
	}
	sb, err := f.sandbox(log, f.Workdir)
	if err != nil {
		return nil, err
	}
	tools := &agent.Tools{Sandbox: sb, Policy: policy, Timeout: f.CmdTimeout, MaxFile: f.maxFile}
	tools.List = agent.Builtin(tools)
	if err := f.addTools(log, tools, f.Workdir); err != nil {
		return nil, err
	}
	prompt := f.SystemPrompt
	if prompt == "" {
		prompt = defaultSystemPrompt
	}
	m, err := agent.NewModel(agent.ModelConfig{Providers: providers, Tools: tools, SystemPrompt: prompt, MaxIterations: f.MaxIterations, HTTPClient: f.modelHTTP})
	if err != nil {
		f.closeTools()
		return nil, err
	}
	log.Info("model backend", "provider", main.ID, "model", f.Model, "base_url", f.BaseURL, "providers", len(providers))
	return m, nil
}

// providerID names an endpoint after its host: api.openai.com → openai.
func providerID(baseURL string) string {
	h := baseURL
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	h, _, _ = strings.Cut(h, "/")
	h, _, _ = strings.Cut(h, ":")
	switch {
	case strings.Contains(h, "openai.com"):
		return "openai"
	case strings.Contains(h, "openrouter"):
		return "openrouter"
	case h == "localhost" || h == "127.0.0.1" || h == "::1":
		return "local"
	}
	return h
}

func parseProvider(spec string, f *AgentFlags) (agent.Provider, error) {
	parts := strings.Split(spec, "|")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" || parts[3] == "" {
		return agent.Provider{}, fmt.Errorf("--provider %q: want ID|BASE_URL|API_KEY_ENV_VAR|MODEL,MODEL", spec)
	}
	p := agent.Provider{ID: parts[0], BaseURL: parts[1]}
	if parts[2] != "" {
		p.APIKey = os.Getenv(parts[2])
		if p.APIKey == "" {
			return p, fmt.Errorf("--provider %s: the environment variable %s is empty", p.ID, parts[2])
		}
	}
	for _, m := range strings.Split(parts[3], ",") {
		if m = strings.TrimSpace(m); m != "" {
			p.Models = append(p.Models, agent.ModelInfo{ID: m, ContextLength: f.ContextLength})
		}
	}
	return p, nil
}
