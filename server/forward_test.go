package server_test

// A device's picker answer and stop reach the replica that runs the
// lane's turn (issue 18): the turn's pickers live in that replica's
// memory, and a device connected to another one answers through the
// fleet (fleet.ForwardPick, ForwardStop over NATS).

import (
	"context"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// asksFirst asks the person's approval through the turn's Asker (the
// gateway's approval picker, as a model's dangerous tool call does), says
// the choice and ends.
type asksFirst struct{ chose chan string }

func (a *asksFirst) Name() string { return "asksfirst" }

func (a *asksFirst) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	choice, err := t.Asker.Approve(ctx, "rm -rf junk", "deletes files")
	if err != nil {
		return err
	}
	a.chose <- choice
	emit(agent.Event{Kind: agent.Text, Text: "chose " + choice})
	return nil
}

// fleetReplica makes a gateway one of several on one database and one
// NATS server. The lease outlives the test's waits: a stop must not need
// the holder's next renewal (TTL/3) to arrive.
func fleetReplica(t *testing.T, ag agent.Agent) func(*server.AppConfig) {
	ns := startNATS(t)
	url := pgtest.DB(t)
	return func(c *server.AppConfig) {
		c.Store, c.NATS, c.Agent = url, ns.ClientURL(), ag
		c.Replica, c.LeaseTTL, c.LeaseSweep = true, time.Minute, 50*time.Millisecond
	}
}

// The turn runs on A (its phone sent the message there); the tablet on B
// answers its approval picker, and the turn goes on with that choice.
func TestApprovalAnsweredThroughAnotherReplica(t *testing.T) {
	ag := &asksFirst{chose: make(chan string, 1)}
	rep := fleetReplica(t, ag)
	a, b := testgw.Start(t, rep), testgw.Start(t, rep)
	phone, tablet := a.Dial(t, "phone"), b.Dial(t, "tablet")
	send(t, phone, def, "clean up")
	f := tablet.Expect("picker.approval", nil)
	var p approval
	if err := f.Decode(&p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	// A choice that is not one of the picker's is dropped where the picker
	// is, as it is refused from a device of A's; the picker waits on. Then
	// a valid one (no reply on B: the picker is not B's).
	for _, v := range []string{"maybe", "once"} {
		if err := tablet.Send(ctx, "picker.select", client.Lane{}, map[string]any{"picker_id": p.PickerID, "value": v}); err != nil {
			t.Fatal(err)
		}
	}
	wantChoice(t, ag, "once")
	for _, d := range []*testgw.Device{phone, tablet} {
		if stop := d.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "chose once" {
			t.Fatalf("%s: message.stop %s", d.ID, stop.Raw)
		}
	}
	allTurnsEnded(t, a.App.Store)
}

func wantChoice(t *testing.T, ag *asksFirst, want string) {
	t.Helper()
	select {
	case got := <-ag.chose:
		if got != want {
			t.Fatalf("the turn got %q, want %q", got, want)
		}
	case <-time.After(2 * testgw.Wait):
		t.Fatal("the answer from B never reached the turn on A")
	}
}

// Hermes Mobile asks whether a card's picker still waits before it
// answers: on B, a picker A opened does. A card is its device's own: the
// phone is connected to both replicas (a connection through B made while
// the one through A has not yet timed out, as after a network change),
// sends through A and answers the card through B; the turn on A goes on,
// and the card closes on both connections (picker.closed, relayed from A).
func TestMobileCardAnsweredThroughAnotherReplica(t *testing.T) {
	ag := &asksFirst{chose: make(chan string, 1)}
	rep := fleetReplica(t, ag)
	a, b := mobileGW(t, rep), mobileGW(t, rep)
	pb, pa := connectPhone(t, b, "tel-1"), connectPhone(t, a, "tel-1")
	pa.send(text(seq("m"), "clean up"))
	card := pb.expect("prompt", nil)
	pa.expect("prompt", func(f mf) bool { return f.S("id") == card.S("id") })
	pb.send(map[string]any{"t": "prompt", "prompt_id": card.S("id"), "option_id": "once"})
	wantChoice(t, ag, "once")
	for _, p := range []*phone{pa, pb} {
		if d := p.expect("prompt_done", func(f mf) bool { return f.S("id") == card.S("id") }); d.B("expired") || d.S("option_id") != "once" {
			t.Fatalf("prompt_done %v", d)
		}
	}
	allTurnsEnded(t, a.App.Store)
}

// A stop sent through B ends the turn A runs at once, not at A's next
// lease renewal (a minute's lease: twenty seconds away).
func TestStopThroughAnotherReplicaOverNATS(t *testing.T) {
	held := &gate{release: make(chan struct{})}
	rep := fleetReplica(t, held)
	a, b := testgw.Start(t, rep), testgw.Start(t, rep)
	phone, tablet := a.Dial(t, "phone"), b.Dial(t, "tablet")
	send(t, phone, def, "long task")
	phone.Expect("message.update", nil)
	tablet.Expect("message.update", nil) // the turn runs, on A
	if idle := tablet.MustDo("agent.stop", def, map[string]any{}); idle.Type != "agent.idle" {
		t.Fatalf("agent.stop answered %s", idle.Raw)
	}
	for _, d := range []*testgw.Device{phone, tablet} {
		stop := d.Expect("message.stop", nil)
		if testgw.Str(t, stop, "final_text") != "on long task" {
			t.Fatalf("%s: message.stop %s", d.ID, stop.Raw)
		}
	}
	allTurnsEnded(t, a.App.Store)
	if texts, stopped := replies(t, a.App.Store, core.Lane{ChatID: "default"}); len(texts) != 1 || !stopped[0] {
		t.Fatalf("replies %q (stopped %v): want the one reply, stopped", texts, stopped)
	}
}

// A message sent through B while A runs the lane is answered on A; its
// sender on B gets the read.receipt when A takes it up (A says so over
// NATS), as it would from a lone gateway.
func TestReadReceiptThroughAnotherReplica(t *testing.T) {
	held := &gate{release: make(chan struct{})}
	rep := fleetReplica(t, held)
	a, b := testgw.Start(t, rep), testgw.Start(t, rep)
	phone, tablet := a.Dial(t, "phone"), b.Dial(t, "tablet")
	send(t, phone, def, "first")
	tablet.Expect("message.update", nil) // the turn runs, on A
	echo := tablet.MustDo("message.send", def, map[string]any{"text": "second"})
	id := testgw.Str(t, echo, "message_id")
	held.release <- struct{}{} // "first" ends; A takes "second" up
	tablet.Expect("read.receipt", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == id })
	held.release <- struct{}{}
	for _, d := range []*testgw.Device{phone, tablet} {
		d.Expect("message.stop", func(f client.Frame) bool { return testgw.Str(t, f, "final_text") == "on second" })
	}
	allTurnsEnded(t, a.App.Store)
}
