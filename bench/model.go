package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/fakeopenai"

	"github.com/irisgate/irisgate/proto/irisv1"
)

// modelLanes is how many lanes the model-latency turns rotate over.
const modelLanes = 8

// modelTurn is what the model-latency scenario records of one turn.
type modelTurn struct {
	mu          sync.Mutex
	firstToken  time.Time // the fake server began writing the first text chunk
	firstEmit   time.Time // the backend handed the gateway its first text
	firstUpdate time.Time // the device read the turn's first message.update
	start       time.Time // the device read the reply's message.start
	stops       int
	idle        chan struct{}
}

// runModel measures what the gateway adds between a model's first token
// and a device's first message.update: a fake OpenAI-compatible server
// streams real SSE chunks to the real model backend (agent.NewModel, over
// loopback HTTP), and one device watches the lane.
func runModel(ctx context.Context, o *Options) (r Result) {
	turns, chunks := o.ModelTurns, o.ModelChunks
	r.Title = fmt.Sprintf("(h) Model latency: first token to first message.update, %d turns a phase", turns)
	fake := fakeopenai.NewServer()
	defer fake.Close()
	m, err := agent.NewModel(agent.ModelConfig{
		Providers: []agent.Provider{{ID: "fake", BaseURL: fake.URL, APIKey: "bench", Models: []agent.ModelInfo{{ID: "vendor/bench-model", ContextLength: 1 << 20}}}},
	})
	if err != nil {
		r.Err = err
		return r
	}
	var cur struct {
		sync.Mutex
		t *modelTurn
	}
	current := func() *modelTurn {
		cur.Lock()
		defer cur.Unlock()
		return cur.t
	}
	ag := &firstTextAgent{Agent: m, first: func(at time.Time) {
		if t := current(); t != nil {
			t.mu.Lock()
			if t.firstEmit.IsZero() {
				t.firstEmit = at
			}
			t.mu.Unlock()
		}
	}}
	g, err := startGateway(o, "model", ag, nil)
	if err != nil {
		r.Err = err
		return r
	}
	defer g.close()
	devs, err := dialMany(ctx, g.url, 1, 1, func(int) string { return "model-watcher" })
	if err != nil {
		r.Err = err
		return r
	}
	defer closeAll(devs)
	d := devs[0]
	// Turns rotate over a few lanes, so each conversation stays the size
	// of a short chat rather than hundreds of exchanges.
	lanes := []string{"default"}
	for i := 1; i < modelLanes; i++ {
		if err := g.app.GW.CreateChannel(ctx, gateway.Caller{}, fmt.Sprintf("model %d", i), core.KindChannel, ""); err != nil {
			r.Err = err
			return r
		}
	}
	chs, err := g.app.Store.Channels(ctx)
	if err != nil {
		r.Err = err
		return r
	}
	for _, c := range chs {
		if c.ChatID != "default" {
			lanes = append(lanes, c.ChatID)
		}
	}
	d.serve(func(b []byte) {
		t := current()
		if t == nil {
			return
		}
		switch string(frameType(b)) {
		case irisv1.TypeMessageStart:
			now := time.Now()
			t.mu.Lock()
			if t.start.IsZero() {
				t.start = now
			}
			t.mu.Unlock()
		case irisv1.TypeMessageUpdate:
			now := time.Now()
			t.mu.Lock()
			if t.firstUpdate.IsZero() {
				t.firstUpdate = now
			}
			t.mu.Unlock()
		case irisv1.TypeMessageStop:
			t.mu.Lock()
			t.stops++
			t.mu.Unlock()
		case irisv1.TypeAgentIdle:
			select {
			case t.idle <- struct{}{}:
			default:
			}
		}
	})

	text := strings.Repeat("token ", chunks)
	r.setup("Turns rotate over %d lanes (channels), one at a time. A fake OpenAI-compatible server (internal/fakeopenai)", len(lanes))
	r.setup("streams each reply as %d SSE text chunks (plus role, stop and usage chunks) to the real model backend over", chunks)
	r.setup("loopback HTTP; one device (raw WebSocket) watches the lanes; gateway in-process.")
	r.setup("Latency: the device's receipt of the turn's first message.update − the moment the fake began writing the first text chunk;")
	r.setup("it covers the backend's HTTP read and SSE decoding, the reply's message.start commit, hub, writer and WebSocket.")

	type phase struct {
		name string
		gap  time.Duration
	}
	phases := []phase{
		{fmt.Sprintf("paced, %v between chunks", o.ModelGap), o.ModelGap},
		{"burst, all chunks at once", 0},
	}
	n := 0
	for pi, ph := range phases {
		o.progress("model latency: %s, %d turns", ph.name, turns)
		var lat, backend, gw, start, after []time.Duration
		for range turns {
			if ctx.Err() != nil {
				r.Err = ctx.Err()
				return r
			}
			t := &modelTurn{idle: make(chan struct{}, 1)}
			cur.Lock()
			cur.t = t
			cur.Unlock()
			fake.Push(fakeopenai.Script{
				Chunks: fakeopenai.Text(text, chunks),
				Gap:    ph.gap,
				Sending: func(i int) {
					if i == 1 { // chunk 0 only names the role
						now := time.Now()
						t.mu.Lock()
						t.firstToken = now
						t.mu.Unlock()
					}
				},
			})
			if _, err := d.send(ctx, irisv1.TypeMessageSend, lanes[n%len(lanes)], fmt.Appendf(nil, `{"text":"turn %d"}`, n)); err != nil {
				r.Err = err
				return r
			}
			n++
			select {
			case <-t.idle:
			case <-d.done:
				r.Err = errors.New("the device was disconnected")
				return r
			case <-ctx.Done():
				r.Err = ctx.Err()
				return r
			case <-time.After(30 * time.Second):
				r.Err = fmt.Errorf("turn %d did not end within 30s", n)
				return r
			}
			t.mu.Lock()
			if t.stops != 1 || t.firstToken.IsZero() || t.firstUpdate.IsZero() || t.firstEmit.IsZero() {
				r.Lost++
			} else {
				lat = append(lat, t.firstUpdate.Sub(t.firstToken))
				backend = append(backend, t.firstEmit.Sub(t.firstToken))
				gw = append(gw, t.firstUpdate.Sub(t.firstEmit))
				if !t.start.IsZero() {
					start = append(start, t.start.Sub(t.firstEmit))
					after = append(after, t.firstUpdate.Sub(t.start))
				}
			}
			t.mu.Unlock()
		}
		slices.Sort(lat)
		slices.Sort(backend)
		slices.Sort(gw)
		slices.Sort(start)
		slices.Sort(after)
		p99 := pct(lat, 0.99)
		tag := ph.name
		r.fig(tag+": added latency p50", ms(pct(lat, 0.50)), "", nil)
		if pi == 0 {
			r.fig(tag+": added latency p99", ms(p99), "<= 2 ms", ptr(p99 <= 2*time.Millisecond))
		} else {
			r.fig(tag+": added latency p99", ms(p99), "", nil)
		}
		r.fig(tag+": added latency max", ms(pct(lat, 1)), "", nil)
		r.fig(tag+": model backend (HTTP, SSE), p50 / p99", ms(pct(backend, 0.5))+" / "+ms(pct(backend, 0.99)), "", nil)
		r.fig(tag+": gateway (start, hub, write), p50 / p99", ms(pct(gw, 0.5))+" / "+ms(pct(gw, 0.99)), "", nil)
		r.fig(tag+": — first text → message.start read, p50 / p99", ms(pct(start, 0.5))+" / "+ms(pct(start, 0.99)), "", nil)
		r.fig(tag+": — message.start → first update read, p50 / p99", ms(pct(after, 0.5))+" / "+ms(pct(after, 0.99)), "", nil)
	}
	r.check("turns without a first token, update or message.stop", fmt.Sprint(r.Lost), "0", r.Lost == 0)
	r.note("The paced phase is the target run: a model streams its tokens apart (one every %v is %d tokens/s, faster than hosted models stream).", o.ModelGap, int(time.Second/max(o.ModelGap, 1)))
	r.note("In the burst phase the fake writes every chunk at once, so the first update competes for the CPUs with decoding and publishing the rest of the reply: it shows that contention, not a model's pace.")
	r.note("The gateway's share is the reply's start (its row is committed before message.start goes out), the hub, the connection's writer and the device's WebSocket read, each waking from idle.")
	r.note("The first turn includes the model client's first HTTP connection; the figures are over all turns.")
	r.Notes = append(r.Notes, g.logs.summary()...)
	return r
}

// firstTextAgent reports when its backend hands the gateway a turn's
// first text, splitting the latency between backend and gateway.
type firstTextAgent struct {
	agent.Agent
	first func(time.Time)
}

func (a *firstTextAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	seen := false
	return a.Agent.Run(ctx, t, func(e agent.Event) {
		if e.Kind == agent.Text && !seen {
			seen = true
			a.first(time.Now())
		}
		emit(e)
	})
}
