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
		var b strings.Builder
		for _, j := range jobs {
			state := "next " + j.NextRun.Local().Format("Jan 2 15:04")
			if !j.Enabled {
				state = "paused"
			}
			fmt.Fprintf(&b, "%s  %s  [%s]  %s\n", j.ID, j.Name, j.Schedule, state)
		}
		g.systemMessage(ctx, lk, strings.TrimSpace(b.String()))
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
		g.systemMessage(ctx, lk, fmt.Sprintf("⏰ Added %s (%s), next run %s.", j.ID, j.Name, j.NextRun.Local().Format("Jan 2 15:04")))
		return nil
	case "pause", "resume", "rm", "run":
		if rest == "" {
			return core.Errorf(core.CodeUnsupported, "%s", cronUsage)
		}
		j, err := g.st.CronJob(ctx, rest)
		if err != nil {
			return notFound(err, "no cron job "+quote(rest))
		}
		switch verb {
		case "rm":
			err = g.st.DeleteCronJob(ctx, j.ID)
		case "run":
			err = cron.RunNow(ctx, g.st, j.ID, now)
		case "pause":
			j.Enabled = false
			err = g.st.PutCronJob(ctx, j)
		case "resume":
			var next time.Time
			if next, _, err = cron.Next(j.Schedule, now); err == nil {
				j.Enabled, j.NextRun = true, next
				err = g.st.PutCronJob(ctx, j)
			}
		}
		if err != nil {
			return err
		}
		g.systemMessage(ctx, lk, fmt.Sprintf("Cron job %s: %s done.", j.ID, verb))
		return nil
	}
	return core.Errorf(core.CodeUnsupported, "%s", cronUsage)
}
