package gateway

import (
	"context"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/store"
)

// agentCron is the agent's cronjob tool's view of the jobs: the same
// operations as /cron and irisgate cron (package cron over the store),
// in the agent's own types, since the agent never reaches the store.
type agentCron struct{ g *Gateway }

var _ agent.Cron = agentCron{}

func (c agentCron) Add(ctx context.Context, j agent.CronJob) (agent.CronJob, error) {
	sj, err := cron.Add(ctx, c.g.st, store.CronJob{Name: j.Name, Schedule: j.Schedule, Prompt: j.Prompt, Text: j.Text,
		ChatID: j.Lane.ChatID, ThreadID: j.Lane.ThreadID}, time.Now())
	if err != nil {
		return j, err
	}
	return agentJob(sj), nil
}

func (c agentCron) List(ctx context.Context) ([]agent.CronJob, error) {
	jobs, err := c.g.st.CronJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]agent.CronJob, len(jobs))
	for i, j := range jobs {
		out[i] = agentJob(j)
	}
	return out, nil
}

func (c agentCron) Act(ctx context.Context, action, id string) (agent.CronJob, error) {
	j, err := cron.Act(ctx, c.g.st, action, id, time.Now())
	if err != nil {
		return agent.CronJob{}, err
	}
	return agentJob(j), nil
}

func agentJob(j store.CronJob) agent.CronJob {
	return agent.CronJob{ID: j.ID, Name: j.Name, Schedule: j.Schedule, Prompt: j.Prompt, Text: j.Text,
		Lane: core.Lane{ChatID: j.ChatID, ThreadID: j.ThreadID}, Enabled: j.Enabled, NextRun: j.NextRun, Line: cron.Line(j)}
}
