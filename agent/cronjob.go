package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/irisgate/irisgate/core"
)

// CronJob is a scheduled job as the cronjob tool sees it.
type CronJob struct {
	ID       string
	Name     string
	Schedule string
	Prompt   string
	Text     string
	Lane     core.Lane
	Enabled  bool
	NextRun  time.Time
	// Line describes the job in one line (schedule, target, state, next
	// run, last error), as /cron list does.
	Line string
}

// Cron manages the gateway's scheduled jobs for the cronjob tool. The
// gateway supplies it with each turn (Turn.Cron): jobs live in its store,
// which the agent does not reach.
type Cron interface {
	// Add validates and stores a job; an empty Lane.ChatID is the
	// default channel.
	Add(ctx context.Context, j CronJob) (CronJob, error)
	List(ctx context.Context) ([]CronJob, error)
	// Act carries out "pause", "resume", "remove" or "run" on a job and
	// returns it as it is after (as it was, for remove).
	Act(ctx context.Context, action, id string) (CronJob, error)
}

func cronjobTool() *Tool {
	return &Tool{
		Name:  "cronjob",
		Emoji: "⏰",
		Description: "Schedule work for later or on repeat. A job runs a prompt through you at its time and posts your answer " +
			"(answer exactly [SILENT] to post nothing), or posts a fixed text. New jobs post into this conversation unless " +
			"chat_id/thread_id name another channel. Schedules: a 5-field cron expression (\"0 9 * * 1-5\"), \"every 30m\", " +
			"a delay (\"45m\", \"2h\") or a local time (\"2026-12-01T09:00\"). Actions: add, list, pause, resume, remove, run (now).",
		Params: obj(map[string]any{
			"action":    map[string]any{"type": "string", "enum": []string{"add", "list", "pause", "resume", "remove", "run"}},
			"schedule":  prop("string", "When the job runs (add)."),
			"prompt":    prop("string", "What you will be asked when the job runs (add; or text)."),
			"text":      prop("string", "A fixed text to post instead of running a prompt (add)."),
			"name":      prop("string", "A short name for the job (add; optional)."),
			"chat_id":   prop("string", "Channel to post into (add; default: this conversation's)."),
			"thread_id": prop("string", "Thread inside that channel (add; optional)."),
			"id":        prop("string", "The job's id, cron_… (pause, resume, remove, run)."),
		}, "action"),
		Preview: func(a map[string]any) string {
			if s := str(a, "schedule"); s != "" {
				return str(a, "action") + " " + s
			}
			return strings.TrimSpace(str(a, "action") + " " + str(a, "id"))
		},
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, _ func(string)) (string, error) {
			if env.Cron == nil {
				return "", errors.New("scheduled jobs are not available here")
			}
			out, err := runCronjob(ctx, env, a)
			var ce *core.Error
			if errors.As(err, &ce) {
				err = errors.New(ce.Message) // the model needs the reason, not the protocol's code
			}
			return out, err
		},
	}
}

func runCronjob(ctx context.Context, env *ToolEnv, a map[string]any) (string, error) {
	action := strings.TrimSpace(str(a, "action"))
	switch action {
	case "add":
		j := CronJob{Name: strings.TrimSpace(str(a, "name")), Schedule: strings.TrimSpace(str(a, "schedule")),
			Prompt: strings.TrimSpace(str(a, "prompt")), Text: strings.TrimSpace(str(a, "text")), Lane: env.Lane}
		switch {
		case j.Schedule == "":
			return "", errors.New("add needs a schedule")
		case j.Prompt != "" && j.Text != "":
			return "", errors.New("give a prompt or a text, not both")
		case j.Prompt == "" && j.Text == "":
			return "", errors.New("add needs a prompt (run through you) or a text (posted as is)")
		}
		if chat := strings.TrimSpace(str(a, "chat_id")); chat != "" {
			j.Lane = core.Lane{ChatID: chat}
		}
		if th := strings.TrimSpace(str(a, "thread_id")); th != "" {
			j.Lane.ThreadID = th
		}
		j, err := env.Cron.Add(ctx, j)
		if err != nil {
			return "", err
		}
		here := ""
		if j.Lane == env.Lane {
			here = " (this conversation)"
		}
		return "Added " + j.Line + here, nil
	case "list":
		jobs, err := env.Cron.List(ctx)
		if err != nil {
			return "", err
		}
		if len(jobs) == 0 {
			return "No scheduled jobs.", nil
		}
		var b strings.Builder
		for _, j := range jobs {
			b.WriteString(j.Line)
			if j.Lane == env.Lane {
				b.WriteString("  (this conversation)")
			}
			b.WriteByte('\n')
		}
		return b.String(), nil
	case "pause", "resume", "remove", "run":
		id := strings.TrimSpace(str(a, "id"))
		if id == "" {
			return "", fmt.Errorf("%s needs the job's id (list shows them)", action)
		}
		j, err := env.Cron.Act(ctx, action, id)
		if err != nil {
			return "", err
		}
		switch action {
		case "pause":
			return fmt.Sprintf("Paused %s (%q).", j.ID, j.Name), nil
		case "resume":
			return "Resumed " + j.Line, nil
		case "remove":
			return fmt.Sprintf("Removed %s (%q).", j.ID, j.Name), nil
		}
		return fmt.Sprintf("%s (%q) runs now; its output is posted into %s.", j.ID, j.Name, laneName(j.Lane)), nil
	}
	return "", fmt.Errorf("unknown action %q: use add, list, pause, resume, remove or run", action)
}

func laneName(l core.Lane) string {
	if l.ThreadID != "" {
		return "channel " + l.ChatID + ", thread " + l.ThreadID
	}
	return "channel " + l.ChatID
}
