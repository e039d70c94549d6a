package bench

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/agent"
)

// nullAgent ends every turn at once without a word, so a message.send costs
// only what the gateway itself does around a turn.
type nullAgent struct{}

func (nullAgent) Name() string { return "bench-null" }

func (nullAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error { return nil }

// replyAgent answers every turn with one short piece of text, so each turn
// ends in a message.stop with a message_id devices must not miss.
type replyAgent struct{}

func (replyAgent) Name() string { return "bench-reply" }

func (replyAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	emit(agent.Event{Kind: agent.Text, Text: "ack"})
	return nil
}

// streamAgent streams a reply of events text events of chunk each, in a
// tight loop (rate 0) or paced at rate events per second, and records when
// it emitted each event, so a device's receive time of a message.update can
// be matched to the emission it shows: the update carries the full text so
// far, so its length tells the last event it includes.
type streamAgent struct {
	base time.Time // emission times are offsets from base

	mu       sync.Mutex
	plan     streamPlan
	emits    []time.Duration // emits[i]: when event i was handed to the gateway
	finished chan struct{}   // closed when the turn's events are all emitted
}

type streamPlan struct {
	events int
	rate   float64 // events per second; 0: as fast as the gateway takes them
	chunk  string
}

func (a *streamAgent) Name() string { return "bench-stream" }

// arm prepares the next turn; the caller then waits on the returned channel
// before reading emissions.
func (a *streamAgent) arm(p streamPlan) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.plan = p
	a.emits = make([]time.Duration, p.events)
	a.finished = make(chan struct{})
	return a.finished
}

// emitted returns the emission times of the last turn; call it once that
// turn's finished channel is closed.
func (a *streamAgent) emitted() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.emits
}

func (a *streamAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	a.mu.Lock()
	p, emits, finished := a.plan, a.emits, a.finished
	a.plan = streamPlan{}
	a.mu.Unlock()
	if finished == nil || p.events == 0 {
		emit(agent.Event{Kind: agent.Text, Text: "(no stream armed)"})
		return nil
	}
	defer close(finished)
	start := time.Now()
	for i := 0; i < p.events; i++ {
		if p.rate > 0 {
			due := start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		emits[i] = time.Since(a.base)
		emit(agent.Event{Kind: agent.Text, Text: p.chunk})
	}
	emit(agent.Event{Kind: agent.Usage, Model: "bench-stream", Tokens: p.events})
	return nil
}

// textOf makes a message text of about n bytes.
func textOf(prefix string, n int) string {
	const filler = " lorem ipsum dolor sit amet"
	var b strings.Builder
	b.WriteString(prefix)
	for b.Len() < n {
		b.WriteString(filler)
	}
	return b.String()[:max(n, len(prefix))]
}
