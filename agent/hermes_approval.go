package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
)

// ApprovalQuestion is an approval asked of the person.
type ApprovalQuestion struct {
	Command, Description string
	// Choices are the answers the backend accepts (once, session, always,
	// deny); empty means all four.
	Choices []string
}

// ApprovalAnswer is the person's answer to an approval, before it takes
// effect.
type ApprovalAnswer struct {
	Choice string // once | session | always | deny
	// By says who answered, for the chat: a device's name.
	By string
	// TimedOut says nobody answered in time (Choice is deny).
	TimedOut bool
	// Done reports what became of the answer: whether the backend took it,
	// and the sentence saying so, which the asker posts as the answer's
	// reply. It is called once; nil when nothing is owed.
	Done func(applied bool, text string)
}

// DeferredAsker is an Asker whose approvals take effect only once the
// backend confirms them: the Hermes bridge must first hear from Hermes that
// the approval still waits, so the chat never says "Allowed" for a command
// Hermes had already denied. Closing ctx withdraws the question (its picker
// closes unanswered).
type DeferredAsker interface {
	AskApproval(ctx context.Context, q ApprovalQuestion) (ApprovalAnswer, error)
}

// hermesApproval is an approval.request shown to the person.
type hermesApproval struct {
	requestID   string // Hermes's request_id; "" from an older Hermes
	command     string
	description string
	choices     []string
	tools       []int   // the tools running when it was asked: one of them asked
	asked       float64 // the event's timestamp, Hermes's clock
	cancel      context.CancelFunc
	answers     chan approvalResult // cap 1: the asking goroutine's result
}

type approvalResult struct {
	ans   ApprovalAnswer
	err   error
	plain bool // a plain Asker: it has said what the choice did itself
}

var hermesChoices = []string{"once", "session", "always", "deny"}

// offered keeps the choices Hermes lists that irisgate knows.
func offered(cs []string) []string {
	var out []string
	for _, c := range cs {
		if slices.Contains(hermesChoices, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return hermesChoices
	}
	return out
}

// approvalAnswers is the channel the shown approval's answer arrives on
// (nil, never ready, when none is shown).
func (r *hermesRun) approvalAnswers() <-chan approvalResult {
	if r.ap == nil {
		return nil
	}
	return r.ap.answers
}

// ask shows an approval request to the person. The question waits in its
// own goroutine: the run's loop goes on reading what Hermes does, and
// withdraws the question when Hermes moves on without it.
func (r *hermesRun) ask(ctx context.Context, ev hermesEvent) {
	if ev.RequestID != "" && (r.answered[ev.RequestID] || r.ap != nil && r.ap.requestID == ev.RequestID) {
		return // answered, or shown: a status repeating it
	}
	if r.ap != nil {
		r.expire(fmt.Sprintf("Hermes asked about another command meanwhile, `%s`", ev.Command))
	}
	a := &hermesApproval{requestID: ev.RequestID, command: ev.Command, description: orText(ev.Description, "Hermes asks before running this command."), choices: offered(ev.Choices), asked: ev.Timestamp}
	for _, tl := range r.tools {
		a.tools = append(a.tools, tl.Index)
	}
	if a.requestID == "" {
		r.fifo.asked(a)
	}
	switch {
	case r.t.Settings.Yolo:
		r.send(ctx, a, ApprovalAnswer{Choice: "once", By: "YOLO"})
		return
	case r.t.Asker == nil:
		r.send(ctx, a, ApprovalAnswer{Choice: "deny", By: "irisgate: nobody can be asked here"})
		return
	}
	actx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	a.answers = make(chan approvalResult, 1)
	asker := r.t.Asker
	q := ApprovalQuestion{Command: a.command, Description: a.description, Choices: a.choices}
	go func() {
		var res approvalResult
		if d, ok := asker.(DeferredAsker); ok {
			res.ans, res.err = d.AskApproval(actx, q)
		} else {
			res.plain = true
			res.ans.Choice, res.err = asker.Approve(actx, q.Command, q.Description)
		}
		a.answers <- res
	}()
	r.ap = a
}

// onAnswer gives Hermes the person's answer to the approval shown.
func (r *hermesRun) onAnswer(ctx context.Context, res approvalResult) {
	a := r.ap
	r.ap = nil
	a.cancel()
	if ctx.Err() != nil {
		if res.err == nil {
			r.say(res.ans, res.plain, false, stoppedBefore(a.command))
		}
		return
	}
	ans := res.ans
	if res.err != nil {
		ans = ApprovalAnswer{Choice: "deny", By: "irisgate: asking failed (" + res.err.Error() + ")"}
	}
	if !slices.Contains(a.choices, ans.Choice) {
		ans.Choice = "deny"
	}
	r.sendAnswer(ctx, a, ans, res.plain)
}

func (r *hermesRun) send(ctx context.Context, a *hermesApproval, ans ApprovalAnswer) {
	r.sendAnswer(ctx, a, ans, false)
}

// sendAnswer posts an answer, naming the request when Hermes named it.
// Without a request id Hermes resolves its oldest pending approval,
// whichever that is: the answer goes only when Hermes's status shows it
// still waits for this one, and, while an older request may still be
// pending too, only as a denial of them all (see bareQueue).
func (r *hermesRun) sendAnswer(ctx context.Context, a *hermesApproval, ans ApprovalAnswer, plain bool) {
	body := map[string]any{"choice": ans.Choice}
	if a.requestID == "" {
		waiting := r.stillWaiting(ctx, a)
		switch {
		case ctx.Err() != nil:
			r.say(ans, plain, false, stoppedBefore(a.command))
			return
		case !waiting:
			r.say(ans, plain, false, tooLate(ans, a.command))
			return
		}
		if older := r.fifo.olderThan(a); older > 0 {
			if ans.Choice != "deny" && !r.t.Settings.Yolo {
				r.say(ans, plain, false, notApplied(ans, a.command, older))
				return
			}
			// A denial (or YOLO's "once") holds for every command
			// waiting: Hermes applies it to all of them.
			body["all"] = true
		}
	}
	if a.requestID != "" {
		body["request_id"] = a.requestID
		if r.answered == nil {
			r.answered = map[string]bool{}
		}
		r.answered[a.requestID] = true
	}
	var out struct {
		Resolved int `json:"resolved"`
	}
	err := r.h.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(r.id)+"/approval", body, &out)
	switch {
	case err == nil:
		if a.requestID == "" {
			r.fifo.answered(a, out.Resolved)
		}
		r.say(ans, plain, true, approved(ans, a.command))
	case ctx.Err() != nil:
		r.say(ans, plain, false, stoppedBefore(a.command))
	case isStatus(err, http.StatusConflict):
		r.say(ans, plain, false, tooLate(ans, a.command))
	default:
		r.say(ans, plain, false, fmt.Sprintf("⚠️ Could not give Hermes the answer for `%s`: %v. It denies the command when its own approval timeout runs out.", a.command, r.h.describe(err)))
	}
}

// stoppedBefore is what an answer is told when the run stopped first.
func stoppedBefore(command string) string {
	return "⏹ Not applied: the run was stopped before your answer reached Hermes, so nothing was approved for `" + command + "`."
}

// notApplied is what an approval is told that a Hermes without request
// ids would have applied to an older command.
func notApplied(ans ApprovalAnswer, command string, older int) string {
	return fmt.Sprintf("⚠️ Not applied: this Hermes (a version that puts no id on its approvals) still has %s before `%s` and would have applied the approval%s to the oldest, not to this one, so nothing was approved. Its own approval timeout denies them; ask again when the agent retries.",
		plural(older, "an older approval waiting", "older approvals waiting"), command, by(ans))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// stillWaiting checks, for an approval without a request id, that Hermes
// still waits on an approval and nothing happened since it asked: Hermes
// stamps the status when it asks (updated_at, within moments of the
// event's timestamp) and at every tool event after, so a status stamped
// later, or with another last event, belongs to something newer.
func (r *hermesRun) stillWaiting(ctx context.Context, a *hermesApproval) bool {
	st, err := r.h.status(ctx, r.id)
	if err != nil || st.Status != "waiting_for_approval" || st.LastEvent != "approval.request" {
		return false
	}
	if a.asked > 0 && st.UpdatedAt > 0 && (st.UpdatedAt-a.asked > 0.5 || a.asked-st.UpdatedAt > 0.5) {
		return false
	}
	return st.Approval == nil || st.Approval.Command == a.command
}

// say tells the person what became of an answer: through the asker (the
// reply to the choice), or as commentary. A plain Asker has already said
// what the choice did; only a failure is added.
func (r *hermesRun) say(ans ApprovalAnswer, plain, applied bool, text string) {
	switch {
	case ans.Done != nil:
		ans.Done(applied, text)
	case plain && applied:
	default:
		r.emit(Event{Kind: Commentary, Text: text})
	}
}

func by(ans ApprovalAnswer) string {
	if ans.By == "" {
		return ""
	}
	return " (by " + ans.By + ")"
}

func approved(ans ApprovalAnswer, command string) string {
	switch {
	case ans.TimedOut:
		return "⏱ No answer in time: denied `" + command + "`."
	case ans.Choice == "once":
		return "✅ Allowed once: `" + command + "`" + by(ans)
	case ans.Choice == "session":
		return "✅ Allowed for this session: `" + command + "`" + by(ans)
	case ans.Choice == "always":
		return "✅ Always allowed: `" + command + "`" + by(ans)
	}
	return "⛔ Denied: `" + command + "`" + by(ans)
}

func tooLate(ans ApprovalAnswer, command string) string {
	if ans.Choice == "deny" {
		return "⏱ `" + command + "` was not run: Hermes had already stopped waiting for an answer (its own approval timeout denies it)."
	}
	return "⏱ Too late for `" + command + "`: Hermes had already stopped waiting for an answer (its own approval timeout denies it), so the approval" + by(ans) + " was not applied and the command did not run."
}

// expire withdraws the approval shown: Hermes moved on without it. An
// answer that crossed the withdrawal is told it came too late.
func (r *hermesRun) expire(why string) {
	a := r.ap
	if a == nil {
		return
	}
	r.ap = nil
	a.cancel()
	res := <-a.answers // the asker gives up at once: its picker closes unanswered
	if res.err == nil && res.ans.Choice != "" {
		r.say(res.ans, false, false, tooLate(res.ans, a.command))
		return
	}
	r.emit(Event{Kind: Commentary, Text: fmt.Sprintf("⏱ Hermes no longer waits for an answer about `%s` (%s): the prompt was closed and nothing was approved.", a.command, why)})
}

// dropApproval withdraws an approval still shown when the run ends.
func (r *hermesRun) dropApproval(why string) { r.expire(why) }

// respondedElsewhere handles approval.responded for an approval irisgate
// did not answer: another Hermes client did.
func (r *hermesRun) respondedElsewhere(ev hermesEvent) {
	if ev.RequestID == "" && !r.fifo.responded(ev.Resolved) {
		return // the echo of irisgate's own answer
	}
	if r.ap == nil || ev.RequestID != "" && r.ap.requestID != "" && ev.RequestID != r.ap.requestID {
		return
	}
	r.expire("it was answered from another Hermes client: " + orText(ev.Choice, "an answer"))
}

// toolEnded withdraws the approval shown once every tool that was running
// when it was asked has finished: the one that asked got its answer from
// Hermes's own approval timeout.
func (r *hermesRun) toolEnded(int) {
	r.fifo.toolsRunning(r.tools)
	if r.ap == nil || len(r.ap.tools) == 0 {
		return
	}
	for _, tl := range r.tools {
		if slices.Contains(r.ap.tools, tl.Index) {
			return
		}
	}
	r.expire("the tool that asked has finished: Hermes's own approval timeout denied the command")
}

// checkApproval looks at Hermes's status while an approval is shown: one no
// longer waiting_for_approval means Hermes moved on (an answer from
// elsewhere whose event was lost, a stop, the end).
func (r *hermesRun) checkApproval(ctx context.Context) {
	if r.ap == nil {
		return
	}
	st, err := r.h.status(ctx, r.id)
	if err != nil || st.Status == "waiting_for_approval" {
		return
	}
	r.expire("its status is now " + st.Status)
}
