package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Hermes is the agent backend that forwards each turn to a running Hermes
// Agent through its API server: a turn is one run (POST /v1/runs), followed
// through the run's server-sent events (GET /v1/runs/{id}/events). Hermes
// does the work with its own model, memory, skills and tools; irisgate
// shows it and relays the approvals Hermes asks for.
//
// A lane's Hermes session id is kept in the lane's conversation (an entry
// of role "hermes_session"), so the conversation continues across turns and
// gateway restarts; /new, which clears the conversation, starts a new
// Hermes session.
type Hermes struct {
	cfg      HermesConfig
	base     string // scheme://host[:port][/prefix], without /v1
	client   *http.Client
	own      *http.Transport // made here, closed by Close
	provider Provider
	// noSteer is set once Hermes answered that it has no steer route (an
	// API server older than POST /v1/runs/{id}/steer).
	noSteer atomic.Bool
}

// HermesConfig configures the Hermes bridge.
type HermesConfig struct {
	// URL is the API server's address: http://127.0.0.1:8642 (a trailing
	// /v1 is accepted too).
	URL string
	// Key is the API server's key (API_SERVER_KEY), sent as a Bearer token.
	Key string
	// Instructions, when set, is sent with every run as an ephemeral
	// system prompt layered over Hermes's own.
	Instructions string
	// Timeout bounds one run; a run still going then is stopped and the
	// person told. Default 30 minutes.
	Timeout time.Duration
	// PollEvery is how often the run's status is polled once its event
	// stream is lost. Default 2 s.
	PollEvery time.Duration
	// StallTimeout is how long the event stream may stay completely silent
	// (Hermes sends a keepalive after 30 s of quiet) before it is taken for
	// dead and the run followed by polling. Default 95 s.
	StallTimeout time.Duration
	// MaxRetries is how often starting a run is retried, with backoff,
	// when Hermes is busy (429), unavailable (502–504) or refuses the
	// connection. Default 3; negative: never.
	MaxRetries int
	// RetryBackoff is the first pause between those retries; it doubles.
	// Default 1 s.
	RetryBackoff time.Duration
	// RequestTimeout bounds each request other than the event stream.
	// Default 30 s.
	RequestTimeout time.Duration
	// HistoryChars bounds the conversation sent with a run (newest
	// exchanges first). Default 200,000 characters.
	HistoryChars int
	// StopWait is how long a stopped run is watched for Hermes to confirm
	// it ended (its status). Default 10 s.
	StopWait   time.Duration
	HTTPClient *http.Client
}

// The Hermes bridge's names.
const (
	// HermesProviderID is the provider the bridge shows in /model and
	// /status.
	HermesProviderID = "hermes"
	// HermesModelID is the model it reports: Hermes answers with whatever
	// model it is configured with.
	HermesModelID = "hermes-agent"

	// Roles of the bridge's own conversation entries. Other backends skip
	// roles they do not know.
	hermesSessionRole = "hermes_session" // Content: the lane's Hermes session id
	hermesSteerRole   = "hermes_steer"   // Content: a note for the next run
	// hermesSteeredRole is a note a run took mid-way (Content: the note).
	// It is not a "user" entry: that would end the notes still owed to the
	// next run.
	hermesSteeredRole = "hermes_steered"
)

// NewHermes makes the bridge. It does not contact Hermes.
func NewHermes(cfg HermesConfig) (*Hermes, error) {
	raw := strings.TrimSpace(cfg.URL)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent: the Hermes API server URL %q is not an http(s) URL like http://127.0.0.1:8642", cfg.URL)
	}
	u.RawQuery, u.Fragment = "", ""
	base := strings.TrimRight(u.String(), "/")
	base = strings.TrimSuffix(base, "/v1")
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Minute
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 2 * time.Second
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 95 * time.Second
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.HistoryChars <= 0 {
		cfg.HistoryChars = 200_000
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = 10 * time.Second
	}
	h := &Hermes{cfg: cfg, base: base, client: cfg.HTTPClient}
	if h.client == nil {
		h.own = http.DefaultTransport.(*http.Transport).Clone()
		h.client = &http.Client{Transport: h.own}
	}
	h.provider = Provider{
		ID: HermesProviderID, Label: "Hermes Agent at " + u.Host, BaseURL: base,
		Models: []ModelInfo{{ID: HermesModelID, Label: "Hermes Agent (the model Hermes is configured with)"}},
	}
	return h, nil
}

// Name implements Agent.
func (h *Hermes) Name() string { return HermesModelID }

// URL is the API server the bridge talks to.
func (h *Hermes) URL() string { return h.base }

// Providers lists the one provider, Hermes (for /model).
func (h *Hermes) Providers() []Provider { return []Provider{h.provider} }

// Resolve implements the model listing of /status and /model. Hermes picks
// its model itself, so every lane resolves to it.
func (h *Hermes) Resolve(Settings) (Provider, ModelInfo) {
	return h.provider, h.provider.Models[0]
}

// Close releases idle connections to Hermes.
func (h *Hermes) Close() error {
	if h.own != nil {
		h.own.CloseIdleConnections()
	}
	return nil
}

// runRequest is the body of POST /v1/runs.
type runRequest struct {
	Input        string `json:"input"`
	SessionID    string `json:"session_id,omitempty"`
	Instructions string `json:"instructions,omitempty"`
	// ConversationHistory is the lane's conversation as text. Sent with
	// the session id because Hermes's /v1/runs does not (yet) replay a
	// session's transcript by itself; an explicit history takes
	// precedence there, so this stays correct once it does.
	ConversationHistory []hermesMsg `json:"conversation_history,omitempty"`
}

type hermesMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// hermesUsage is a run's token count.
type hermesUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// hermesEvent is one event of a run's stream.
type hermesEvent struct {
	Event       string          `json:"event"`
	RunID       string          `json:"run_id"`
	Timestamp   float64         `json:"timestamp"`
	Delta       string          `json:"delta"`
	Text        string          `json:"text"`
	Tool        string          `json:"tool"`
	Preview     *string         `json:"preview"`
	Duration    float64         `json:"duration"`
	Error       json.RawMessage `json:"error"` // bool on tool.completed, text on run.failed
	Command     string          `json:"command"`
	Description string          `json:"description"`
	Choices     []string        `json:"choices"`
	Choice      string          `json:"choice"`
	RequestID   string          `json:"request_id"` // approvals, newer Hermes
	Resolved    int             `json:"resolved"`   // approval.responded: how many it resolved
	Output      string          `json:"output"`
	Usage       *hermesUsage    `json:"usage"`
	// PendingSteer is the steer text the run ended without reading.
	PendingSteer string `json:"pending_steer"`
}

// hermesStatus is GET /v1/runs/{id}.
type hermesStatus struct {
	RunID     string       `json:"run_id"`
	Status    string       `json:"status"`
	SessionID string       `json:"session_id"`
	LastEvent string       `json:"last_event"`
	UpdatedAt float64      `json:"updated_at"`
	Output    string       `json:"output"`
	Usage     *hermesUsage `json:"usage"`
	Error     string       `json:"error"`
	// Approval is the request waited for (newer Hermes, while the status
	// is waiting_for_approval).
	Approval     *hermesEvent `json:"approval"`
	PendingSteer string       `json:"pending_steer"`
}

// terminalStatus says a run status is final (Hermes's TERMINAL_STATUSES).
func terminalStatus(s string) bool {
	switch s {
	case "completed", "failed", "cancelled", "interrupted":
		return true
	}
	return false
}

// outcome is how a run ended.
type outcome struct {
	status       string // completed | failed | cancelled | interrupted
	output       string
	usage        *hermesUsage
	err          string
	pendingSteer string
}

// laneState is what the bridge keeps in a lane's conversation.
type laneState struct {
	session string
	steers  []string // notes to put in front of the next run's input
	history []hermesMsg
}

func readLaneState(history []Msg, budget int) laneState {
	var st laneState
	for _, m := range history {
		switch m.Role {
		case hermesSessionRole:
			st.session = m.Content
		case hermesSteerRole:
			st.steers = append(st.steers, m.Content)
		case hermesSteeredRole:
			st.history = append(st.history, hermesMsg{Role: "user", Content: steerNote + m.Content})
		case "user", "assistant":
			if m.Role == "user" {
				st.steers = nil // taken by the run that sent this
			}
			if strings.TrimSpace(m.Content) != "" {
				st.history = append(st.history, hermesMsg{Role: m.Role, Content: m.Content})
			}
		}
	}
	// The newest exchanges that fit the budget, starting with the person.
	from, size := len(st.history), 0
	for from > 0 && size+len(st.history[from-1].Content) <= budget {
		from--
		size += len(st.history[from].Content)
	}
	for from < len(st.history) && st.history[from].Role != "user" {
		from++
	}
	st.history = st.history[from:]
	return st
}

// steerPrefix puts the notes a person sent while an earlier run worked in
// front of the next input.
func steerPrefix(steers []string, input string) string {
	if len(steers) == 0 {
		return input
	}
	var b strings.Builder
	for _, s := range steers {
		fmt.Fprintf(&b, "[Added while you were working on my previous message:] %s\n\n", s)
	}
	b.WriteString(input)
	return b.String()
}

// Run implements Agent: one turn is one Hermes run.
func (h *Hermes) Run(ctx context.Context, t Turn, emit func(Event)) error {
	record := t.Record
	if record == nil {
		record = func(Msg) {}
	}
	st := readLaneState(t.History, h.cfg.HistoryChars)
	input := steerPrefix(st.steers, t.Input)
	if len(t.Media) > 0 {
		emit(Event{Kind: Commentary, Text: "📎 Hermes's API server takes text only: it got your words, not the attachments."})
		if strings.TrimSpace(t.Input) == "" {
			names := make([]string, len(t.Media))
			for i, m := range t.Media {
				names[i] = orText(m.Filename, m.Kind)
			}
			input = steerPrefix(st.steers, "[I sent only attachments, which cannot reach you through this connection: "+strings.Join(names, ", ")+"]")
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()

	runID, err := h.start(runCtx, runRequest{Input: input, SessionID: st.session, Instructions: h.cfg.Instructions, ConversationHistory: st.history})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if runCtx.Err() != nil {
			return h.timeoutError()
		}
		return err
	}
	session := st.session
	if session == "" {
		session = runID // Hermes uses the run id as the new session's id
	}
	// Recorded as soon as the run exists, so a restart mid-run keeps the
	// session.
	record(Msg{Role: "user", Content: input, MessageID: t.InputID})
	record(Msg{Role: hermesSessionRole, Content: session, MessageID: t.InputID})

	r := &hermesRun{h: h, id: runID, t: t, emit: emit, record: record}
	out, err := r.follow(runCtx)
	r.dropApproval("the run ended")
	if err == nil && out.status == "cancelled" && ctx.Err() != nil {
		err = ctx.Err() // our own stop, reported by Hermes
	}
	if err != nil {
		r.closeTools("stopped")
		r.recordPartial()
		if runCtx.Err() == nil {
			return err
		}
		// Stopped (agent.stop, shutdown) or over its time: Hermes must stop
		// too, or it works on for nobody. What it says is checked.
		note := h.stopRun(runID)
		if ctx.Err() != nil {
			if note != "" {
				emit(Event{Kind: Commentary, Text: note})
			}
			return ctx.Err()
		}
		if note != "" {
			return fmt.Errorf("%w. %s", h.timeoutError(), note)
		}
		return h.timeoutError()
	}
	switch out.status {
	case "completed":
		r.finish(out.output, out.usage)
		r.keepPendingSteer(out.pendingSteer)
		return nil
	case "failed":
		r.closeTools("the run failed")
		r.recordPartial()
		reason := strings.TrimSpace(out.err)
		if reason == "" {
			reason = "it gave no reason"
		}
		return fmt.Errorf("Hermes could not finish the run: %s", truncate(reason, 500))
	case "interrupted":
		r.closeTools("Hermes restarted")
		r.recordPartial()
		return errors.New("Hermes restarted before this run finished (its status is now interrupted): what it did until then may be in its session, but no answer came. Send your message again to go on")
	default: // cancelled, not by us
		r.closeTools("cancelled")
		r.recordPartial()
		return errors.New("Hermes cancelled the run before it finished (was it stopped from another client, or restarted?)")
	}
}

func (h *Hermes) timeoutError() error {
	return fmt.Errorf("Hermes did not finish within %v, irisgate's limit for one run, so the run was stopped (the limit is --hermes-timeout)", h.cfg.Timeout)
}
