package turn

import (
	"context"
	"fmt"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// runTurn runs one agent turn; its recorder turns what the agent reports
// into events. It returns the steering the agent ended without taking:
// those messages run next, as turns of their own.
func (r *Runner) runTurn(ctx context.Context, l *lane, t *turn, p Pending) []Pending {
	rec := r.newRecorder(l, t)
	lk := l.key
	if p.Origin != nil {
		p.Origin.SendEvent(&core.Event{Type: core.EvReadReceipt, Lane: lk, MessageIDs: []string{p.Msg.ID}, TS: rec.start.UnixMilli()}, 0)
	}
	r.begun(p)
	if err := r.c.Commit(rec.fin, func(tx store.Tx) error { return tx.StartTurn(p.Msg.ID, rec.replyID) },
		&core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "processing"}); err != nil {
		r.log.Error("turn: agent.busy", "lane", lk.String(), "err", err)
		// Steering may already wait in the channel: no agent will take
		// it, so it runs next like any steering this turn did not take.
		next, _ := t.closeSteering()
		return next
	}
	settings, history, err := r.laneState(rec.fin, lk)
	if settings.Voice {
		rec.speech = r.newSpeech(ctx, lk, rec.replyID)
	}
	r.c.Publish(&core.Event{Type: core.EvTyping, Lane: lk, On: true})
	if err == nil {
		err = r.cfg.Agent.Run(ctx, agent.Turn{
			Lane: lk, Input: p.Msg.Text, InputID: p.Msg.ID, Media: r.host.WithPaths(p.Msg.Media), Steer: t.steer,
			Settings: r.AgentSettings(lk, settings), History: history, Record: rec.Record, Cwd: r.cfg.Workdir,
			Asker: laneAsker{r: r, lane: lk}, Todos: r.todos(l), Cron: r.cfg.Cron,
		}, rec.Emit)
	}
	stopped := ctx.Err() != nil
	next, forget := r.settleSteering(t, stopped)
	outcome := "ok"
	switch {
	case stopped:
		outcome = "stopped"
	case err != nil:
		outcome = "error"
	}
	r.cfg.Metrics.Turns.WithLabelValues(outcome).Inc()
	latency := time.Since(rec.start).Seconds()
	r.cfg.Metrics.TurnLatency.Observe(latency)

	if reply, ok := rec.finish(stopped || err != nil, latency, r.ShowReasoning(settings)); ok {
		r.host.Replied(lk, p.Msg, reply) // off the turn's path: it returns at once
	}
	if err != nil && !stopped {
		r.log.Warn("turn failed", "lane", lk.String(), "err", err)
		r.SystemMessage(rec.fin, lk, "The agent failed: "+err.Error())
	}
	r.c.Publish(&core.Event{Type: core.EvTyping, Lane: lk, On: false})
	r.endTurn(t, lk, p.Msg.ID, forget...)
	return next
}

// laneState reads what a turn of lk needs: its settings and its
// conversation. A lane whose state cannot be read does not run (the turn
// fails, and says why): the model would otherwise answer without the
// context the person sees.
func (r *Runner) laneState(ctx context.Context, lk core.Lane) (record.LaneSettings, []agent.Msg, error) {
	settings, err := r.st.LaneSettings(ctx, lk)
	var history []agent.Msg
	if err == nil {
		history, err = r.loadConversation(ctx, lk)
	}
	if err != nil {
		r.log.Error("turn: reading the lane's state", "lane", lk.String(), "err", err)
		err = fmt.Errorf("this lane's stored state cannot be read (%w); /new starts a fresh conversation", err)
	}
	return settings, history, err
}
