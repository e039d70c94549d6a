package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
)

// hermesRun follows one run and turns what it reports into events. Its
// loop (stream, then poll) is the only goroutine that emits; an approval
// asked of the person waits in a goroutine of its own, so the loop keeps
// reading what Hermes does meanwhile.
type hermesRun struct {
	h      *Hermes
	id     string
	t      Turn
	emit   func(Event)
	record func(Msg)

	seg       string // reply text since the last commentary beat
	reasoning bool   // a reasoning preview was shown
	// held is a reasoning preview that came before any reply text: whether
	// it is the reply itself shows only at the next boundary.
	held  string
	tools []*core.Tool // started, not yet ended, oldest first
	toolN int
	lost  bool // the live stream is gone: following by polling

	ap       *hermesApproval // the approval shown now, unanswered
	answered map[string]bool // request ids already answered
	fifo     bareQueue       // approvals without request ids, as Hermes queues them
	blind    bool            // a waiting status with no request known was answered
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
	// The tools that were running may well have finished: they stay
	// running until the run's outcome says how it went.
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
	check := time.NewTicker(h.cfg.PollEvery) // an open approval's status
	defer check.Stop()
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
				if out := r.handle(ctx, it.data); out != nil {
					return out, nil
				}
			}
			resetTimer(stall, h.cfg.StallTimeout)
		case s := <-r.t.Steer:
			r.steer(ctx, s)
		case res := <-r.approvalAnswers():
			r.onAnswer(ctx, res)
		case <-check.C:
			r.checkApproval(ctx)
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
		r.reasoningPreview(ev.Text)
	case "tool.started":
		r.placeHeld("")
		// What Hermes wrote before a tool was Hermes thinking aloud, not its
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
		r.toolEnded(index)
	case "approval.request":
		r.ask(ctx, ev)
	case "approval.responded":
		r.respondedElsewhere(ev)
	case "run.completed":
		return &outcome{status: "completed", output: ev.Output, usage: ev.Usage, pendingSteer: ev.PendingSteer}
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

// hermesPreviewMax is how much of a message's content Hermes puts in
// reasoning.available (_think_text[:500] in run_agent.py).
const hermesPreviewMax = 500

// reasoningPreview places a reasoning.available event. Hermes fills it with
// the assistant message's content (reasoning tags stripped, cut to 500
// characters), so it mostly repeats the reply that streamed as deltas: only
// what is not the reply is shown, as reasoning.
func (r *hermesRun) reasoningPreview(text string) {
	p := strings.TrimSpace(text)
	if p == "" {
		return
	}
	if strings.TrimSpace(r.seg) == "" {
		if r.held != "" {
			r.showReasoning(r.held)
		}
		r.held = p // the reply may still come (or never stream)
		return
	}
	if think := withoutReply(p, strings.TrimSpace(r.seg)); think != "" {
		r.showReasoning(think)
	}
}

// placeHeld settles a held preview against the reply text that followed
// it ("" when none did).
func (r *hermesRun) placeHeld(reply string) {
	if r.held == "" {
		return
	}
	p := r.held
	r.held = ""
	if think := withoutReply(p, strings.TrimSpace(reply)); think != "" {
		r.showReasoning(think)
	}
}

func (r *hermesRun) showReasoning(s string) {
	if utf8.RuneCountInString(s) >= hermesPreviewMax {
		s += "…" // Hermes cut it there
	}
	if r.reasoning {
		s = "\n\n" + s
	}
	r.reasoning = true
	r.emit(Event{Kind: Reasoning, Text: s})
}

// withoutReply is what a preview p says besides the reply text s: nothing
// when p is s (or s cut short), the rest when s is inside p (an inline
// <think> section Hermes stripped the tags of), or the part before the
// start of s that p ends with (p cut at 500 characters).
func withoutReply(p, s string) string {
	if s == "" {
		return p
	}
	if strings.HasPrefix(s, p) {
		return ""
	}
	if i := strings.Index(p, s); i >= 0 {
		return strings.TrimSpace(p[:i] + p[i+len(s):])
	}
	for i := 0; i < len(p); i++ {
		if utf8.RuneStart(p[i]) && len(p)-i >= min(len(s), 16) && strings.HasPrefix(s, p[i:]) {
			return strings.TrimSpace(p[:i])
		}
	}
	return p
}

// closeTools ends the tools still open when the run failed or was
// stopped (why). While the stream was live their ends would have come:
// they did not finish (ok false, why). Once it was lost, any may have
// finished meanwhile, well or not.
func (r *hermesRun) closeTools(why string) {
	if r.lost {
		r.unseenTools(lostNote)
		return
	}
	for _, tl := range r.tools {
		r.emit(Event{Kind: ToolEnd, Tool: &core.Tool{Index: tl.Index, Name: tl.Name, Output: why}})
	}
	r.tools = nil
}

// unseenTools ends the open tools whose end irisgate did not see, saying
// why. tool.end has no "unknown", only ok, and ok false shows a failure
// nobody reported (inviting a command that did run to be run again): ok
// stays true, meaning no failure was reported, and output_preview says
// the result was not seen.
func (r *hermesRun) unseenTools(why string) {
	for _, tl := range r.tools {
		r.emit(Event{Kind: ToolEnd, Tool: &core.Tool{Index: tl.Index, Name: tl.Name, OK: true, Output: "result not seen (" + why + ")"}})
	}
	r.tools = nil
}

const lostNote = "the live stream from Hermes broke off while it ran"

// finish delivers the final answer: Hermes's output is authoritative over
// the deltas that streamed (some may have been lost).
func (r *hermesRun) finish(output string, usage *hermesUsage) {
	// Tools still open ended with the run, but how is not known.
	if r.lost {
		r.unseenTools(lostNote)
	} else {
		r.unseenTools("Hermes did not report its end") // the legacy sweeper drops tool events
	}
	r.placeHeld(orText(r.seg, output))
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
