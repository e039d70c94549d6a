package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// fakeCron records what the tool asks of the gateway.
type fakeCron struct{ added []CronJob }

func (f *fakeCron) Add(_ context.Context, j CronJob) (CronJob, error) {
	f.added = append(f.added, j)
	j.ID, j.Line = "cron_1", "cron_1  line"
	return j, nil
}
func (f *fakeCron) List(context.Context) ([]CronJob, error) { return nil, nil }
func (f *fakeCron) Act(_ context.Context, _, id string) (CronJob, error) {
	return CronJob{}, core.Errorf(core.CodeNotFound, "no cron job %q", id)
}

func TestCronjobTool(t *testing.T) {
	tool, ctx := cronjobTool(), context.Background()
	here := core.Lane{ChatID: "c_ops", ThreadID: "t_1"}
	if _, err := tool.Run(ctx, &ToolEnv{Lane: here}, map[string]any{"action": "list"}, nil); err == nil {
		t.Fatal("a gateway without cron offered jobs")
	}
	fc := &fakeCron{}
	env := &ToolEnv{Lane: here, Cron: fc}
	run := func(args map[string]any) (string, error) { return tool.Run(ctx, env, args, nil) }
	if out, err := run(map[string]any{"action": "add", "schedule": "1h", "text": "x"}); err != nil || out != "Added cron_1  line (this conversation)" {
		t.Fatalf("add here: %q %v", out, err)
	}
	run(map[string]any{"action": "add", "schedule": "1h", "text": "x", "chat_id": "c_other"})
	run(map[string]any{"action": "add", "schedule": "1h", "text": "x", "thread_id": "t_2"})
	want := []core.Lane{here, {ChatID: "c_other"}, {ChatID: "c_ops", ThreadID: "t_2"}}
	for i, j := range fc.added {
		if j.Lane != want[i] {
			t.Errorf("add %d aimed at %+v, want %+v", i, j.Lane, want[i])
		}
	}
	// The protocol's code stays out of what the model reads.
	if _, err := run(map[string]any{"action": "run", "id": "cron_9"}); err == nil || err.Error() != `no cron job "cron_9"` {
		t.Fatalf("unknown job: %v", err)
	}
	if out, _ := run(map[string]any{"action": "list"}); out != "No scheduled jobs." {
		t.Fatalf("empty list: %q", out)
	}
	if _, err := run(map[string]any{"action": "add", "text": "x"}); err == nil || !strings.Contains(err.Error(), "schedule") {
		t.Fatalf("add without a schedule: %v", err)
	}
}
