package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/irisgate/irisgate/core"
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
	HTTPClient   *http.Client
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
	Delta       string          `json:"delta"`
	Text        string          `json:"text"`
	Tool        string          `json:"tool"`
	Preview     *string         `json:"preview"`
	Duration    float64         `json:"duration"`
	Error       json.RawMessage `json:"error"` // bool on tool.completed, text on run.failed
	Command     string          `json:"command"`
	Description string          `json:"description"`
	Output      string          `json:"output"`
	Usage       *hermesUsage    `json:"usage"`
}

// hermesStatus is GET /v1/runs/{id}.
type hermesStatus struct {
	RunID     string       `json:"run_id"`
	Status    string       `json:"status"`
	SessionID string       `json:"session_id"`
	LastEvent string       `json:"last_event"`
	Output    string       `json:"output"`
	Usage     *hermesUsage `json:"usage"`
	Error     string       `json:"error"`
}

// outcome is how a run ended.
type outcome struct {
	status string // completed | failed | cancelled
	output string
	usage  *hermesUsage
	err    string
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
	if err == nil && out.status == "cancelled" && ctx.Err() != nil {
		err = ctx.Err() // our own stop, reported by Hermes
	}
	if err != nil {
		r.closeTools(false, "stopped")
		r.recordPartial()
		if runCtx.Err() == nil {
			return err
		}
		// Stopped (agent.stop, shutdown) or over its time: Hermes must stop
		// too, or it works on for nobody.
		h.stop(runID)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return h.timeoutError()
	}
	switch out.status {
	case "completed":
		r.finish(out.output, out.usage)
		return nil
	case "failed":
		r.closeTools(false, "the run failed")
		r.recordPartial()
		reason := strings.TrimSpace(out.err)
		if reason == "" {
			reason = "it gave no reason"
		}
		return fmt.Errorf("Hermes could not finish the run: %s", truncate(reason, 500))
	default: // cancelled, not by us
		r.closeTools(false, "cancelled")
		r.recordPartial()
		return errors.New("Hermes cancelled the run before it finished (was it stopped from another client, or restarted?)")
	}
}

func (h *Hermes) timeoutError() error {
	return fmt.Errorf("Hermes did not finish within %v, irisgate's limit for one run, so the run was stopped (the limit is --hermes-timeout)", h.cfg.Timeout)
}

// hermesRun follows one run and turns what it reports into events.
type hermesRun struct {
	h      *Hermes
	id     string
	t      Turn
	emit   func(Event)
	record func(Msg)

	seg       string // reply text since the last commentary beat
	reasoning bool
	tools     []*core.Tool // started, not yet ended, oldest first
	toolN     int
	lost      bool // the live stream is gone: following by polling
}

// follow reads the run's event stream until the run ends; if the stream is
// lost first it follows the run by polling its status.
func (r *hermesRun) follow(ctx context.Context) (*outcome, error) {
	out, lost := r.stream(ctx)
	if out != nil {
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.lost = true
	r.closeTools(false, "outcome unknown: the live stream from Hermes broke off")
	r.emit(Event{Kind: Commentary, Text: fmt.Sprintf("📡 The live stream from Hermes broke off (%s). Following the run until it ends: the answer will arrive in full.", describeLoss(lost))})
	return r.poll(ctx)
}

func describeLoss(err error) string {
	var ae *hermesAPIError
	switch {
	case errors.Is(err, io.EOF):
		return "it ended before the run did"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection dropped"
	case errors.Is(err, errStalled):
		return err.Error()
	case errors.As(err, &ae):
		return fmt.Sprintf("HTTP %d: %s", ae.status, truncate(ae.message, 120))
	}
	return truncate(unwrapURL(err).Error(), 160)
}

// errStalled says the stream went silent, keepalives included.
var errStalled = errors.New("stalled")

// stream reads the run's events. It returns the outcome once the run
// ended, or why the stream was lost.
func (r *hermesRun) stream(ctx context.Context) (*outcome, error) {
	h := r.h
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, h.base+"/v1/runs/"+url.PathEscape(r.id)+"/events", nil)
	if err != nil {
		return nil, err
	}
	h.headers(req)
	req.Header.Set("Accept", "text/event-stream")
	// Waiting for the response's head is bounded like the silence after.
	headWait := time.AfterFunc(h.cfg.StallTimeout, cancel)
	resp, err := h.client.Do(req)
	if !headWait.Stop() && err != nil {
		return nil, fmt.Errorf("%w: no answer to the subscription within %v", errStalled, h.cfg.StallTimeout)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, apiError(resp.StatusCode, b)
	}
	items := make(chan sseItem)
	done := make(chan struct{})
	go readSSE(resp.Body, items, done)
	defer func() {
		cancel()
		resp.Body.Close()
		close(done)
		for range items { // until the reader has gone
		}
	}()
	stall := time.NewTimer(h.cfg.StallTimeout)
	defer stall.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok {
				return nil, io.ErrUnexpectedEOF
			}
			if it.err != nil {
				return nil, it.err
			}
			if !it.comment { // comments (": keepalive") only prove the stream alive
				stall.Stop() // an approval may wait on the person: no stall meanwhile
				if out := r.handle(ctx, it.data); out != nil {
					return out, nil
				}
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
			}
			resetTimer(stall, h.cfg.StallTimeout)
		case s := <-r.t.Steer:
			r.steer(s)
		case <-stall.C:
			return nil, fmt.Errorf("%w: nothing, not even a keepalive, for %v", errStalled, h.cfg.StallTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// handle applies one event; it returns the outcome when the run ended.
func (r *hermesRun) handle(ctx context.Context, data string) *outcome {
	var ev hermesEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return nil // not an event we can read; the outcome is what counts
	}
	if ev.RunID != "" && ev.RunID != r.id {
		return nil
	}
	switch ev.Event {
	case "message.delta":
		r.text(ev.Delta)
	case "reasoning.available":
		if strings.TrimSpace(ev.Text) != "" {
			text := ev.Text
			if r.reasoning {
				text = "\n\n" + text
			}
			r.reasoning = true
			r.emit(Event{Kind: Reasoning, Text: text})
		}
	case "tool.started":
		// What streamed before a tool was Hermes thinking aloud, not its
		// answer: it becomes a commentary beat.
		if r.seg != "" {
			r.emit(Event{Kind: TextIsCommentary, Text: r.seg})
			r.seg = ""
		}
		r.toolN++
		tool := &core.Tool{Index: r.toolN, Name: ev.Tool, Emoji: HermesToolEmoji(ev.Tool)}
		if ev.Preview != nil {
			tool.Preview = truncate(strings.TrimSpace(*ev.Preview), 120)
		}
		r.tools = append(r.tools, tool)
		r.emit(Event{Kind: ToolStart, Tool: tool})
	case "tool.completed":
		var failed bool
		json.Unmarshal(ev.Error, &failed)
		idx := -1
		for i, tl := range r.tools {
			if tl.Name == ev.Tool {
				idx = i
				break
			}
		}
		index := 0
		if idx >= 0 {
			index = r.tools[idx].Index
			r.tools = append(r.tools[:idx], r.tools[idx+1:]...)
		} else { // a completion whose start was not seen
			r.toolN++
			index = r.toolN
		}
		end := &core.Tool{Index: index, Name: ev.Tool, OK: !failed, Duration: ev.Duration}
		if failed {
			end.Output = "failed"
		}
		r.emit(Event{Kind: ToolEnd, Tool: end})
	case "approval.request":
		r.approve(ctx, ev)
	case "run.completed":
		return &outcome{status: "completed", output: ev.Output, usage: ev.Usage}
	case "run.failed":
		var msg string
		if json.Unmarshal(ev.Error, &msg) != nil {
			msg = strings.Trim(string(ev.Error), `"`)
		}
		return &outcome{status: "failed", err: msg}
	case "run.cancelled":
		return &outcome{status: "cancelled"}
	}
	return nil
}

func (r *hermesRun) text(s string) {
	if s == "" {
		return
	}
	r.seg += s
	r.emit(Event{Kind: Text, Text: s})
}

// closeTools ends the tools Hermes never reported ended.
func (r *hermesRun) closeTools(ok bool, note string) {
	for _, tl := range r.tools {
		r.emit(Event{Kind: ToolEnd, Tool: &core.Tool{Index: tl.Index, Name: tl.Name, OK: ok, Output: note}})
	}
	r.tools = nil
}

// approve relays an approval request to the person and Hermes the answer.
func (r *hermesRun) approve(ctx context.Context, ev hermesEvent) {
	choice := "deny"
	switch {
	case r.t.Settings.Yolo:
		choice = "once"
	case r.t.Asker != nil:
		desc := ev.Description
		if desc == "" {
			desc = "Hermes asks before running this command."
		}
		v, err := r.t.Asker.Approve(ctx, ev.Command, desc)
		if err != nil && ctx.Err() != nil {
			return // stopped while asking: the run is being stopped
		}
		switch v {
		case "once", "session", "always", "deny":
			choice = v
		}
	}
	r.answer(ctx, choice)
}

// answer posts an approval choice.
func (r *hermesRun) answer(ctx context.Context, choice string) {
	err := r.h.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(r.id)+"/approval", map[string]string{"choice": choice}, nil)
	if err == nil || ctx.Err() != nil {
		return
	}
	var ae *hermesAPIError
	if errors.As(err, &ae) && ae.status == http.StatusConflict {
		r.emit(Event{Kind: Commentary, Text: "⏱ Hermes no longer waits for that approval (it may have timed out, which denies it)."})
		return
	}
	r.emit(Event{Kind: Commentary, Text: "⚠️ Could not give Hermes the answer to its approval: " + r.h.describe(err).Error()})
}

// steer keeps a note the person sent mid-run for the next run: Hermes's API
// server cannot take new input while a run works.
func (r *hermesRun) steer(s Steer) {
	r.record(Msg{Role: hermesSteerRole, Content: s.Text, MessageID: s.MessageID})
	r.emit(Event{Kind: Commentary, Text: "📝 Hermes can't take new instructions in the middle of a run, so your note will go in front of your next message."})
}

// poll follows a run whose stream was lost until it ends.
func (r *hermesRun) poll(ctx context.Context) (*outcome, error) {
	const maxFailures = 5
	failures := 0
	answered := false // the approval Hermes waits for was answered
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case s := <-r.t.Steer:
			r.steer(s)
			continue
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		st, err := r.h.status(ctx, r.id)
		switch {
		case err == nil:
			failures = 0
			switch st.Status {
			case "completed":
				return &outcome{status: "completed", output: st.Output, usage: st.Usage}, nil
			case "failed":
				return &outcome{status: "failed", err: st.Error}, nil
			case "cancelled":
				return &outcome{status: "cancelled"}, nil
			case "waiting_for_approval":
				if !answered {
					answered = true
					r.answerBlind(ctx)
				}
			default:
				answered = false
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case isStatus(err, http.StatusNotFound):
			return nil, errors.New("Hermes no longer knows this run (did it restart?), so its answer is lost")
		case isStatus(err, http.StatusUnauthorized, http.StatusForbidden):
			return nil, r.h.describe(err)
		default:
			failures++
			if failures >= maxFailures {
				return nil, fmt.Errorf("lost contact with Hermes while following the run (%v); it may still finish there", r.h.describe(err))
			}
		}
		timer.Reset(r.h.cfg.PollEvery)
	}
}

// answerBlind answers an approval whose request was in the lost stream:
// its command is unknown, so it is denied (allowed under /yolo).
func (r *hermesRun) answerBlind(ctx context.Context) {
	if r.t.Settings.Yolo {
		r.answer(ctx, "once")
		r.emit(Event{Kind: Commentary, Text: "⚠️ Hermes asked for an approval while its live stream was down; YOLO is on, so it was allowed."})
		return
	}
	r.answer(ctx, "deny")
	r.emit(Event{Kind: Commentary, Text: "⛔ Hermes asked to approve a command while its live stream was down, so what it wanted to run never reached irisgate: it was denied. Ask again if it should run."})
}

// finish delivers the final answer: Hermes's output is authoritative over
// the deltas that streamed (some may have been lost).
func (r *hermesRun) finish(output string, usage *hermesUsage) {
	r.closeTools(true, "")
	seg := r.seg
	if output != "" {
		trimmed := strings.TrimLeft(seg, " \t\r\n")
		switch {
		case strings.HasPrefix(output, seg):
			r.text(output[len(seg):])
		case strings.HasPrefix(output, trimmed):
			r.text(output[len(trimmed):])
		case strings.TrimSpace(output) == strings.TrimSpace(seg):
		default:
			// The deltas say something else than the answer: what streamed
			// becomes a commentary beat and the reply starts over.
			if seg != "" {
				r.emit(Event{Kind: TextIsCommentary, Text: seg})
				r.seg = ""
			}
			r.text(output)
		}
	}
	if strings.TrimSpace(r.seg) == "" {
		r.emit(Event{Kind: Commentary, Text: "Hermes finished without a reply."})
	} else {
		r.record(Msg{Role: "assistant", Content: r.seg})
	}
	u := Event{Kind: Usage, Model: HermesModelID}
	if usage != nil {
		u.Tokens = usage.OutputTokens
	}
	r.emit(u)
}

// recordPartial keeps what the person saw of a reply that did not finish.
func (r *hermesRun) recordPartial() {
	if strings.TrimSpace(r.seg) != "" {
		r.record(Msg{Role: "assistant", Content: r.seg})
	}
}

// --- HTTP ---

func (h *Hermes) headers(req *http.Request) {
	if h.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+h.cfg.Key)
	}
	req.Header.Set("User-Agent", "irisgate")
}

// hermesAPIError is an error answer of the API server.
type hermesAPIError struct {
	status  int
	message string
	code    string
}

func (e *hermesAPIError) Error() string {
	if e.message == "" {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.message)
}

func apiError(status int, body []byte) *hermesAPIError {
	var b struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	e := &hermesAPIError{status: status}
	if json.Unmarshal(body, &b) == nil && b.Error.Message != "" {
		e.message, e.code = b.Error.Message, b.Error.Code
	} else {
		e.message = truncate(strings.TrimSpace(string(body)), 200)
	}
	return e
}

func isStatus(err error, codes ...int) bool {
	var ae *hermesAPIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, c := range codes {
		if ae.status == c {
			return true
		}
	}
	return false
}

// call makes a request other than the event stream and decodes its JSON
// answer into out (when not nil).
func (h *Hermes) call(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return err
	}
	h.headers(req)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("Hermes answered %s %s with something that is not the expected JSON: %v", method, path, err)
		}
	}
	return nil
}

// start starts a run, retrying while Hermes is busy or briefly away.
func (h *Hermes) start(ctx context.Context, body runRequest) (string, error) {
	wait := h.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		var out struct {
			RunID string `json:"run_id"`
		}
		err := h.call(ctx, http.MethodPost, "/v1/runs", body, &out)
		if err == nil {
			if out.RunID == "" {
				return "", errors.New("Hermes accepted the run but sent no run id")
			}
			return out.RunID, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !retryable(err) || attempt >= h.cfg.MaxRetries {
			return "", h.describe(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		}
		wait *= 2
	}
}

// retryable says whether starting a run may be tried again: Hermes was busy
// or unavailable, or the connection was refused (so no run was made).
func retryable(err error) bool {
	if isStatus(err, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// status polls a run.
func (h *Hermes) status(ctx context.Context, runID string) (hermesStatus, error) {
	var st hermesStatus
	err := h.call(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), nil, &st)
	return st, err
}

// stop asks Hermes to stop a run (it waits up to 5 s for the agent). It
// runs after the turn's context ended, so it has its own deadline.
func (h *Hermes) stop(runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A 404 means the run had already ended: nothing to stop.
	h.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/stop", nil, nil)
}

// describe turns a failed request into a sentence a person can act on.
func (h *Hermes) describe(err error) error {
	var ae *hermesAPIError
	if errors.As(err, &ae) {
		switch ae.status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("Hermes refused irisgate's API key (HTTP %d: %s): set --hermes-key (or IRISGATE_HERMES_KEY) to the API_SERVER_KEY of Hermes's API server", ae.status, orText(ae.message, "unauthorized"))
		case http.StatusTooManyRequests:
			return fmt.Errorf("Hermes is busy: it runs at most 10 runs at once and all are taken (HTTP 429: %s). Send your message again once one has finished", orText(ae.message, "too many runs"))
		case http.StatusNotFound:
			return fmt.Errorf("%s has no Hermes run endpoints (HTTP 404: %s): is it Hermes Agent's API server, and a version with /v1/runs?", h.base, orText(ae.message, "not found"))
		}
		return fmt.Errorf("Hermes answered HTTP %d: %s", ae.status, orText(ae.message, http.StatusText(ae.status)))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Hermes at %s did not answer within %v", h.base, h.cfg.RequestTimeout)
	}
	return fmt.Errorf("cannot reach Hermes at %s (%v): is it running, with its API server enabled (API_SERVER_ENABLED=true)?", h.base, unwrapURL(err))
}

func orText(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}

// unwrapURL drops the "Post http://…:" wrapping of a transport error.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// --- Server-sent events ---

// sseItem is one thing read from an event stream: an event's data, a
// comment, or the end of the stream (err, io.EOF when it closed cleanly).
type sseItem struct {
	data    string
	comment bool
	err     error
}

// maxSSELine bounds one line of the stream.
const maxSSELine = 16 << 20

// readSSE parses a stream of server-sent events into items until it ends
// or done closes. Lines may arrive split across any number of reads; an
// event is dispatched at its blank line, so one cut short is dropped.
func readSSE(r io.Reader, out chan<- sseItem, done <-chan struct{}) {
	defer close(out)
	send := func(it sseItem) bool {
		select {
		case out <- it:
			return true
		case <-done:
			return false
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var data []string
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxSSELine {
				send(sseItem{err: errors.New("an event stream line is too long")})
				return
			}
			continue
		}
		if err != nil {
			send(sseItem{err: err})
			return
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
		line = line[:0]
		switch {
		case s == "":
			if data != nil {
				if !send(sseItem{data: strings.Join(data, "\n")}) {
					return
				}
				data = nil
			}
		case s[0] == ':':
			if !send(sseItem{comment: true, data: strings.TrimSpace(s[1:])}) {
				return
			}
		default:
			field, value, _ := strings.Cut(s, ":")
			if field == "data" {
				data = append(data, strings.TrimPrefix(value, " "))
			}
			// event:, id: and retry: are not used: Hermes names the event
			// inside its JSON.
		}
	}
}

// HermesToolEmoji is the emoji shown for one of Hermes's tools ("" when
// the tool is not known).
func HermesToolEmoji(name string) string {
	if e, ok := hermesEmoji[name]; ok {
		return e
	}
	switch {
	case strings.HasPrefix(name, "browser_"):
		return "🌐"
	case strings.HasPrefix(name, "mcp_"):
		return "🔌"
	case strings.HasPrefix(name, "ha_"):
		return "🏠"
	case strings.HasPrefix(name, "skill"):
		return "📚"
	}
	return ""
}

var hermesEmoji = map[string]string{
	"terminal":          "💻",
	"process":           "⚙️",
	"execute_code":      "🐍",
	"read_file":         "📖",
	"write_file":        "✍️",
	"patch":             "🩹",
	"search_files":      "🔍",
	"web_search":        "🔎",
	"web_extract":       "🌐",
	"web_crawl":         "🕸️",
	"vision_analyze":    "👁️",
	"image_generate":    "🎨",
	"text_to_speech":    "🔊",
	"memory":            "🧠",
	"session_search":    "🗂️",
	"todo":              "📋",
	"clarify":           "❓",
	"delegate_task":     "🤝",
	"mixture_of_agents": "🧩",
	"send_message":      "📨",
	"cronjob":           "⏰",
}
