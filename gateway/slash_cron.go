package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/store"
)

const cronUsage = "usage: /cron [list] | /cron add SCHEDULE | PROMPT | /cron pause|resume|rm|run ID"

// cmdCron manages scheduled jobs from the chat; new jobs post into the
// lane they were made in.
func cmdCron(ctx context.Context, g *Gateway, _ Caller, lk core.Lane, args string) error {
	verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	rest = strings.TrimSpace(rest)
	now := time.Now()
	switch verb {
	case "", "list":
		jobs, err := g.st.CronJobs(ctx)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			g.systemMessage(ctx, lk, "No cron jobs. "+cronUsage)
			return nil
		}
		lines := make([]string, len(jobs))
		for i, j := range jobs {
			lines[i] = cron.Line(j)
		}
		g.systemMessage(ctx, lk, strings.Join(lines, "\n"))
		return nil
	case "add":
		schedule, prompt, ok := strings.Cut(rest, "|")
		if !ok || strings.TrimSpace(prompt) == "" {
			return core.Errorf(core.CodeUnsupported, "%s", cronUsage)
		}
		j, err := cron.Add(ctx, g.st, store.CronJob{Schedule: strings.TrimSpace(schedule), Prompt: strings.TrimSpace(prompt), ChatID: lk.ChatID, ThreadID: lk.ThreadID}, now)
		if err != nil {
			return err
		}
		g.systemMessage(ctx, lk, fmt.Sprintf("⏰ Added %s (%s), next run %s.", j.ID, j.Name, cron.When(j.NextRun)))
		return nil
	case cron.ActPause, cron.ActResume, cron.ActRemove, cron.ActRun:
		if rest == "" {
			return core.Errorf(core.CodeUnsupported, "%s", cronUsage)
		}
		j, err := cron.Act(ctx, g.st, verb, rest, now)
		if err != nil {
			return err
		}
		g.systemMessage(ctx, lk, fmt.Sprintf("Cron job %s: %s done.", j.ID, verb))
		return nil
	}
	return core.Errorf(core.CodeUnsupported, "%s", cronUsage)
}
