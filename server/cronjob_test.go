package server_test

// The agent's cronjob tool end to end: the model (a fake speaking real
// OpenAI SSE with split tool-call deltas) calls cronjob over a real
// WebSocket turn, the job lands in the store aimed at the lane the turn
// ran in, and a scheduler tick on an injected clock posts the job's output
// into that channel.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/store"
)

// agToolResult returns the content of the tool message answering callID
// in a request the model got.
func agToolResult(t *testing.T, req map[string]any, callID string) string {
	t.Helper()
	for _, m := range agMsgs(t, req) {
		if m["role"] == "tool" && m["tool_call_id"] == callID {
			return fmt.Sprint(m["content"])
		}
	}
	t.Fatalf("no result for %s among %s", callID, agRoles(t, req))
	return ""
}

// cronCalls is one response calling cronjob several times, in order.
func cronCalls(calls ...fakeopenai.Call) fakeopenai.Script {
	for i := range calls {
		calls[i].Name = "cronjob"
	}
	return fakeopenai.Script{Chunks: fakeopenai.ToolCalls("", 5, calls...)}
}

// agOffers reports whether a request offered the model a tool by name.
func agOffers(req map[string]any, name string) bool {
	tools, _ := req["tools"].([]any)
	for _, tl := range tools {
		fn, _ := tl.(map[string]any)["function"].(map[string]any)
		if fn["name"] == name {
			return true
		}
	}
	return false
}

func TestModelCronjobAddAndTickPostsIntoTheLane(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	ops := createChannel(t, a, "ops", "")
	lane := client.Lane{ChatID: ops.ChatID}
	ctx := context.Background()

	r.call("cronjob", `{"action":"add","schedule":"0 9 * * *","prompt":"Summarize the overnight alerts","name":"morning alerts"}`)
	r.reply("Every morning at 9 it is.")
	got := agTurn(t, a, lane, "summarize the alerts for me every morning at nine")
	start := agTool(t, agOne(t, got, "tool.start"))
	end := agTool(t, agOne(t, got, "tool.end"))
	if start.Name != "cronjob" || start.Emoji != "⏰" || start.Preview != "add 0 9 * * *" || !*end.OK {
		t.Fatalf("tool.start %+v, tool.end %+v", start, end)
	}
	reqs := r.requests(2)
	if !agOffers(reqs[0], "cronjob") {
		t.Fatalf("the model was not offered the cronjob tool: %v", reqs[0]["tools"])
	}
	added := agToolResult(t, reqs[1], "call_cronjob")
	jobs, err := r.g.App.Store.CronJobs(ctx)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	j := jobs[0]
	if j.ChatID != ops.ChatID || j.ThreadID != "" || j.Prompt != "Summarize the overnight alerts" || j.Name != "morning alerts" || !j.Enabled {
		t.Fatalf("stored job %+v: it must post into the lane the turn ran in", j)
	}
	if j.NextRun.Local().Hour() != 9 || j.NextRun.Minute() != 0 || time.Until(j.NextRun) > 24*time.Hour {
		t.Fatalf("next run %v, want the next 09:00", j.NextRun)
	}
	if !strings.HasPrefix(added, "Added "+j.ID) || !strings.Contains(added, "(this conversation)") {
		t.Fatalf("the model was told %q", added)
	}

	// 09:00 comes (an injected clock, the gateway's own runner): the
	// prompt runs through the model and its answer is posted in ops.
	s := cron.New(r.g.App.Store, r.g.App.GW.RunCron, slog.Default())
	at := j.NextRun.Add(time.Second)
	s.Now = func() time.Time { return at }
	r.reply("Three alerts overnight, all resolved.")
	s.Tick(ctx)
	m := a.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "cron" })
	if m.ChatID != ops.ChatID || testgw.Str(t, m, "text") != "Three alerts overnight, all resolved." {
		t.Fatalf("cron message %s", m.Raw)
	}
	n := a.Expect("notification", nil)
	if testgw.Str(t, n, "kind") != "cron" || n.ChatID != ops.ChatID || testgw.Str(t, n, "title") != "morning alerts" {
		t.Fatalf("notification %s", n.Raw)
	}
	if last := agLast(t, r.requests(3)[2]); last["content"] != "Summarize the overnight alerts" {
		t.Fatalf("the job's run asked the model %v", last)
	}
	after, _ := r.g.App.Store.CronJob(ctx, j.ID)
	if next, _, _ := cron.Next(j.Schedule, at); !after.LastRun.Equal(at) || !after.NextRun.Equal(next) || after.LastErr != "" {
		t.Fatalf("after the run: %+v", after)
	}
}

func TestModelCronjobListPauseResumeRemove(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	ctx := context.Background()
	other, err := cron.Add(ctx, r.g.App.Store, store.CronJob{Name: "elsewhere", Schedule: "every 2h", Text: "ping", ChatID: createChannel(t, a, "misc", "").ChatID}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mine, err := cron.Add(ctx, r.g.App.Store, store.CronJob{Name: "standup", Schedule: "every 1h", Text: "Standup time", ChatID: "default"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	r.fake.Push(cronCalls(
		fakeopenai.Call{ID: "c1", Args: `{"action":"list"}`},
		fakeopenai.Call{ID: "c2", Args: fmt.Sprintf(`{"action":"pause","id":%q}`, mine.ID)},
	))
	r.reply("Paused the standup.")
	got := agTurn(t, a, def, "what is scheduled? pause the standup")
	for _, f := range agOnly(got, "tool.end") {
		if !*agTool(t, f).OK {
			t.Fatalf("tool.end %s", f.Raw)
		}
	}
	req := r.requests(2)[1]
	list := agToolResult(t, req, "c1")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 {
		t.Fatalf("list: %q", list)
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, mine.ID):
			if !strings.Contains(l, `"standup"`) || !strings.Contains(l, "[every 1h]") || !strings.Contains(l, "in default") || !strings.HasSuffix(l, "(this conversation)") {
				t.Fatalf("list line %q", l)
			}
		case strings.HasPrefix(l, other.ID):
			if strings.Contains(l, "this conversation") || !strings.Contains(l, "[every 2h]") {
				t.Fatalf("list line %q", l)
			}
		default:
			t.Fatalf("list line %q", l)
		}
	}
	if res := agToolResult(t, req, "c2"); res != fmt.Sprintf("Paused %s (%q).", mine.ID, "standup") {
		t.Fatalf("pause answered %q", res)
	}
	if j, _ := r.g.App.Store.CronJob(ctx, mine.ID); j.Enabled {
		t.Fatal("the job is not paused")
	}

	r.fake.Push(cronCalls(
		fakeopenai.Call{ID: "c3", Args: fmt.Sprintf(`{"action":"resume","id":%q}`, mine.ID)},
		fakeopenai.Call{ID: "c4", Args: fmt.Sprintf(`{"action":"remove","id":%q}`, mine.ID)},
		fakeopenai.Call{ID: "c5", Args: fmt.Sprintf(`{"action":"remove","id":%q}`, mine.ID)},
		fakeopenai.Call{ID: "c6", Args: `{"action":"pause"}`},
	))
	r.reply("Done.")
	got = agTurn(t, a, def, "resume it, then remove it")
	ends := agOnly(got, "tool.end")
	if len(ends) != 4 || !*agTool(t, ends[0]).OK || !*agTool(t, ends[1]).OK || *agTool(t, ends[2]).OK || *agTool(t, ends[3]).OK {
		t.Fatalf("tool.end frames: %s", typesOf(ends))
	}
	req = r.requests(4)[3]
	if res := agToolResult(t, req, "c3"); !strings.HasPrefix(res, "Resumed "+mine.ID) || !strings.Contains(res, " on, next ") {
		t.Fatalf("resume answered %q", res)
	}
	if res := agToolResult(t, req, "c4"); res != fmt.Sprintf("Removed %s (%q).", mine.ID, "standup") {
		t.Fatalf("remove answered %q", res)
	}
	if res := agToolResult(t, req, "c5"); res != fmt.Sprintf("error: no cron job %q", mine.ID) {
		t.Fatalf("removing a removed job answered %q", res)
	}
	if res := agToolResult(t, req, "c6"); res != "error: pause needs the job's id (list shows them)" {
		t.Fatalf("pause without an id answered %q", res)
	}
	jobs, _ := r.g.App.Store.CronJobs(ctx)
	if len(jobs) != 1 || jobs[0].ID != other.ID {
		t.Fatalf("jobs left: %+v", jobs)
	}
}

func TestModelCronjobErrorsReachTheModel(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	misc := createChannel(t, a, "Misc", "")
	th := createChannel(t, a, "deploys", misc.ChatID)
	r.fake.Push(cronCalls(
		fakeopenai.Call{ID: "bad", Args: `{"action":"add","schedule":"at teatime","text":"Tea"}`},
		fakeopenai.Call{ID: "nochan", Args: `{"action":"add","schedule":"every 1h","text":"Tea","chat_id":"chan_nope"}`},
		fakeopenai.Call{ID: "nothread", Args: `{"action":"add","schedule":"every 1h","text":"Tea","thread_id":"t_nope"}`},
		fakeopenai.Call{ID: "both", Args: `{"action":"add","schedule":"every 1h","text":"Tea","prompt":"Make tea"}`},
		fakeopenai.Call{ID: "past", Args: `{"action":"add","schedule":"2001-01-01T09:00","text":"Tea"}`},
		fakeopenai.Call{ID: "verb", Args: `{"action":"explode"}`},
		// A channel may be named by its name; a thread's id is taken as
		// that thread of its channel.
		fakeopenai.Call{ID: "named", Args: `{"action":"add","schedule":"30m","text":"Tea in misc","chat_id":"misc"}`},
		fakeopenai.Call{ID: "thread", Args: fmt.Sprintf(`{"action":"add","schedule":"30m","text":"Tea in the thread","chat_id":%q}`, th.ChatID)},
	))
	r.reply("Some of that did not work.")
	got := agTurn(t, a, def, "schedule tea")
	if ends := agOnly(got, "tool.end"); len(ends) != 8 {
		t.Fatalf("%d tool.end frames", len(ends))
	}
	req := r.requests(2)[1]
	for id, want := range map[string]string{
		"bad":      `error: "at teatime" is not a schedule: use a 5-field cron expression`,
		"nochan":   `error: unknown channel "chan_nope": give a chat_id from the channel list`,
		"nothread": `error: unknown thread "t_nope" in channel "default"`,
		"both":     "error: give a prompt or a text, not both",
		"past":     `error: "2001-01-01T09:00" is in the past`,
		"verb":     `error: unknown action "explode"`,
		"named":    "Added cron_",
		"thread":   "Added cron_",
	} {
		if res := agToolResult(t, req, id); !strings.HasPrefix(res, want) {
			t.Errorf("%s: the model was told %q, want it to start with %q", id, res, want)
		}
	}
	jobs, _ := r.g.App.Store.CronJobs(context.Background())
	if len(jobs) != 2 {
		t.Fatalf("jobs = %+v, want the two good ones", jobs)
	}
	for _, j := range jobs {
		switch j.Text {
		case "Tea in misc":
			if j.ChatID != misc.ChatID || j.ThreadID != "" {
				t.Errorf("by name: %+v", j)
			}
		case "Tea in the thread":
			if j.ChatID != misc.ChatID || j.ThreadID != th.ChatID {
				t.Errorf("by thread id: %+v", j)
			}
		default:
			t.Errorf("unexpected job %+v", j)
		}
	}
}
