package server_test

// The agent's tools end to end: the model's split tool-call deltas become
// tool.start / tool.progress / tool.end frames, todo lists, questions and
// approvals reach the devices as pickers, and their answers reach the model.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// call queues one response calling a tool (arguments split in 7 deltas).
func (r *agRig) call(name, args string) {
	r.fake.Push(fakeopenai.Script{Chunks: fakeopenai.ToolCall("", "call_"+name, name, args, 7)})
}

// TestModelToolFrames: a terminal call whose arguments arrive split over
// many deltas becomes tool.start (preview, args, emoji) and tool.end (ok,
// duration, output); the text before the call is commentary, not part of
// the reply; the model gets the output back as the call's result.
func TestModelToolFrames(t *testing.T) {
	r := agStart(t)
	if err := os.WriteFile(filepath.Join(r.work, "note.txt"), []byte("a note in the working directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const command = "echo from-the-tool && cat note.txt"
	r.script(
		fakeopenai.Script{Chunks: fakeopenai.ToolCall("Let me look at the note.", "call_t1", "terminal", fmt.Sprintf(`{"command":%q}`, command), 11)},
		fakeopenai.Script{Chunks: fakeopenai.Text("The note says hello.", 4)},
	)
	a := r.dial("phone")
	b := r.dial("tablet")
	send(t, a, def, "what does the note say?")
	for _, d := range []*testgw.Device{a, b} {
		got := until(t, d, is(t, "agent.idle"))
		com := agOne(t, got, "commentary")
		if testgw.Str(t, com, "text") != "Let me look at the note." || !strings.HasPrefix(testgw.Str(t, com, "message_id"), "m_") {
			t.Fatalf("%s: commentary %s", d.ID, com.Raw)
		}
		start := agTool(t, agOne(t, got, "tool.start"))
		if start.Index != 1 || start.Name != "terminal" || start.Preview != command || start.Emoji != "💻" || start.Args["command"] != command {
			t.Fatalf("%s: tool.start %+v", d.ID, start)
		}
		end := agTool(t, agOne(t, got, "tool.end"))
		if end.Index != 1 || end.Name != "terminal" || end.OK == nil || !*end.OK || end.Duration == nil || *end.Duration < 0 {
			t.Fatalf("%s: tool.end %+v", d.ID, end)
		}
		if !strings.Contains(end.Output, "from-the-tool") || !strings.Contains(end.Output, "a note in the working directory") {
			t.Fatalf("%s: output_preview %q", d.ID, end.Output)
		}
		if s := agStop(t, got); s.FinalText != "The note says hello." {
			t.Fatalf("%s: the reply holds %q: the commentary is not its text", d.ID, s.FinalText)
		}
		// The order a person sees: commentary, the tool, then the answer.
		order := typesOf(got)
		if ci, ti, ei := strings.Index(order, "commentary"), strings.Index(order, "tool.start"), strings.Index(order, "message.stop"); ci > ti || ti > ei {
			t.Fatalf("%s: order %s", d.ID, order)
		}
	}
	reqs := r.requests(2)
	ms := agMsgs(t, reqs[1])
	if agRoles(t, reqs[1]) != "system,user,assistant,tool" {
		t.Fatalf("roles %s", agRoles(t, reqs[1]))
	}
	asst := ms[2]
	fn := asst["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "terminal" || fn["arguments"] != fmt.Sprintf(`{"command":%q}`, command) || asst["content"] != "Let me look at the note." {
		t.Fatalf("the assistant's call as sent back: %v", asst)
	}
	if ms[3]["tool_call_id"] != "call_t1" || !strings.Contains(fmt.Sprint(ms[3]["content"]), "a note in the working directory") {
		t.Fatalf("tool result %v", ms[3])
	}
}

// TestModelFileTools: write_file and read_file work in the working
// directory, with their emojis.
func TestModelFileTools(t *testing.T) {
	r := agStart(t)
	r.call("write_file", `{"path":"out/../made.txt","content":"written by the model"}`)
	r.call("read_file", `{"path":"made.txt"}`)
	r.reply("done")
	a := r.dial("phone")
	got := agTurn(t, a, def, "write and read")
	starts, ends := agOnly(got, "tool.start"), agOnly(got, "tool.end")
	if len(starts) != 2 || len(ends) != 2 {
		t.Fatalf("frames %s", typesOf(got))
	}
	w, rd := agTool(t, starts[0]), agTool(t, starts[1])
	if w.Name != "write_file" || w.Emoji != "✍️" || w.Preview != "out/../made.txt" || rd.Name != "read_file" || rd.Emoji != "📖" || rd.Index != 2 {
		t.Fatalf("starts %+v %+v", w, rd)
	}
	if e := agTool(t, ends[1]); !*e.OK || e.Output != "written by the model" {
		t.Fatalf("read_file end %+v", e)
	}
	if b, err := os.ReadFile(filepath.Join(r.work, "made.txt")); err != nil || string(b) != "written by the model" {
		t.Fatalf("file: %q %v", b, err)
	}
	// A missing file is a failed call the model hears about, not a failed turn.
	r.call("read_file", `{"path":"nope.txt"}`)
	r.reply("no such file")
	got = agTurn(t, a, def, "read a missing one")
	if e := agTool(t, agOne(t, got, "tool.end")); *e.OK || !strings.Contains(e.Output, "no such file") {
		t.Fatalf("end %+v", e)
	}
	if !agSaid(t, r.requests(5)[4], "tool", "error:") {
		t.Fatal("the model did not hear of the error")
	}
}

// TestModelToolProgress: a command that runs longer than the progress
// interval reports tool.progress while it runs.
func TestModelToolProgress(t *testing.T) {
	r := agStart(t) // the rig's tools report progress every 50 ms
	r.call("terminal", `{"command":"while [ ! -e release ]; do sleep 0.02; done; echo released"}`)
	r.reply("finished")
	a := r.dial("phone")
	send(t, a, def, "run the long thing")
	p := agTool(t, a.Expect("tool.progress", nil))
	if p.Index != 1 || p.Name != "terminal" || !strings.HasPrefix(p.Note, "running…") {
		t.Fatalf("tool.progress %+v", p)
	}
	if err := os.WriteFile(filepath.Join(r.work, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	end := agTool(t, a.Expect("tool.end", nil))
	if !*end.OK || end.Output != "released" || *end.Duration <= 0 {
		t.Fatalf("tool.end %+v", end)
	}
	until(t, a, is(t, "agent.idle"))
}

// TestModelTodo: the todo tool's list reaches every device as todo.update
// on each change, a device connecting later gets it right after hello,
// and /new clears it.
func TestModelTodo(t *testing.T) {
	r := agStart(t)
	r.call("todo", `{"todos":[{"id":"1","content":"read the code","status":"in_progress"},{"id":"2","content":"write tests"}]}`)
	r.call("todo", `{"merge":true,"todos":[{"id":"1","status":"completed"},{"id":"2","status":"in_progress"}]}`)
	r.reply("planned")
	a := r.dial("phone")
	b := r.dial("tablet")
	got := agTurn(t, a, def, "plan it")
	type todo struct{ ID, Content, Status string }
	todosOf := func(f client.Frame) []todo {
		var p struct {
			Todos []todo `json:"todos"`
		}
		if err := f.Decode(&p); err != nil {
			t.Fatal(err)
		}
		return p.Todos
	}
	ups := agOnly(got, "todo.update")
	if len(ups) != 2 {
		t.Fatalf("%d todo.update frames", len(ups))
	}
	first, second := todosOf(ups[0]), todosOf(ups[1])
	want1 := []todo{{"1", "read the code", "in_progress"}, {"2", "write tests", "pending"}}
	want2 := []todo{{"1", "read the code", "completed"}, {"2", "write tests", "in_progress"}}
	if fmt.Sprint(first) != fmt.Sprint(want1) || fmt.Sprint(second) != fmt.Sprint(want2) {
		t.Fatalf("todo lists %v then %v", first, second)
	}
	if e := agTool(t, agOnly(got, "tool.start")[0]); e.Emoji != "📋" || e.Preview != "2 item(s)" {
		t.Fatalf("todo tool.start %+v", e)
	}
	if ups := agOnly(until(t, b, is(t, "agent.idle")), "todo.update"); len(ups) != 2 || fmt.Sprint(todosOf(ups[1])) != fmt.Sprint(want2) {
		t.Fatalf("the other device's todo frames: %d", len(ups))
	}
	// A device connecting now gets the list right after hello.
	c := r.g.Dial(t, "laptop")
	snap := barrier(t, c)
	if u := agOne(t, snap, "todo.update"); u.ChatID != "default" || fmt.Sprint(todosOf(u)) != fmt.Sprint(want2) {
		t.Fatalf("snapshot %s", u.Raw)
	}
	// The next turn starts from the list: a merge keeps the other items.
	r.call("todo", `{"merge":true,"todos":[{"id":"2","status":"completed"}]}`)
	r.reply("all done")
	got = agTurn(t, a, def, "finish")
	if l := todosOf(agOne(t, got, "todo.update")); len(l) != 2 || l[1].Status != "completed" || l[0].Status != "completed" {
		t.Fatalf("merged list %v", l)
	}
	// /new clears it, for every device, and later devices get none.
	send(t, a, def, "/new")
	pk := a.Expect("picker.confirm", nil)
	a.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": testgw.Str(t, pk, "picker_id"), "value": "once"})
	b.Expect("todo.update", func(f client.Frame) bool { return len(todosOf(f)) == 0 })
	d := r.g.Dial(t, "watch")
	none(t, "a device connecting after /new", barrier(t, d), is(t, "todo.update"))
}

// TestModelClarify: the clarify tool asks the person with picker.clarify
// and a notification; the answer (a choice, or their own words) comes back
// to the model.
func TestModelClarify(t *testing.T) {
	r := agStart(t)
	r.call("clarify", `{"question":"Which colour?","choices":["red","blue"]}`)
	r.call("clarify", `{"question":"And the size?"}`)
	r.reply("Blue it is, large.")
	a := r.dial("phone")
	b := r.dial("tablet")
	send(t, a, def, "paint it")
	pk := b.Expect("picker.clarify", nil)
	var p struct {
		PickerID string `json:"picker_id"`
		Title    string `json:"title"`
		Choices  []struct {
			Value, Label string
		} `json:"choices"`
	}
	if err := pk.Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Title != "Which colour?" || len(p.Choices) != 2 || p.Choices[1].Value != "blue" || !strings.HasPrefix(p.PickerID, "pk_") {
		t.Fatalf("picker.clarify %s", pk.Raw)
	}
	n := b.Expect("notification", nil)
	if testgw.Str(t, n, "kind") != "clarify" || testgw.Str(t, n, "title") != "Which colour?" {
		t.Fatalf("notification %s", n.Raw)
	}
	b.Expect("agent.busy", func(f client.Frame) bool { return testgw.Str(t, f, "reason") == "waiting_input" })
	// A value that is not a choice is the person's own words: allowed.
	ans := a.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": p.PickerID, "value": "blue"})
	if ans.Type != "message" || testgw.Str(t, ans, "role") != "system" || !strings.Contains(testgw.Str(t, ans, "text"), "blue") || ans.ChatID != "default" {
		t.Fatalf("picker.select answered %s", ans.Raw)
	}
	pk2 := a.Expect("picker.clarify", func(f client.Frame) bool { return testgw.Str(t, f, "title") == "And the size?" })
	a.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": testgw.Str(t, pk2, "picker_id"), "value": "large, please"})
	if s := agStop(t, until(t, a, is(t, "agent.idle"))); s.FinalText != "Blue it is, large." {
		t.Fatalf("final %q", s.FinalText)
	}
	reqs := r.requests(3)
	if last := agLast(t, reqs[1]); last["role"] != "tool" || !strings.Contains(fmt.Sprint(last["content"]), "The person answered: blue") {
		t.Fatalf("the model did not get the answer: %v", last)
	}
	if !agSaid(t, reqs[2], "tool", "The person answered: large, please") {
		t.Fatal("the free answer did not reach the model")
	}
	// The answered picker is stale now: a second selection is a no-op.
	staleSelect(t, a, p.PickerID, "red")
}

// staleSelect sends a picker.select with an id and asserts nothing answers
// it (a stale picker is a no-op, without reply).
func staleSelect(t *testing.T, d *testgw.Device, pickerID, value string) {
	t.Helper()
	const id = 990001
	raw := fmt.Sprintf(`{"v":1,"id":%d,"type":"picker.select","payload":{"picker_id":%q,"value":%q}}`, id, pickerID, value)
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	if err := d.SendRaw(ctx, []byte(raw), false); err != nil {
		t.Fatal(err)
	}
	none(t, d.ID+" after a stale picker.select", barrier(t, d), reply(id))
}

// TestModelSendFile: send_file runs (the media issue turns its offer into
// a transfer; here it is enough that the tool ran and the devices heard).
func TestModelSendFile(t *testing.T) {
	r := agStart(t)
	if err := os.WriteFile(filepath.Join(r.work, "report.txt"), []byte("the report"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.call("send_file", `{"path":"report.txt","caption":"Here it is"}`)
	r.reply("sent")
	a := r.dial("phone")
	got := agTurn(t, a, def, "send me the report")
	start := agTool(t, agOne(t, got, "tool.start"))
	end := agTool(t, agOne(t, got, "tool.end"))
	if start.Name != "send_file" || start.Emoji != "📎" || start.Preview != "report.txt" || !*end.OK || !strings.Contains(end.Output, "report.txt") {
		t.Fatalf("start %+v end %+v", start, end)
	}
	if !agSaid(t, r.requests(2)[1], "tool", "report.txt") {
		t.Fatal("the model did not hear the file went out")
	}
}

// approval is a picker.approval as a device sees it.
type approval struct {
	PickerID    string `json:"picker_id"`
	Title       string `json:"title"`
	Command     string `json:"command"`
	Description string `json:"description"`
	Choices     []struct {
		Value string `json:"value"`
		Label string `json:"label"`
	} `json:"choices"`
}

// expectApproval waits for the approval picker of command and its
// notification.
func expectApproval(t *testing.T, d *testgw.Device, command string) approval {
	t.Helper()
	f := d.Expect("picker.approval", nil)
	var p approval
	if err := f.Decode(&p); err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, c := range p.Choices {
		values = append(values, c.Value)
	}
	if p.Command != command || !strings.Contains(p.Description, "deletes files") || strings.Join(values, ",") != "once,session,always,deny" || f.ChatID == "" {
		t.Fatalf("picker.approval %s", f.Raw)
	}
	n := d.Expect("notification", nil)
	if testgw.Str(t, n, "kind") != "approval" || testgw.Str(t, n, "body") != command || testgw.Str(t, n, "title") == "" {
		t.Fatalf("notification %s", n.Raw)
	}
	return p
}

// dangerous queues a model response running rm -rf on a directory it
// makes, and returns the command.
func (r *agRig) dangerous(dir string) string {
	r.t.Helper()
	if err := os.MkdirAll(filepath.Join(r.work, dir), 0o755); err != nil {
		r.t.Fatal(err)
	}
	cmd := "rm -rf " + dir
	r.call("terminal", fmt.Sprintf(`{"command":%q}`, cmd))
	r.reply("handled " + dir)
	return cmd
}

func (r *agRig) exists(dir string) bool {
	_, err := os.Stat(filepath.Join(r.work, dir))
	return err == nil
}

// selectChoice answers a picker and returns the reply message.
func selectChoice(t *testing.T, d *testgw.Device, pickerID, value string) client.Frame {
	t.Helper()
	f := d.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": pickerID, "value": value})
	if f.Type != "message" || testgw.Str(t, f, "role") != "system" {
		t.Fatalf("picker.select answered %s", f.Raw)
	}
	return f
}

// endOf returns the turn's single tool.end.
func endOf(t *testing.T, fs []client.Frame) agToolFrame {
	t.Helper()
	return agTool(t, agOne(t, fs, "tool.end"))
}

// TestModelApprovalOnce: a dangerous command waits for the person; "once"
// runs it, and the same command asks again next time.
func TestModelApprovalOnce(t *testing.T) {
	r := agStart(t)
	cmd := r.dangerous("junk")
	a := r.dial("phone")
	b := r.dial("tablet")
	send(t, a, def, "clean up")
	p := expectApproval(t, b, cmd)
	b.Expect("agent.busy", func(f client.Frame) bool { return testgw.Str(t, f, "reason") == "waiting_input" })
	if !r.exists("junk") {
		t.Fatal("the command ran before the approval")
	}
	// A value that is not one of the choices is refused; the picker waits on.
	_, err := b.Do("picker.select", client.Lane{}, map[string]any{"picker_id": p.PickerID, "value": "maybe"})
	wantCode(t, err, "unsupported")
	ans := selectChoice(t, b, p.PickerID, "once")
	if !strings.Contains(testgw.Str(t, ans, "text"), "Allowed once") {
		t.Fatalf("reply %s", ans.Raw)
	}
	if end := endOf(t, until(t, a, is(t, "agent.idle"))); !*end.OK {
		t.Fatalf("tool.end %+v", end)
	}
	if r.exists("junk") {
		t.Fatal("the approved command did not run")
	}
	// Once is once.
	cmd = r.dangerous("junk")
	send(t, a, def, "again")
	p = expectApproval(t, a, cmd)
	selectChoice(t, a, p.PickerID, "deny")
	until(t, a, is(t, "agent.idle"))
}

// TestModelApprovalDeny: "deny" does not run the command; the model hears
// it was denied.
func TestModelApprovalDeny(t *testing.T) {
	r := agStart(t)
	cmd := r.dangerous("keep")
	a := r.dial("phone")
	send(t, a, def, "clean up")
	p := expectApproval(t, a, cmd)
	if ans := selectChoice(t, a, p.PickerID, "deny"); !strings.Contains(testgw.Str(t, ans, "text"), "Denied") {
		t.Fatalf("reply %s", ans.Raw)
	}
	got := until(t, a, is(t, "agent.idle"))
	if end := endOf(t, got); *end.OK || !strings.Contains(end.Output, "denied") {
		t.Fatalf("tool.end %+v", end)
	}
	if !r.exists("keep") {
		t.Fatal("a denied command ran")
	}
	if last := agLast(t, r.requests(2)[1]); last["role"] != "tool" || !strings.Contains(fmt.Sprint(last["content"]), "denied") {
		t.Fatalf("the model was told %v", last)
	}
}

// TestModelApprovalSession: "session" lets the same command pass without
// asking for the rest of the lane's session, in that lane only.
func TestModelApprovalSession(t *testing.T) {
	r := agStart(t)
	cmd := r.dangerous("junk")
	a := r.dial("phone")
	send(t, a, def, "clean up")
	p := expectApproval(t, a, cmd)
	if ans := selectChoice(t, a, p.PickerID, "session"); !strings.Contains(testgw.Str(t, ans, "text"), "this session") {
		t.Fatalf("reply %s", ans.Raw)
	}
	until(t, a, is(t, "agent.idle"))
	r.dangerous("junk")
	got := agTurn(t, a, def, "again")
	none(t, "the second identical command", got, is(t, "picker.approval"))
	if end := endOf(t, got); !*end.OK || r.exists("junk") {
		t.Fatalf("tool.end %+v", end)
	}
	// Another lane is another session.
	ch := createChannel(t, a, "Elsewhere", "")
	r.dangerous("junk")
	send(t, a, client.Lane{ChatID: ch.ChatID}, "clean up there")
	p = expectApproval(t, a, cmd)
	selectChoice(t, a, p.PickerID, "deny")
	until(t, a, is(t, "agent.idle"))
	// /new ends the session: asked again.
	send(t, a, def, "/new")
	pk := a.Expect("picker.confirm", nil)
	selectChoice(t, a, testgw.Str(t, pk, "picker_id"), "once")
	r.dangerous("junk")
	send(t, a, def, "once more")
	p = expectApproval(t, a, cmd)
	selectChoice(t, a, p.PickerID, "deny")
	until(t, a, is(t, "agent.idle"))
}

// TestModelApprovalAlways: "always" is remembered across /new, other lanes
// and a restart.
func TestModelApprovalAlways(t *testing.T) {
	r := agStart(t)
	cmd := r.dangerous("junk")
	a := r.dial("phone")
	send(t, a, def, "clean up")
	p := expectApproval(t, a, cmd)
	if ans := selectChoice(t, a, p.PickerID, "always"); !strings.Contains(testgw.Str(t, ans, "text"), "Always allowed") {
		t.Fatalf("reply %s", ans.Raw)
	}
	until(t, a, is(t, "agent.idle"))
	send(t, a, def, "/new")
	pk := a.Expect("picker.confirm", nil)
	selectChoice(t, a, testgw.Str(t, pk, "picker_id"), "once")
	r.dangerous("junk")
	got := agTurn(t, a, def, "after /new")
	none(t, "after /new", got, is(t, "picker.approval"))
	if !*endOf(t, got).OK {
		t.Fatal("did not run after /new")
	}
	ch := createChannel(t, a, "Elsewhere", "")
	r.dangerous("junk")
	if got := agTurn(t, a, client.Lane{ChatID: ch.ChatID}, "there"); len(agOnly(got, "picker.approval")) != 0 || !*endOf(t, got).OK {
		t.Fatalf("asked in another lane: %s", typesOf(got))
	}
	r.restart()
	b := r.dial("phone2")
	r.dangerous("junk")
	got = agTurn(t, b, def, "after a restart")
	none(t, "after a restart", got, is(t, "picker.approval"))
	if !*endOf(t, got).OK || r.exists("junk") {
		t.Fatal("did not run after a restart")
	}
	// Only that command: another dangerous one still asks.
	other := r.dangerous("junk2")
	send(t, b, def, "another")
	p = expectApproval(t, b, other)
	selectChoice(t, b, p.PickerID, "deny")
	until(t, b, is(t, "agent.idle"))
}

// TestModelApprovalTimeout: silence past the ask timeout denies, says so,
// and the expired picker is a no-op.
func TestModelApprovalTimeout(t *testing.T) {
	r := agStart(t, agWithApp(func(c *server.AppConfig) { c.AskTimeout = 300 * time.Millisecond }))
	cmd := r.dangerous("junk")
	a := r.dial("phone")
	send(t, a, def, "clean up")
	p := expectApproval(t, a, cmd)
	got := until(t, a, is(t, "agent.idle"))
	agHasSystem(t, got, "No answer within 300ms: denied")
	if end := endOf(t, got); *end.OK || !strings.Contains(end.Output, "denied") {
		t.Fatalf("tool.end %+v", end)
	}
	if !r.exists("junk") {
		t.Fatal("ran without an answer")
	}
	staleSelect(t, a, p.PickerID, "once")
	if !r.exists("junk") {
		t.Fatal("a stale approval ran it")
	}
	r.noMoreRequests(2)
	// An unanswered question ends the same way: the model hears of it.
	r.call("clarify", `{"question":"Which one?","choices":["a","b"]}`)
	r.reply("I will pick myself")
	got = agTurn(t, a, def, "ask me")
	agHasSystem(t, got, "No answer within 300ms to: Which one?")
	if end := endOf(t, got); *end.OK {
		t.Fatalf("clarify end %+v", end)
	}
	if last := agLast(t, r.requests(4)[3]); !strings.Contains(fmt.Sprint(last["content"]), "no answer within") {
		t.Fatalf("the model was told %v", last)
	}
}

// TestModelYolo: /yolo lifts approvals for the lane's session; /yolo again
// puts them back.
func TestModelYolo(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	send(t, a, def, "/yolo")
	agSystemReply(t, a, "YOLO")
	r.dangerous("junk")
	got := agTurn(t, a, def, "clean up")
	none(t, "with /yolo", got, is(t, "picker.approval"))
	if !*endOf(t, got).OK || r.exists("junk") {
		t.Fatal("did not run under /yolo")
	}
	send(t, a, def, "/yolo")
	agSystemReply(t, a, "Approvals are back on")
	cmd := r.dangerous("junk")
	send(t, a, def, "clean up again")
	p := expectApproval(t, a, cmd)
	selectChoice(t, a, p.PickerID, "deny")
	until(t, a, is(t, "agent.idle"))
}

// TestModelApproveAndDenyCommands: /approve and /deny answer the lane's
// pending approval.
func TestModelApproveAndDenyCommands(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	send(t, a, def, "/approve")
	agSystemReply(t, a, "no command is waiting")

	cmd := r.dangerous("junk")
	send(t, a, def, "clean up")
	expectApproval(t, a, cmd)
	send(t, a, def, "/approve")
	if end := endOf(t, until(t, a, is(t, "agent.idle"))); !*end.OK || r.exists("junk") {
		t.Fatalf("/approve: %+v", end)
	}
	cmd = r.dangerous("junk")
	send(t, a, def, "again")
	expectApproval(t, a, cmd)
	send(t, a, def, "/approve session")
	agSystemReply(t, a, "Allowed for this session")
	until(t, a, is(t, "agent.idle"))
	r.dangerous("junk")
	none(t, "after /approve session", agTurn(t, a, def, "once more"), is(t, "picker.approval"))

	other := r.dangerous("keep")
	send(t, a, def, "and that")
	expectApproval(t, a, other)
	send(t, a, def, "/deny")
	if end := endOf(t, until(t, a, is(t, "agent.idle"))); *end.OK || !r.exists("keep") {
		t.Fatalf("/deny: %+v", end)
	}
}

// TestModelStopWhileAsking: agent.stop while an approval waits ends the
// turn; the command never runs.
func TestModelStopWhileAsking(t *testing.T) {
	r := agStart(t)
	cmd := r.dangerous("keep")
	a := r.dial("phone")
	send(t, a, def, "clean up")
	p := expectApproval(t, a, cmd)
	stop := a.MustDo("agent.stop", def, nil)
	until(t, a, reply(stop.ID))
	staleSelect(t, a, p.PickerID, "once")
	if !r.exists("keep") {
		t.Fatal("ran after the stop")
	}
}
