package slash

import (
	"context"
	"fmt"
	"strings"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/cron"
)

// cmdCron manages scheduled jobs from the chat, through the operations
// the agent's cronjob tool has; new jobs post into the lane they were
// made in.
func cmdCron(ctx context.Context, env Env, c Call) error {
	lk := c.Lane
	verb, rest, _ := strings.Cut(strings.TrimSpace(c.Args), " ")
	rest = strings.TrimSpace(rest)
	switch verb {
	case "", "list":
		jobs, err := env.Cron().List(ctx)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			env.SystemMessage(ctx, lk, "No cron jobs. "+ErrCronUsage.Format)
			return nil
		}
		lines := make([]string, len(jobs))
		for i, j := range jobs {
			lines[i] = j.Line
		}
		env.SystemMessage(ctx, lk, strings.Join(lines, "\n"))
		return nil
	case "add":
		schedule, prompt, ok := strings.Cut(rest, "|")
		if !ok || strings.TrimSpace(prompt) == "" {
			return ErrCronUsage.New()
		}
		j, err := env.Cron().Add(ctx, agent.CronJob{Schedule: strings.TrimSpace(schedule), Prompt: strings.TrimSpace(prompt), Lane: lk})
		if err != nil {
			return err
		}
		env.SystemMessage(ctx, lk, fmt.Sprintf("⏰ Added %s (%s), next run %s.", j.ID, j.Name, cron.When(j.NextRun)))
		return nil
	case cron.ActPause, cron.ActResume, cron.ActRemove, cron.ActRun:
		if rest == "" {
			return ErrCronUsage.New()
		}
		j, err := env.Cron().Act(ctx, verb, rest)
		if err != nil {
			return err
		}
		env.SystemMessage(ctx, lk, fmt.Sprintf("Cron job %s: %s done.", j.ID, verb))
		return nil
	}
	return ErrCronUsage.New()
}
