package turn_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

func userText(text string) func(*core.Event) bool {
	return func(ev *core.Event) bool {
		return ev.Type == core.EvMessage && ev.Message.Role == core.RoleUser && ev.Message.Text == text
	}
}

// Messages sent while a turn runs wait in its lane and run one at a time,
// in the order they were sent; each turn's row is settled as it ends.
func TestQueuedTurnsRunInOrder(t *testing.T) {
	proceed := make(chan struct{})
	ag := blockOn(proceed)
	rg := newRig(t, ag)
	d := rg.join("phone")
	inputs := []string{"one", "two", "three"}
	var sent []core.Message
	for _, in := range inputs {
		sent = append(sent, rg.send(in, d))
	}
	for i, in := range inputs {
		// The sender's read receipt says the turn took its message.
		rr := d.next(is(core.EvReadReceipt))
		if rr.MessageIDs[0] != sent[i].ID {
			t.Fatalf("turn %d read %v, want %s", i, rr.MessageIDs, sent[i].ID)
		}
		d.next(is(core.EvAgentBusy))
		if running, queued := rg.r.Status(lk); !running || queued != len(inputs)-1-i || !rg.r.Busy(lk) {
			t.Fatalf("turn %d: running %v, %d queued", i, running, queued)
		}
		give(t, proceed)
		stop := d.next(is(core.EvMessageStop))
		if stop.Message.Text != "re: "+in || stop.Message.Stopped {
			t.Fatalf("turn %d answered %+v", i, stop.Message)
		}
		d.next(is(core.EvAgentIdle))
	}
	if got := ag.ran(); !slices.Equal(got, inputs) {
		t.Fatalf("the agent ran %v, want %v", got, inputs)
	}
	if rg.r.Busy(lk) {
		t.Fatal("the lane is busy after its last agent.idle")
	}
	if owed := rg.owed(); len(owed) != 0 {
		t.Fatalf("turns still owed: %+v", owed)
	}
}

// A lane holds at most MaxQueued people's messages; the next is refused
// before it is stored, and a place given back is free again.
func TestLaneQueueIsBounded(t *testing.T) {
	rg := newRig(t, &agent.Echo{})
	for i := range turn.MaxQueued {
		if _, err := rg.r.Reserve(lk, ""); err != nil {
			t.Fatalf("place %d: %v", i, err)
		}
	}
	if _, err := rg.r.Reserve(lk, ""); !rg.r.QueueFull(lk) || !errors.Is(err, turn.ErrQueueFull) {
		t.Fatal("a full lane took one more")
	}
	rg.r.Release(lk, nil)
	if rg.r.QueueFull(lk) {
		t.Fatal("a place given back is not free")
	}
	if _, err := rg.r.Reserve(lk, ""); err != nil {
		t.Fatalf("a place given back is refused: %v", err)
	}
}

// A stopped turn keeps what it said: its reply is saved as stopped, with
// the text streamed so far, and the stop is answered by the turn's
// agent.idle.
func TestStopKeepsPartialReply(t *testing.T) {
	ag := &script{fn: func(ctx context.Context, _ agent.Turn, emit func(agent.Event)) error {
		emit(agent.Event{Kind: agent.Text, Text: "partial "})
		emit(agent.Event{Kind: agent.Text, Text: "answer"})
		<-ctx.Done()
		return ctx.Err()
	}}
	rg := newRig(t, ag)
	d := rg.join("phone")
	rg.send("go on", d)
	d.next(func(ev *core.Event) bool { return ev.Type == core.EvMessageUpdate && ev.Text == "partial answer" })
	rg.r.Stop(hub.Caller{Conn: d.conn, ReqID: 7}, lk)
	stop := d.next(is(core.EvMessageStop))
	if stop.Message.Text != "partial answer" || !stop.Message.Stopped {
		t.Fatalf("the stopped reply is %+v", stop.Message)
	}
	if idle := d.next(is(core.EvAgentIdle)); idle.req != 7 {
		t.Fatalf("the stop was answered by request %d", idle.req)
	}
	m, err := rg.st.Message(context.Background(), stop.Message.ID)
	if err != nil || m.Text != "partial answer" || !m.Stopped {
		t.Fatalf("stored %+v (%v)", m, err)
	}
	if owed := rg.owed(); len(owed) != 0 {
		t.Fatalf("turns still owed: %+v", owed)
	}
	// Nothing runs now: a stop is answered at once.
	rg.r.Stop(hub.Caller{Conn: d.conn, ReqID: 8}, lk)
	if idle := d.next(is(core.EvAgentIdle)); idle.req != 8 {
		t.Fatalf("the idle stop was answered by request %d", idle.req)
	}
}

// A steer the agent takes (it records it) is consumed by the turn: it is
// not owed afterwards, and it does not run again, whether the turn then
// answers or is stopped.
func TestTakenSteerEndsWithTheTurn(t *testing.T) {
	for _, stopIt := range []bool{false, true} {
		t.Run(fmt.Sprintf("stopped=%v", stopIt), func(t *testing.T) {
			took, checked := make(chan struct{}), make(chan struct{})
			ag := &script{fn: func(ctx context.Context, tn agent.Turn, emit func(agent.Event)) error {
				select {
				case s := <-tn.Steer:
					tn.Record(agent.Msg{Role: "user", Content: s.Text, MessageID: s.MessageID})
					emit(agent.Event{Kind: agent.Text, Text: "took: " + s.Text})
				case <-ctx.Done():
					return ctx.Err()
				}
				close(took)
				// The turn runs on until the test has looked at what is
				// owed meanwhile.
				select {
				case <-checked:
				case <-ctx.Done():
				}
				if stopIt {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}}
			rg := newRig(t, ag)
			d := rg.join("phone")
			start := rg.send("start", d)
			d.next(is(core.EvAgentBusy))
			steered, err := rg.r.Steer(context.Background(), hub.Caller{Conn: d.conn, ReqID: 3}, lk, "go left")
			if !steered || err != nil {
				t.Fatalf("Steer: %v, %v", steered, err)
			}
			if echo := d.next(userText("go left")); echo.req != 3 {
				t.Fatalf("the steer's echo answered request %d", echo.req)
			}
			<-took
			// Consumed in the commit that recorded it: a crash from now on
			// must not answer it again.
			if owed := rg.owed(); len(owed) != 1 || owed[0].MessageID != start.ID {
				t.Fatalf("owed while the turn runs on: %+v, want its own row alone", owed)
			}
			close(checked)
			if stopIt {
				rg.r.Stop(hub.Caller{}, lk)
			}
			if stop := d.next(is(core.EvMessageStop)); stop.Message.Text != "took: go left" {
				t.Fatalf("the turn answered %+v", stop.Message)
			}
			d.next(is(core.EvAgentIdle))
			if got := ag.ran(); !slices.Equal(got, []string{"start"}) {
				t.Fatalf("the agent ran %v", got)
			}
			if owed := rg.owed(); len(owed) != 0 {
				t.Fatalf("turns still owed: %+v", owed)
			}
			conv, err := rg.st.Conversation(context.Background(), lk)
			if err != nil || len(conv) != 1 || conv[0].Content != "go left" {
				t.Fatalf("conversation %+v (%v)", conv, err)
			}
		})
	}
}

// A steer the turn ends without taking runs next, as a turn of its own.
func TestUntakenSteerRunsNext(t *testing.T) {
	proceed := make(chan struct{})
	ag := blockOn(proceed) // never reads its steering
	rg := newRig(t, ag)
	d := rg.join("phone")
	// With no turn running there is nothing to steer: the caller sends.
	if steered, err := rg.r.Steer(context.Background(), hub.Caller{}, lk, "too early"); steered || err != nil {
		t.Fatalf("Steer with no turn: %v, %v", steered, err)
	}
	rg.send("first", d)
	d.next(is(core.EvAgentBusy))
	if steered, err := rg.r.Steer(context.Background(), hub.Caller{Conn: d.conn}, lk, "second thought"); !steered || err != nil {
		t.Fatalf("Steer: %v, %v", steered, err)
	}
	d.next(userText("second thought"))
	if owed := rg.owed(); len(owed) != 2 {
		t.Fatalf("owed %+v, want the turn and the steer", owed)
	}
	for _, in := range []string{"first", "second thought"} {
		give(t, proceed)
		if stop := d.next(is(core.EvMessageStop)); stop.Message.Text != "re: "+in {
			t.Fatalf("answered %+v, want the answer to %q", stop.Message, in)
		}
		d.next(is(core.EvAgentIdle))
	}
	if got := ag.ran(); !slices.Equal(got, []string{"first", "second thought"}) {
		t.Fatalf("the agent ran %v", got)
	}
	if owed := rg.owed(); len(owed) != 0 {
		t.Fatalf("turns still owed: %+v", owed)
	}
}

// Each event kind the agent reports goes out as its event: what a device
// must not miss is committed (it has its cursor, its rows are in the
// store) before a device is handed it; the stream itself is ephemeral.
func TestRecorderCommitsDurableBeforePublish(t *testing.T) {
	tool := &core.Tool{Index: 1, Name: "terminal"}
	ag := &script{fn: func(_ context.Context, tn agent.Turn, emit func(agent.Event)) error {
		emit(agent.Event{Kind: agent.Text, Text: "Looking"})
		emit(agent.Event{Kind: agent.TextIsCommentary})
		emit(agent.Event{Kind: agent.ToolStart, Tool: tool})
		emit(agent.Event{Kind: agent.ToolProgress, Tool: tool})
		emit(agent.Event{Kind: agent.ToolEnd, Tool: tool})
		emit(agent.Event{Kind: agent.Commentary, Text: "found it"})
		emit(agent.Event{Kind: agent.Todos, Todos: []core.Todo{{ID: "1", Content: "read", Status: "completed"}}})
		emit(agent.Event{Kind: agent.Reasoning, Text: "thinking"})
		emit(agent.Event{Kind: agent.Text, Text: "Here it is"})
		tn.Record(agent.Msg{Role: "assistant", Content: "Here it is"})
		emit(agent.Event{Kind: agent.Usage, Model: "vendor/model-x", Tokens: 12})
		return nil
	}}
	rg := newRig(t, ag)
	d := rg.join("phone")
	ctx := context.Background()
	var mu sync.Mutex
	var bad []string
	d.check = func(ev *core.Event) {
		fail := func(format string, args ...any) {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s: ", ev.Type)+fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		if ev.Type == core.EvReadReceipt && ev.Cursor == 0 {
			return // the sender's own receipt, sent to it alone
		}
		if !ev.Type.Durable() {
			if ev.Cursor != 0 {
				fail("ephemeral with cursor %d", ev.Cursor)
			}
			return
		}
		head, err := rg.st.OutboxHead(ctx)
		if ev.Cursor == 0 || err != nil || head < ev.Cursor {
			fail("handed out at cursor %d with the outbox at %d (%v)", ev.Cursor, head, err)
		}
		switch ev.Type {
		case core.EvMessageStart:
			if _, err := rg.st.Message(ctx, ev.StreamID); err != nil {
				fail("its message is not stored: %v", err)
			}
		case core.EvMessageStop:
			if ms, err := rg.st.Streaming(ctx); err != nil || len(ms) != 0 {
				fail("the reply still streams in the store: %v %v", ms, err)
			}
		}
	}
	rg.send("find it", d)
	var kinds []string
	for {
		g := d.next(nil)
		k := string(g.Type)
		if g.Text != "" {
			k += " " + g.Text
		}
		kinds = append(kinds, k)
		if g.Type == core.EvMessageStop {
			if m := g.Message; m.Text != "Here it is" || m.Model != "vendor/model-x" || m.Tokens != 12 ||
				m.Runtime == nil || m.Runtime.Model != "model-x" || m.Reasoning != "" {
				t.Errorf("the reply is %+v", m)
			}
		}
		if g.Type == core.EvAgentIdle {
			break
		}
	}
	want := []string{"message", "read.receipt", "agent.busy", "typing", "message.start", "message.update Looking",
		"message.update", "commentary Looking", "tool.start", "tool.progress", "tool.end", "commentary found it",
		"todo.update", "message.update Here it is", "message.stop", "typing", "agent.idle"}
	if !slices.Equal(kinds, want) {
		t.Errorf("events\n%q\nwant\n%q", kinds, want)
	}
	mu.Lock()
	for _, b := range bad {
		t.Error(b)
	}
	mu.Unlock()
	if conv, err := rg.st.Conversation(ctx, lk); err != nil || len(conv) != 1 {
		t.Fatalf("conversation %+v (%v)", conv, err)
	}
}

// A device joining mid-turn is shown the stream so far, then the live
// events, in an order that makes sense: never an update before its start.
// One joining after the reply's end is committed but before message.stop
// has gone out is shown no stream: its message.stop comes live.
func TestSnapshotLinesUpWithLiveEvents(t *testing.T) {
	step := make(chan struct{})
	ag := &script{fn: func(ctx context.Context, _ agent.Turn, emit func(agent.Event)) error {
		emit(agent.Event{Kind: agent.Text, Text: "hello "})
		emit(agent.Event{Kind: agent.Todos, Todos: []core.Todo{{ID: "1", Content: "greet", Status: "in_progress"}}})
		select {
		case <-step:
		case <-ctx.Done():
			return ctx.Err()
		}
		emit(agent.Event{Kind: agent.Text, Text: "world"})
		return nil
	}}
	rg := newRig(t, ag)
	a := rg.join("phone")
	rg.send("hi", a)
	a.next(is(core.EvTodo))

	b := rg.join("tablet")
	start := b.next(nil)
	if start.Type != core.EvMessageStart {
		t.Fatalf("the joining device's first event is %s", start.Type)
	}
	if up := b.next(nil); up.Type != core.EvMessageUpdate || up.StreamID != start.StreamID || up.Text != "hello " {
		t.Fatalf("then %s %q", up.Type, up.Text)
	}
	if td := b.next(nil); td.Type != core.EvTodo || len(td.Todos) != 1 {
		t.Fatalf("then %s", td.Type)
	}

	entered, release := rg.gate.holdNext(core.EvMessageStop)
	defer release()
	step <- struct{}{}
	if up := b.next(nil); up.Type != core.EvMessageUpdate || up.Text != "hello world" {
		t.Fatalf("the live update is %s %q", up.Type, up.Text)
	}
	<-entered // the reply is finished in the store; its message.stop waits
	c := rg.join("laptop")
	release()
	first := c.next(nil)
	if first.Type == core.EvTodo { // the list stays until /new
		first = c.next(nil)
	}
	if first.Type != core.EvMessageStop || first.Message.ID != start.StreamID {
		t.Fatalf("a device joining as the reply ended was shown %s first", first.Type)
	}
	if stop := b.next(nil); stop.Type != core.EvMessageStop || stop.Message.Text != "hello world" {
		t.Fatalf("the first joiner then got %s", stop.Type)
	}
}

// A cron job's run waits behind the person's turn running in its lane,
// runs as a turn of that lane (without steering), posts its answer
// through the host, and a second run of the job meanwhile collapses into
// the one waiting.
func TestCronTurnQueuesBehindPerson(t *testing.T) {
	proceed := make(chan struct{})
	inRun := make(chan struct{}, 2)
	ag := &script{fn: func(ctx context.Context, tn agent.Turn, emit func(agent.Event)) error {
		inRun <- struct{}{}
		if tn.Steer == nil { // a cron turn
			emit(agent.Event{Kind: agent.Text, Text: "cron says hi"})
			return nil
		}
		select {
		case <-proceed:
		case <-ctx.Done():
			return ctx.Err()
		}
		emit(agent.Event{Kind: agent.Text, Text: "re: " + tn.Input})
		return nil
	}}
	rg := newRig(t, ag)
	d := rg.join("phone")
	rg.send("person", d)
	<-inRun
	ctx := context.Background()
	j := store.CronJob{ID: "cron_1", Name: "daily", Prompt: "say hi", ChatID: lk.ChatID}
	done := make(chan error, 2)
	for range 2 {
		if err := rg.r.EnqueueCron(ctx, lk, j, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	if running, queued := rg.r.Status(lk); !running || queued != 1 {
		t.Fatalf("status: running %v, %d queued; want the cron run waiting alone", running, queued)
	}
	if got := ag.ran(); !slices.Equal(got, []string{"person"}) {
		t.Fatalf("the agent ran %v before the person's turn ended", got)
	}
	give(t, proceed)
	if stop := d.next(is(core.EvMessageStop)); stop.Message.Text != "re: person" {
		t.Fatalf("the person's turn answered %+v", stop.Message)
	}
	d.next(is(core.EvAgentIdle))
	if busy := d.next(is(core.EvAgentBusy)); busy.Reason != "cron" {
		t.Fatalf("the cron turn started with agent.busy %q", busy.Reason)
	}
	if post := d.next(is(core.EvMessage)); post.Message.Role != core.RoleCron || post.Message.Text != "cron says hi" {
		t.Fatalf("the cron turn posted %+v", post.Message)
	}
	d.next(is(core.EvAgentIdle))
	if err := <-done; err != nil {
		t.Fatalf("the cron run's outcome: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the collapsed run had an outcome of its own: %v", err)
	default:
	}
	if got := ag.ran(); !slices.Equal(got, []string{"person", "say hi"}) {
		t.Fatalf("the agent ran %v", got)
	}
	if owed := rg.owed(); len(owed) != 0 {
		t.Fatalf("turns still owed: %+v", owed)
	}
}
