package turn

import (
	"context"
	"errors"
	"strings"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// ErrCronStopped is the outcome of a cron turn stopped before it answered
// (agent.stop, /stop, shutdown, its channel deleted): nothing was posted.
var ErrCronStopped = errors.New("stopped before it finished: nothing was posted")

// cronRun is what makes a pending turn a cron turn: the job whose prompt it
// runs, and whom to tell the outcome.
type cronRun struct {
	job  store.CronJob
	done func(error)
}

// EnqueueCron queues job j's prompt as a cron turn of lk, behind what runs
// and waits there, and owes it in the turn table; done gets its outcome
// when it ends. A run of j waiting in lk already (a frequent job behind a
// long turn) answers for this one too, as missed runs collapse into one.
// Shutting down, the turn's row stays and the next start runs the job.
func (r *Runner) EnqueueCron(ctx context.Context, lk core.Lane, j store.CronJob, done func(error)) error {
	if r.cronWaiting(lk, j.ID) {
		return nil
	}
	p := Pending{
		Msg:  core.Message{ID: store.CronTurnID(j.ID), Lane: lk, Text: j.Prompt},
		cron: &cronRun{job: j, done: done},
	}
	if err := r.c.Commit(ctx, func(tx store.Tx) error { return tx.QueueTurn(lk, p.Msg.ID) }, nil); err != nil {
		return err
	}
	if err := r.Enqueue(p); err != nil && !errors.Is(err, ErrShuttingDown) {
		return err
	}
	return nil
}

// cronWaiting reports whether a run of job waits in lane lk, not started.
func (r *Runner) cronWaiting(lk core.Lane, job string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.lanes[lk]; l != nil {
		for _, p := range l.pending {
			if p.cron != nil && p.cron.job.ID == job {
				return true
			}
		}
	}
	return false
}

// runCron runs a cron job's prompt as a turn of its lane. It shares a
// person's turn's lifecycle (the turn row, agent.busy and agent.idle, stop)
// but not its shape, which stays what cron output always was: nothing
// streams, the answer is posted whole as the job's cron message with its
// notification (nothing for [SILENT], or when stopped), no user message is
// stored, and the run neither reads nor extends the lane's conversation
// with the model. It takes no steering (its turn has no steer channel).
func (r *Runner) runCron(ctx context.Context, l *lane, t *turn, p Pending) {
	lk, j := l.key, p.cron.job
	// Final writes use their own context: a stopped turn still ends.
	fin := context.Background()
	if err := r.c.Commit(fin, func(tx store.Tx) error { return tx.StartTurn(p.Msg.ID, "") },
		&core.Event{Type: core.EvAgentBusy, Lane: lk, Reason: "cron"}); err != nil {
		r.log.Error("cron turn: agent.busy", "lane", lk.String(), "job", j.ID, "err", err)
		p.cron.done(err)
		return
	}
	var b strings.Builder
	err := r.cfg.Agent.Run(ctx, agent.Turn{
		Lane: lk, Input: j.Prompt, Cwd: r.cfg.Workdir, Asker: laneAsker{r: r, lane: lk}, Cron: r.cfg.Cron,
		Settings: r.AgentSettings(lk, r.Settings(fin, lk)),
	}, func(e agent.Event) {
		switch e.Kind {
		case agent.Text:
			b.WriteString(e.Text)
		case agent.TextIsCommentary, agent.TextIsReasoning:
			b.Reset()
		}
	})
	var outcome error
	switch {
	case ctx.Err() != nil:
		outcome = ErrCronStopped
	case err != nil:
		r.log.Warn("cron turn failed", "lane", lk.String(), "job", j.ID, "err", err)
		r.SystemMessage(fin, lk, "Cron job "+j.Name+" failed: "+err.Error())
		outcome = err
	default:
		outcome = r.host.PostCron(fin, lk, j, b.String())
	}
	// The output goes out before agent.idle, as a person's reply does.
	r.endTurn(t, lk, p.Msg.ID)
	p.cron.done(outcome)
}
