package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// poll follows a run whose stream was lost until it ends.
func (r *hermesRun) poll(ctx context.Context) (*outcome, error) {
	const maxFailures = 5
	failures := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case s := <-r.t.Steer:
			r.steer(ctx, s)
			continue
		case res := <-r.approvalAnswers():
			r.onAnswer(ctx, res)
			continue
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		st, err := r.h.status(ctx, r.id)
		switch {
		case err == nil:
			failures = 0
			if out := r.polled(ctx, st); out != nil {
				return out, nil
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

// polled applies one status; it returns the outcome once the run ended.
func (r *hermesRun) polled(ctx context.Context, st hermesStatus) *outcome {
	switch st.Status {
	case "completed":
		return &outcome{status: "completed", output: st.Output, usage: st.Usage, pendingSteer: st.PendingSteer}
	case "failed":
		return &outcome{status: "failed", err: st.Error}
	case "cancelled":
		return &outcome{status: "cancelled"}
	case "interrupted":
		return &outcome{status: "interrupted", err: st.Error}
	case "waiting_for_approval":
		switch {
		case r.ap != nil: // shown already; it stays until answered or Hermes moves on
		case st.Approval != nil && st.Approval.RequestID != "" && st.Approval.Command != "":
			// A newer Hermes says what it waits for: the person is asked.
			r.ask(ctx, *st.Approval)
		case !r.blind:
			r.blind = true
			r.answerBlind(ctx)
		}
	default:
		r.blind = false
		if r.ap != nil {
			r.expire("its status is now " + st.Status)
		}
	}
	return nil
}

// answerBlind answers an approval whose request was in the lost stream of
// a Hermes that does not say in its status what it waits for: its command
// is unknown, so it is denied (allowed under /yolo). A 409 means it was no
// longer pending (Hermes keeps saying waiting_for_approval after its own
// approval timeout denied one): nothing to say then.
func (r *hermesRun) answerBlind(ctx context.Context) {
	choice := "deny"
	if r.t.Settings.Yolo {
		choice = "once"
	}
	err := r.h.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(r.id)+"/approval", map[string]string{"choice": choice}, nil)
	switch {
	case err != nil:
		return
	case r.t.Settings.Yolo:
		r.emit(Event{Kind: Commentary, Text: "⚠️ Hermes asked for an approval while its live stream was down; YOLO is on, so it was allowed (the command is not known here)."})
	default:
		r.emit(Event{Kind: Commentary, Text: "⛔ Hermes asked to approve a command while its live stream was down, so what it wanted to run never reached irisgate: it was denied. Ask again if it should run."})
	}
}
