package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

var def = client.Lane{ChatID: "default"}

func TestHelloAndTurn(t *testing.T) { testHelloAndTurn(t) }

func testHelloAndTurn(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, on...)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	w := a.HelloAck()
	if len(w.Channels) != 1 {
		t.Fatalf("channels = %d, want the default channel", len(w.Channels))
	}
	a.Expect("status", nil)
	b.Expect("status", nil)

	echo := a.MustDo("message.send", def, map[string]any{"text": "hello there world"})
	if echo.Type != "message" || testgw.Str(t, echo, "role") != "user" {
		t.Fatalf("echo = %s", echo.Raw)
	}
	id := testgw.Str(t, echo, "message_id")
	a.Expect("read.receipt", func(f client.Frame) bool { return testgw.Str(t, f, "message_id") == id })
	for _, d := range []*testgw.Device{a, b} {
		d.Expect("agent.busy", nil)
		d.Expect("typing", nil)
		d.Expect("message.start", nil)
		stop := d.Expect("message.stop", nil)
		if got := testgw.Str(t, stop, "final_text"); got != "hello there world" {
			t.Errorf("%s: final_text = %q", d.ID, got)
		}
		d.Expect("agent.idle", nil)
	}
}

// turnOrder is the frames of one turn in the order a device gets them.
var turnOrder = []string{"message", "agent.busy", "typing", "message.start", "message.update", "message.stop", "typing", "agent.idle"}

func TestTurnFrames(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	const text = "one two  three\nfour"
	echo := a.MustDo("message.send", def, map[string]any{"text": text, "reply_to": "m_earlier"})
	msgID := testgw.Str(t, echo, "message_id")

	for _, d := range []*testgw.Device{a, b} {
		got := until(t, d, func(f client.Frame) bool { return f.Type == "agent.idle" })
		var seq []string
		var streamID, last string
		receipts := 0
		for _, f := range got {
			if f.Type == "status" {
				continue
			}
			if f.ChatID != "default" || f.ThreadID != "" || f.Cursor != 0 {
				t.Errorf("%s: %s frame with lane %q/%q cursor %d", d.ID, f.Type, f.ChatID, f.ThreadID, f.Cursor)
			}
			p := testgw.P(t, f)
			switch f.Type {
			case "message":
				if p["message_id"] != msgID || p["role"] != "user" || p["text"] != text || p["reply_to"] != "m_earlier" {
					t.Errorf("%s: echo %s", d.ID, f.Raw)
				}
				if wantID := map[*testgw.Device]int64{a: echo.ID}[d]; f.ID != wantID {
					t.Errorf("%s: echo id %d, want %d (only the sender's copy carries it)", d.ID, f.ID, wantID)
				}
			case "read.receipt":
				receipts++
				if d != a || p["message_id"] != msgID {
					t.Errorf("%s: %s", d.ID, f.Raw)
				}
				continue // its place relative to the broadcast frames is not fixed
			case "agent.busy":
				if p["reason"] != "processing" {
					t.Errorf("%s: %s", d.ID, f.Raw)
				}
			case "typing":
				want := len(seq) < 4
				if p["on"] != want {
					t.Errorf("%s: typing %s, want on=%v", d.ID, f.Raw, want)
				}
			case "message.start":
				streamID, _ = p["message_id"].(string)
				if p["role"] != "assistant" || !strings.HasPrefix(streamID, "m_") || streamID == msgID {
					t.Errorf("%s: %s", d.ID, f.Raw)
				}
			case "message.update":
				cur, _ := p["text"].(string)
				if p["message_id"] != streamID || !strings.HasPrefix(cur, last) || !strings.HasPrefix(text, cur) {
					t.Errorf("%s: update %q after %q: not the full text so far", d.ID, cur, last)
				}
				last = cur
				if seq[len(seq)-1] == "message.update" {
					continue
				}
			case "message.stop":
				if p["message_id"] != streamID || p["final_text"] != text {
					t.Errorf("%s: %s", d.ID, f.Raw)
				}
				if m, _ := p["model"].(string); !strings.Contains(m, "echo") {
					t.Errorf("%s: model %q does not say it is the echo agent", d.ID, m)
				}
				rt, _ := p["runtime"].(map[string]any)
				if lat, ok := rt["latency"].(float64); !ok || lat <= 0 {
					t.Errorf("%s: runtime %v lacks the latency", d.ID, rt)
				}
				if m, _ := rt["model"].(string); !strings.Contains(m, "echo") {
					t.Errorf("%s: runtime.model %q", d.ID, m)
				}
				if ts, _ := p["ts"].(float64); ts <= 0 {
					t.Errorf("%s: message.stop without ts", d.ID)
				}
			}
			seq = append(seq, f.Type)
		}
		if strings.Join(seq, ",") != strings.Join(turnOrder, ",") {
			t.Errorf("%s: frames %v, want %v", d.ID, seq, turnOrder)
		}
		if last != text {
			t.Errorf("%s: last update %q, want the whole text", d.ID, last)
		}
		if want := map[*testgw.Device]int{a: 1}[d]; receipts != want {
			t.Errorf("%s: %d read receipts, want %d", d.ID, receipts, want)
		}
	}
	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 2 || h.Messages[0].MessageID != msgID || h.Messages[1].Role != "assistant" || h.Messages[1].Text != text {
		t.Fatalf("history = %+v", h)
	}
}

func TestSendRefused(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	for _, tc := range []struct {
		name    string
		lane    client.Lane
		payload map[string]any
		code    string
	}{
		{"empty text", def, map[string]any{"text": "   "}, "unsupported"},
		{"unknown chat", client.Lane{ChatID: "chan_nope"}, map[string]any{"text": "hi"}, "not_found"},
		{"unknown thread", client.Lane{ChatID: "default", ThreadID: "t_nope"}, map[string]any{"text": "hi"}, "not_found"},
		{"text too long", def, map[string]any{"text": strings.Repeat("x", 64<<10+1)}, "unsupported"},
		{"unknown media ref", def, map[string]any{"text": "look", "media_refs": []string{"mu_1"}}, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.In(t)
			_, err := a.Do("message.send", tc.lane, tc.payload)
			wantCode(t, err, tc.code)
		})
	}
	none(t, "phone", barrier(t, a), func(f client.Frame) bool { return f.Type == "message" || f.Type == "agent.busy" })
}

// startOf matches the message.start of the lane's stream.
func startIn(lane client.Lane) func(client.Frame) bool {
	return func(f client.Frame) bool {
		return f.Type == "message.start" && f.ChatID == lane.ChatID && f.ThreadID == lane.ThreadID
	}
}

func TestLaneQueuesTurns(t *testing.T) {
	g := testgw.Start(t, slowEcho(20*time.Millisecond))
	a := g.Dial(t, "phone")
	long := words(200)
	send(t, a, def, long)
	first := a.Expect("message.start", nil)
	firstID := testgw.Str(t, first, "message_id")

	// Sent while the first turn runs: echoed at once, run after it.
	second := send(t, a, def, "and then this")
	third := send(t, a, def, "and finally this")
	idle := a.MustDo("agent.stop", def, nil) // ends the long turn early
	if idle.Type != "agent.idle" {
		t.Fatalf("agent.stop answered with %s", idle.Raw)
	}
	got := until(t, a, func(f client.Frame) bool {
		return f.Type == "message.stop" && testgw.Str(t, f, "final_text") == "and finally this"
	})
	var seq []string
	for _, f := range got {
		switch f.Type {
		case "message.start", "message.stop":
			seq = append(seq, f.Type+":"+testgw.Str(t, f, "message_id"))
		case "read.receipt":
			seq = append(seq, "receipt:"+testgw.Str(t, f, "message_id"))
		}
	}
	// Each turn starts after the previous one stopped, in the order sent.
	if len(seq) != 7 || seq[0] != "message.stop:"+firstID || seq[1] != "receipt:"+second ||
		seq[3] != "message.stop:"+strings.TrimPrefix(seq[2], "message.start:") || seq[4] != "receipt:"+third ||
		seq[6] != "message.stop:"+strings.TrimPrefix(seq[5], "message.start:") {
		t.Fatalf("sequence %v", seq)
	}
}

func TestLanesRunConcurrently(t *testing.T) {
	g := testgw.Start(t, slowEcho(20*time.Millisecond))
	a := g.Dial(t, "phone")
	c := createChannel(t, a, "Work", "")
	th := createChannel(t, a, "Side", "default")
	lanes := []client.Lane{def, {ChatID: c.ChatID}, {ChatID: "default", ThreadID: th.ChatID}}
	long := words(500) // ten seconds at least: each lane is still running when the next starts
	for _, l := range lanes {
		send(t, a, l, long)
		got := until(t, a, startIn(l))
		none(t, "phone", got, func(f client.Frame) bool { return f.Type == "message.stop" })
	}
	for _, l := range lanes {
		a.MustDo("agent.stop", l, nil)
	}
}

func TestAgentStop(t *testing.T) {
	g := testgw.Start(t, slowEcho(20*time.Millisecond))
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	long := words(500)
	send(t, a, def, long)
	a.Expect("message.update", nil)
	b.Expect("message.update", nil)

	idle := a.MustDo("agent.stop", def, map[string]any{})
	if idle.Type != "agent.idle" || idle.ChatID != "default" {
		t.Fatalf("agent.stop answered with %s", idle.Raw)
	}
	var partial string
	for _, d := range []*testgw.Device{a, b} {
		got := until(t, d, func(f client.Frame) bool { return f.Type == "agent.idle" })
		var stop client.Frame
		for _, f := range got {
			if f.Type == "message.stop" {
				stop = f
			}
		}
		if stop.Type == "" {
			t.Fatalf("%s: agent.idle before message.stop: %s", d.ID, typesOf(got))
		}
		partial = testgw.Str(t, stop, "final_text")
		if partial == "" || !strings.HasPrefix(long, partial) || partial == long {
			t.Fatalf("%s: final_text %q is not the partial text", d.ID, partial)
		}
		if last := got[len(got)-1]; d == a && last.ID != idle.ID || d == b && last.ID != 0 {
			t.Errorf("%s: agent.idle %s", d.ID, last.Raw)
		}
	}
	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 2 || h.Messages[1].Text != partial {
		t.Fatalf("history keeps %+v, want the partial reply %q", h.Messages, partial)
	}

	// With nothing running, the answer is an agent.idle at once.
	idle = a.MustDo("agent.stop", def, nil)
	if idle.Type != "agent.idle" {
		t.Fatalf("agent.stop answered with %s", idle.Raw)
	}
	_, err = a.Do("agent.stop", client.Lane{ChatID: "chan_nope"}, nil)
	wantCode(t, err, "not_found")
}

func TestAgentSteer(t *testing.T) {
	g := testgw.Start(t, slowEcho(20*time.Millisecond))
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	send(t, a, def, words(500))
	a.Expect("message.update", nil)

	echo := a.MustDo("agent.steer", def, map[string]any{"text": "focus on the errors"})
	if echo.Type != "message" || testgw.Str(t, echo, "role") != "user" || testgw.Str(t, echo, "text") != "focus on the errors" {
		t.Fatalf("agent.steer answered with %s", echo.Raw)
	}
	steerID := testgw.Str(t, echo, "message_id")
	// Everyone sees the person's words, then the agent taking them.
	for _, d := range []*testgw.Device{a, b} {
		got := until(t, d, is(t, "commentary", "text", "steered: focus on the errors"))
		seen := false
		for _, f := range got {
			if f.Type == "message" && testgw.Str(t, f, "message_id") == steerID {
				seen = true
			}
		}
		if !seen {
			t.Errorf("%s: the agent's commentary came before the steering message: %s", d.ID, typesOf(got))
		}
	}
	a.MustDo("agent.stop", def, nil)
	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, m := range h.Messages {
		kept = kept || m.MessageID == steerID && m.Role == "user"
	}
	if len(h.Messages) != 3 || !kept {
		t.Errorf("history = %+v, want the steering message kept", h.Messages)
	}
	_, err = a.Do("agent.steer", def, map[string]any{"text": " "})
	wantCode(t, err, "unsupported")
}

func TestSteerWithoutTurnSends(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "nothing runs"})
	if echo.Type != "message" {
		t.Fatalf("agent.steer answered with %s", echo.Raw)
	}
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "nothing runs" {
		t.Fatalf("turn %s", stop.Raw)
	}
}

func TestAutoThread(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	c := createChannel(t, a, "Work", "")
	side := createChannel(t, a, "Side", "default")

	t.Run("default flat lane", func(t *testing.T) {
		a, b := a.In(t), b.In(t)
		const text = "Plan the trip to Lisbon\nwith details"
		echo := a.MustDo("message.send", def, map[string]any{"text": text, "auto_thread": true})
		tid := echo.ThreadID
		if echo.ChatID != "default" || !strings.HasPrefix(tid, "t_") {
			t.Fatalf("echo %s does not carry a new thread", echo.Raw)
		}
		for _, d := range []*testgw.Device{a, b} {
			cr := d.Expect("channel.created", is(t, "channel.created", "chat_id", tid))
			e := entry(t, cr)
			if !e.Auto || e.Kind != "thread" || e.ParentChatID == nil || *e.ParentChatID != "default" || e.Name != "Plan the trip to Lisbon" || cr.ID != 0 {
				t.Errorf("%s: %s", d.ID, cr.Raw)
			}
			got := until(t, d, func(f client.Frame) bool { return f.Type == "agent.idle" })
			for _, f := range got {
				if f.Type != "status" && (f.ChatID != "default" || f.ThreadID != tid) {
					t.Errorf("%s: %s outside the new thread: %s", d.ID, f.Type, f.Raw)
				}
			}
		}
		h, err := history(t, a, client.Lane{ChatID: "default", ThreadID: tid}, nil)
		if err != nil || len(h.Messages) != 2 {
			t.Fatalf("thread history %+v, %v", h, err)
		}
		if h, _ := history(t, a, def, nil); len(h.Messages) != 0 {
			t.Errorf("the flat lane got %+v", h.Messages)
		}
	})
	for _, tc := range []struct {
		name string
		lane client.Lane
		text string
	}{
		{"another channel", client.Lane{ChatID: c.ChatID}, "no threads here"},
		{"slash command", def, "/status"},
		{"inside a thread", client.Lane{ChatID: "default", ThreadID: side.ChatID}, "already threaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.In(t)
			echo := a.MustDo("message.send", tc.lane, map[string]any{"text": tc.text, "auto_thread": true})
			if echo.ChatID != tc.lane.ChatID || echo.ThreadID != tc.lane.ThreadID {
				t.Fatalf("echo %s moved lanes", echo.Raw)
			}
			// A minted thread would have been announced before the echo.
			got := until(t, a, reply(echo.ID))
			none(t, "phone", got, func(f client.Frame) bool { return f.Type == "channel.created" })
			if strings.HasPrefix(tc.text, "/") { // a command: answered by the gateway, no turn
				a.Expect("message", func(f client.Frame) bool {
					return testgw.Str(t, f, "role") == "system" && f.ChatID == tc.lane.ChatID && f.ThreadID == tc.lane.ThreadID
				})
				return
			}
			a.Expect("agent.idle", func(f client.Frame) bool { return f.ChatID == tc.lane.ChatID && f.ThreadID == tc.lane.ThreadID })
		})
	}
}

// gate is an agent that answers "on <input>" and then holds the turn
// until released. It never reads steering.
type gate struct{ release chan struct{} }

func (g *gate) Name() string { return "gate" }

func (g *gate) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	emit(agent.Event{Kind: agent.Text, Text: "on " + t.Input})
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestSteerNotTakenRunsNext(t *testing.T) {
	ag := &gate{release: make(chan struct{})}
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent = ag })
	a := g.Dial(t, "phone")
	send(t, a, def, "first")
	a.Expect("message.update", nil)
	echo := a.MustDo("agent.steer", def, map[string]any{"text": "second"})
	steerID := testgw.Str(t, echo, "message_id")

	ag.release <- struct{}{} // the turn ends without having taken the steer
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "on first" {
		t.Fatalf("first turn: %s", stop.Raw)
	}
	// The steering message is not lost: it runs next.
	a.Expect("read.receipt", is(t, "read.receipt", "message_id", steerID))
	ag.release <- struct{}{}
	if stop := a.Expect("message.stop", nil); testgw.Str(t, stop, "final_text") != "on second" {
		t.Fatalf("second turn: %s", stop.Raw)
	}
	a.Expect("agent.idle", nil)
}
