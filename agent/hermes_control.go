package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// steerNote marks a steer Hermes took mid-run in the lane's conversation.
const steerNote = "[Added while you were working:] "

// steer hands a note the person sent mid-run to Hermes
// (POST /v1/runs/{id}/steer: the agent reads it after its current step).
// Where Hermes refuses it (an older Hermes without the route, a run waiting
// for an approval or stopping) the note is kept for the next run instead.
func (r *hermesRun) steer(ctx context.Context, s Steer) {
	why := "its API server cannot take new instructions in the middle of a run"
	if !r.h.noSteer.Load() {
		var out struct {
			Accepted bool `json:"accepted"`
		}
		err := r.h.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(r.id)+"/steer", map[string]string{"input": s.Text}, &out)
		switch {
		case err == nil && out.Accepted:
			r.record(Msg{Role: hermesSteeredRole, Content: s.Text, MessageID: s.MessageID})
			r.emit(Event{Kind: Commentary, Text: "📝 Hermes got your note: it reads it after the step it is on."})
			return
		case ctx.Err() != nil:
			return
		case err == nil:
			why = "Hermes did not accept it"
		case isCode(err, "run_not_accepting_steer"):
			why = "the run cannot take it right now (it may be waiting for an approval, or stopping)"
		case isStatus(err, http.StatusNotFound) && !isCode(err, "run_not_found"):
			r.h.noSteer.Store(true) // an API server without the route
		default:
			why = "Hermes refused it: " + r.h.describe(err).Error()
		}
	}
	r.record(Msg{Role: hermesSteerRole, Content: s.Text, MessageID: s.MessageID})
	r.emit(Event{Kind: Commentary, Text: "📝 Hermes can't take your note now (" + why + "), so it will go in front of your next message."})
}

// keepPendingSteer keeps for the next run the steer text a run ended
// without reading (Hermes reports it as pending_steer).
func (r *hermesRun) keepPendingSteer(text string) {
	if text == "" {
		return
	}
	r.record(Msg{Role: hermesSteerRole, Content: text})
	r.emit(Event{Kind: Commentary, Text: "📝 Hermes finished before it read your note, so it will go in front of your next message."})
}

// stopRun asks Hermes to stop a run and checks that it did. It runs after
// the turn's context ended, so it has its own deadline. It returns what the
// person should know ("" when the run stopped as asked).
func (h *Hermes) stopRun(runID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.RequestTimeout+h.cfg.StopWait)
	defer cancel()
	path := "/v1/runs/" + url.PathEscape(runID)
	var answer hermesStatus // {"run_id","status":"stopping"}, or a terminal run's status
	err := h.call(ctx, http.MethodPost, path+"/stop", nil, &answer)
	if err == nil && terminalStatus(answer.Status) {
		return endedBeforeStop(answer.Status)
	}
	refused := ""
	if err != nil {
		refused = h.describeStopRefusal(err)
	}
	// Whatever the answer, the run's status says what really happened.
	deadline := time.Now().Add(h.cfg.StopWait)
	for {
		st, serr := h.status(ctx, runID)
		switch {
		case serr == nil && terminalStatus(st.Status):
			if st.Status == "cancelled" {
				return ""
			}
			return endedBeforeStop(st.Status)
		case serr != nil && isStatus(serr, http.StatusNotFound):
			if refused != "" {
				return "⚠️ " + refused + ", and it no longer knows the run at all: whether it still works on it there cannot be told from here."
			}
			return ""
		case serr != nil && refused != "":
			return "⚠️ " + refused + ", and its status could not be read (" + h.describe(serr).Error() + "): the run may still be going on there."
		case refused != "":
			return fmt.Sprintf("⚠️ %s, and the run is still %s there: it goes on until it finishes. To end it now, stop it on the Hermes machine.", refused, st.Status)
		}
		if time.Now().After(deadline) {
			status := "unknown"
			if serr == nil {
				status = st.Status
			}
			return fmt.Sprintf("⚠️ Hermes has not stopped the run yet (its status is %s after %v): the step it is on may still finish.", status, h.cfg.StopWait)
		}
		t := time.NewTimer(h.cfg.PollEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "⚠️ Could not confirm with Hermes that the run stopped: it may still be going on there."
		}
	}
}

func endedBeforeStop(status string) string {
	if status == "cancelled" {
		return ""
	}
	return fmt.Sprintf("The run had already ended on Hermes (%s) when the stop arrived.", status)
}

// describeStopRefusal says why Hermes did not take a stop.
func (h *Hermes) describeStopRefusal(err error) string {
	switch {
	case isCode(err, "run_not_active"):
		return "Hermes did not stop the run: it answered that the run is not active in its process (HTTP 409 run_not_active; another Hermes gateway process may hold it)"
	case isStatus(err, http.StatusNotFound):
		return "Hermes did not stop the run: its API server answered 404, having already dropped the run's controls (older Hermes does so about 5 minutes into a run, even while it streams)"
	}
	return "Hermes did not take the stop (" + h.describe(err).Error() + ")"
}
