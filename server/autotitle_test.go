package server_test

// Auto-thread titles (gateway/autotitle.go): after the first reply in a
// thread minted for a message, the model is asked for a short title and
// the thread is renamed with channel.renamed. The model is the real model
// backend's endpoint, the fake OpenAI server, over HTTP; the devices are
// real WebSocket connections.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakehermes"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
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

// titlesDone waits until the gateway has no title request out (each has
// ended and published its rename, if it made one).
func titlesDone(t *testing.T, g *testgw.GW) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	if err := g.App.GW.TitlesDone(ctx); err != nil {
		t.Fatalf("the gateway's title requests did not end within %v", testgw.Wait)
	}
}

// noRename asserts that no title renames a thread: once the title work
// has ended, whatever it published for d is before a barrier's pong, or
// among the frames d got already (a title runs beside the turn's end, so
// its rename may come before the turn's agent.idle).
func noRename(t *testing.T, g *testgw.GW, d *testgw.Device, got []client.Frame) {
	t.Helper()
	titlesDone(t, g)
	none(t, d.ID, append(got, barrier(t, d)...), is(t, "channel.renamed"))
}

// renamed waits for thread id's rename on d, looking first among the
// frames d got already: it may have come before the turn's agent.idle.
func renamed(t *testing.T, d *testgw.Device, got []client.Frame, id string) client.Frame {
	t.Helper()
	match := is(t, "channel.renamed", "chat_id", id)
	for _, f := range got {
		if match(f) {
			return f
		}
	}
	return d.Expect("channel.renamed", match)
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
		var before []client.Frame
		if d == a {
			before = got // a's frames up to the turn's end; b's are all to come
		}
		rn := renamed(t, d, before, lane.ThreadID)
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
		noRename(t, r.g, a, agTurn(t, a, lane, "And a day trip?"))
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
		noRename(t, r.g, a, nil) // the title was held until now
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
		lane, got := autoThread(t, a, "Remind me about the plants")
		r.requests(11)
		noRename(t, r.g, a, got)
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
		a.MustDo("agent.stop", lane, nil) // answered by the turn's agent.idle
		noRename(t, r.g, a, nil)
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
		closed := make(chan struct{})
		go func() { defer close(closed); r.g.Close() }()
		// The fake holds the title request until the client hangs up, and
		// the title's own timeout (30 s) is past this wait: only the
		// shutdown can end it in time.
		titlesDone(t, r.g)
		select {
		case <-closed:
		case <-time.After(testgw.Wait):
			t.Fatalf("the gateway did not close within %v", testgw.Wait)
		}
	})
}

// The demo echo agent has no model to ask: its auto-threads keep their
// instant titles.
func TestAutoThreadTitleEcho(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	lane, got := autoThread(t, a, "Plan the trip to Lisbon")
	noRename(t, g, a, got)
	if n := threadName(t, a, lane.ThreadID); n != "Plan the trip to Lisbon" {
		t.Fatalf("the echo agent's thread is named %q", n)
	}
}

// A model behind a private CA (the fake on HTTPS, with a certificate only
// its client trusts): the model backend reaches it through the HTTP
// client it was given, and so do the titles, through the same client.
func TestAutoThreadTitleModelClient(t *testing.T) {
	fake := fakeopenai.NewTLS(t)
	hc := fake.Client()
	m, err := agent.NewModel(agent.ModelConfig{HTTPClient: hc, MaxRetries: -1, Providers: []agent.Provider{
		{ID: "private", BaseURL: fake.URL, APIKey: "k", Models: []agent.ModelInfo{{ID: "m", ContextLength: 1000}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent, c.ModelHTTPClient = m, hc })
	a := g.Dial(t, "phone")
	fake.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Take the 28 tram.", 2)}, fakeopenai.Script{Chunks: fakeopenai.Text("Tram to the castle", 1)})
	lane, got := autoThread(t, a, "How do I get to the castle")
	rn := renamed(t, a, got, lane.ThreadID)
	if n := entry(t, rn).Name; n != "Tram to the castle" {
		t.Fatalf("renamed to %q", n)
	}
}

// A Hermes lane's words go to Hermes only: a model configured beside it
// names its threads only when the owner turned that on (AutoTitleHermes,
// --auto-title-hermes).
func TestAutoThreadTitleHermes(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		hermes := fakehermes.New(t, fakehermes.Config{Key: hermesKey})
		hermes.Push(fakehermes.Script{Steps: []fakehermes.Step{fakehermes.Completed("Your notes are in ~/notes.", 10, 5)}})
		model := fakeopenai.New(t)
		model.Push(fakeopenai.Script{Chunks: fakeopenai.Text("Where the notes are", 1)})
		h, err := agent.NewHermes(agent.HermesConfig{URL: hermes.URL, Key: hermesKey, PollEvery: 10 * time.Millisecond, RetryBackoff: time.Millisecond, MaxRetries: 1})
		if err != nil {
			t.Fatal(err)
		}
		m, err := agent.NewModel(agent.ModelConfig{Providers: []agent.Provider{
			{ID: "cloud", BaseURL: model.URL, APIKey: "k", Models: []agent.ModelInfo{{ID: "m", ContextLength: 1000}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		both, err := agent.NewSwitch(h, m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		g := testgw.Start(t, func(c *server.AppConfig) { c.Agent, c.AutoTitleHermes = both, optIn })
		hermesAwaitRecovered(t)
		a := g.Dial(t, "phone")
		lane, got := autoThread(t, a, "Where did I put my notes")
		if !optIn {
			noRename(t, g, a, got)
			if n := len(model.Requests()); n != 0 {
				t.Fatalf("the model provider got %d requests about a Hermes lane nobody let it see", n)
			}
			if n := threadName(t, a, lane.ThreadID); n != "Where did I put my notes" {
				t.Fatalf("the thread is named %q", n)
			}
		} else {
			rn := renamed(t, a, got, lane.ThreadID)
			if n := entry(t, rn).Name; n != "Where the notes are" {
				t.Fatalf("opted in: renamed to %q", n)
			}
			reqs := model.Requests()
			if len(reqs) != 1 || !agSaid(t, reqs[0], "user", "Where did I put my notes") || !agSaid(t, reqs[0], "user", "Your notes are in ~/notes.") {
				t.Fatalf("opted in: the model got %v", reqs)
			}
		}
		g.Close()
	}
}
