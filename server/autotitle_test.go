package server_test

// Auto-thread titles (gateway/autotitle.go): after the first reply in a
// thread minted for a message, the model is asked for a short title and
// the thread is renamed with channel.renamed. The model is the real model
// backend's endpoint, the fake OpenAI server, over HTTP; the devices are
// real WebSocket connections.

import (
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
)

// autoThread sends text with auto_thread in the default channel and
// returns the new thread's lane, once its turn has ended on d.
func autoThread(t *testing.T, d *testgw.Device, text string) (client.Lane, []client.Frame) {
	t.Helper()
	echo := d.MustDo("message.send", def, map[string]any{"text": text, "auto_thread": true})
	if !strings.HasPrefix(echo.ThreadID, "t_") {
		t.Fatalf("the echo %s carries no new thread", echo.Raw)
	}
	lane := client.Lane{ChatID: "default", ThreadID: echo.ThreadID}
	got := until(t, d, func(f client.Frame) bool { return f.Type == "agent.idle" && f.ThreadID == lane.ThreadID })
	return lane, got
}

func threadName(t *testing.T, d *testgw.Device, id string) string {
	t.Helper()
	c, ok := findChan(channels(t, d), id)
	if !ok {
		t.Fatalf("thread %s is not in the directory", id)
	}
	return c.Name
}

func TestAutoThreadTitle(t *testing.T) {
	r := agStart(t)
	a := r.dial("phone")
	b := r.dial("tablet")

	const question = "Plan the trip to Lisbon\nwith details, please: three days in May"
	const answer = "Here is a plan for three days in Lisbon in May: Alfama, Belém, Sintra."
	r.reply(answer)
	r.script(fakeopenai.Script{Chunks: fakeopenai.Text("**Lisbon in May: three days.**", 3)})
	lane, got := autoThread(t, a, question)
	if cr := agOne(t, got, "channel.created"); testgw.Str(t, cr, "name") != "Plan the trip to Lisbon" {
		t.Fatalf("the instant title is %s", cr.Raw)
	}
	for _, d := range []*testgw.Device{a, b} {
		rn := d.Expect("channel.renamed", is(t, "channel.renamed", "chat_id", lane.ThreadID))
		e := entry(t, rn)
		if e.Name != "Lisbon in May: three days" || e.Kind != "thread" || e.ParentChatID == nil || *e.ParentChatID != "default" || rn.ID != 0 {
			t.Fatalf("%s: the rename is %s", d.ID, rn.Raw)
		}
	}
	if n := threadName(t, a, lane.ThreadID); n != "Lisbon in May: three days" {
		t.Fatalf("the directory names the thread %q", n)
	}
	reqs := r.requests(2)
	title := reqs[1]
	if _, tools := title["tools"]; tools {
		t.Fatal("the title request offers the model tools")
	}
	if !agSaid(t, title, "system", "You name conversations") || !agSaid(t, title, "user", "three days in May") || !agSaid(t, title, "user", "Alfama, Belém, Sintra") {
		t.Fatalf("the title request is %v", title["messages"])
	}
	if title["model"] != agModel {
		t.Fatalf("the title came from %v, want the lane's model %s", title["model"], agModel)
	}

	t.Run("the next reply does not rename it again", func(t *testing.T) {
		a := a.In(t)
		r.reply("Noted.")
		agTurn(t, a, lane, "And a day trip?")
		a.Quiet("channel.renamed", 300*time.Millisecond)
		r.noMoreRequests(3)
	})

	t.Run("a person's rename wins over a late title", func(t *testing.T) {
		a := a.In(t)
		hold := make(chan struct{})
		r.reply("Fine.")
		r.script(fakeopenai.Script{Hold: hold, Chunks: fakeopenai.Text("Model title", 1)})
		lane, _ := autoThread(t, a, "Budget for the kitchen")
		r.requests(5) // the title request is out, and held
		mine := a.MustDo("channel.rename", client.Lane{ChatID: lane.ThreadID}, map[string]any{"name": "Kitchen money"})
		until(t, a, reply(mine.ID))
		close(hold)
		a.Quiet("channel.renamed", 300*time.Millisecond)
		if n := threadName(t, a, lane.ThreadID); n != "Kitchen money" {
			t.Fatalf("the thread is named %q after the late title", n)
		}
	})

	t.Run("a slow title does not hold the lane", func(t *testing.T) {
		a := a.In(t)
		hold := make(chan struct{})
		r.reply("Tuesday works.")
		r.script(fakeopenai.Script{Hold: hold, Chunks: fakeopenai.Text("Dentist appointment", 1)})
		lane, _ := autoThread(t, a, "When should I see the dentist")
		r.requests(7)
		r.reply("At ten.")
		agTurn(t, a, lane, "What time?") // answered while the title waits
		close(hold)
		rn := a.Expect("channel.renamed", is(t, "channel.renamed", "chat_id", lane.ThreadID))
		if n := entry(t, rn).Name; n != "Dentist appointment" {
			t.Fatalf("renamed to %q", n)
		}
	})

	t.Run("a failing model leaves the instant title", func(t *testing.T) {
		a := a.In(t)
		r.reply("Sure.")
		r.script(fakeopenai.Script{Status: 500}, fakeopenai.Script{Status: 500}) // the request and its retry
		lane, _ := autoThread(t, a, "Remind me about the plants")
		r.requests(11)
		a.Quiet("channel.renamed", 300*time.Millisecond)
		if n := threadName(t, a, lane.ThreadID); n != "Remind me about the plants" {
			t.Fatalf("the thread is named %q", n)
		}
		r.reply("Watered.")
		agTurn(t, a, lane, "Done?")
	})

	t.Run("a stopped reply asks for no title", func(t *testing.T) {
		a := a.In(t)
		hold := make(chan struct{})
		defer close(hold)
		r.script(fakeopenai.Script{Chunks: fakeopenai.Text("A long answer that never ends", 4), Hold: hold, HoldAfter: 2})
		echo := a.MustDo("message.send", def, map[string]any{"text": "Tell me everything", "auto_thread": true})
		lane := client.Lane{ChatID: "default", ThreadID: echo.ThreadID}
		a.Expect("message.update", func(f client.Frame) bool { return f.ThreadID == lane.ThreadID })
		n := len(r.fake.Requests())
		a.MustDo("agent.stop", lane, nil)
		a.Quiet("channel.renamed", 300*time.Millisecond)
		r.noMoreRequests(n)
	})

	t.Run("shutdown ends a title request", func(t *testing.T) {
		a := a.In(t)
		hold := make(chan struct{}) // never released: the shutdown must end it
		r.reply("Okay.")
		r.script(fakeopenai.Script{Hold: hold, Chunks: fakeopenai.Text("Never", 1)})
		n := len(r.fake.Requests())
		autoThread(t, a, "One more thing")
		r.requests(n + 2) // the turn's, and the title's
		start := time.Now()
		r.g.Close()
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("the shutdown took %v with a title request out", d)
		}
	})
}

// The demo echo agent has no model to ask: its auto-threads keep their
// instant titles.
func TestAutoThreadTitleEcho(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	lane, _ := autoThread(t, a, "Plan the trip to Lisbon")
	a.Quiet("channel.renamed", 300*time.Millisecond)
	if n := threadName(t, a, lane.ThreadID); n != "Plan the trip to Lisbon" {
		t.Fatalf("the echo agent's thread is named %q", n)
	}
}
