package turn_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// The speaking worker, against the runner as the gateway runs it: the
// host's SpeakPiece is a recorder of what it is asked to speak, which
// can be held, so the tests see when each piece is asked for relative to
// the reply's stream.

// voiceOn sets /voice on in the rig's lane.
func (rg *rig) voiceOn() {
	rg.t.Helper()
	if err := rg.log.Commit(rg.ctx, func(tx store.Tx) error { return tx.SetLaneSettings(lk, record.LaneSettings{Voice: true}) }, nil); err != nil {
		rg.t.Fatal(err)
	}
}

// speaker records the pieces asked for; each waits for a value on its
// gate when gate is set.
type speaker struct {
	mu     sync.Mutex
	pieces []string
	asked  chan string
	gate   chan struct{}
	fail   func(n int) error
}

func newSpeaker() *speaker { return &speaker{asked: make(chan string, 64)} }

func (s *speaker) speak(ctx context.Context, _ string, n int, text string, budget int64) (core.Media, error) {
	s.asked <- text
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return core.Media{}, ctx.Err()
		}
	}
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return core.Media{}, err
		}
	}
	s.mu.Lock()
	s.pieces = append(s.pieces, text)
	s.mu.Unlock()
	return core.Media{ID: core.NewID("md_"), Kind: "audio", Mime: "audio/wav", Size: int64(len(text)), Filename: "reply.wav"}, nil
}

func (s *speaker) spoken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.pieces...)
}

func (s *speaker) nextAsked(t *testing.T) string {
	t.Helper()
	select {
	case p := <-s.asked:
		return p
	case <-time.After(wait):
		t.Fatal("no piece was asked for")
		return ""
	}
}

const (
	sentence1 = "The first sentence of the reply is long enough to be spoken on its own."
	sentence2 = "The second one comes after the model has paused for a while, as models do."
	sentence3 = "And the last one has no full stop at its end"
)

// TestSpeechStartsBeforeTheReplyEnds: the first sentence is asked for
// while the agent still holds its stream open; the pieces are spoken in
// order, the rest at the end, and the final message lists every piece;
// the speech's end is published before the message.stop.
func TestSpeechStartsBeforeTheReplyEnds(t *testing.T) {
	sp := newSpeaker()
	resume := make(chan struct{})
	a := &script{fn: func(ctx context.Context, _ agent.Turn, emit func(agent.Event)) error {
		emit(agent.Event{Kind: agent.Text, Text: sentence1[:30]})
		emit(agent.Event{Kind: agent.Text, Text: sentence1[30:] + " " + sentence2[:10]})
		select { // the stream stays open until the test has seen the first piece asked for
		case <-resume:
		case <-ctx.Done():
			return ctx.Err()
		}
		emit(agent.Event{Kind: agent.Text, Text: sentence2[10:] + " " + sentence3})
		return nil
	}}
	rg := newRig(t, a)
	rg.host.speak = sp.speak
	rg.voiceOn()
	d := rg.join("phone")
	rg.send("talk", nil)
	if p := sp.nextAsked(t); p != sentence1 {
		t.Fatalf("first piece %q", p)
	}
	close(resume)
	// The second piece may be twice as long as the first: the second
	// sentence alone is too short, and goes with the rest at the end.
	if p := sp.nextAsked(t); p != sentence2+" "+sentence3 {
		t.Fatalf("second piece %q", p)
	}
	var speechOn, speechOff bool
	stop := d.next(func(ev *core.Event) bool {
		switch {
		case ev.Type == core.EvSpeech && ev.On:
			speechOn = true
		case ev.Type == core.EvSpeech:
			speechOff = true
		}
		return ev.Type == core.EvMessageStop
	})
	if !speechOn || !speechOff {
		t.Fatalf("speech events before message.stop: on %v, off %v", speechOn, speechOff)
	}
	if m := stop.Message; len(m.Media) != 2 || m.Text != sentence1+" "+sentence2+" "+sentence3 {
		t.Fatalf("the final message: %q with %d files", m.Text, len(m.Media))
	}
}

// TestSpeechStopCancelsIt: a stop cancels the piece being spoken and
// those queued; the reply keeps its text, lists no audio, and the lane is
// told nothing of speech.
func TestSpeechStopCancelsIt(t *testing.T) {
	sp := newSpeaker()
	sp.gate = make(chan struct{}) // never opened: every request hangs until cancelled
	a := &script{fn: func(ctx context.Context, _ agent.Turn, emit func(agent.Event)) error {
		emit(agent.Event{Kind: agent.Text, Text: sentence1 + " " + sentence2 + " "})
		<-ctx.Done()
		return ctx.Err()
	}}
	rg := newRig(t, a)
	rg.host.speak = sp.speak
	rg.voiceOn()
	d := rg.join("phone")
	rg.send("talk", nil)
	sp.nextAsked(t)
	rg.r.Stop(hub.Caller{}, lk)
	var said []string
	stop := d.next(func(ev *core.Event) bool {
		if ev.Type == core.EvMessage && ev.Message.Role == core.RoleSystem {
			said = append(said, ev.Message.Text)
		}
		return ev.Type == core.EvMessageStop
	})
	if m := stop.Message; !m.Stopped || len(m.Media) != 0 || !strings.HasPrefix(m.Text, sentence1) {
		t.Fatalf("the stopped reply: %+v", m)
	}
	d.next(is(core.EvAgentIdle))
	if len(said) != 0 || len(sp.spoken()) != 0 {
		t.Fatalf("said %q, spoke %q", said, sp.spoken())
	}
}

// TestSpeechFailureStopsItOnce: the TTS failing at the second piece ends
// the reply's speech: the first piece stays listed, no third is asked
// for, the text is whole, and the lane is told why once, after the reply.
func TestSpeechFailureStopsItOnce(t *testing.T) {
	sp := newSpeaker()
	sp.fail = func(n int) error {
		if n == 2 {
			return errors.New("the text-to-speech server answered 500")
		}
		return nil
	}
	text := sentence1 + " " + sentence2 + " " + sentence1 + " " + sentence2 + " " + sentence3
	rg := newRig(t, &agent.Echo{})
	rg.host.speak = sp.speak
	rg.voiceOn()
	d := rg.join("phone")
	rg.send(text, nil)
	stop := d.next(is(core.EvMessageStop))
	if m := stop.Message; len(m.Media) != 1 || !strings.Contains(m.Text, sentence3) {
		t.Fatalf("the reply: %q with %d files", m.Text, len(m.Media))
	}
	note := d.next(is(core.EvMessage))
	if !strings.Contains(note.Message.Text, "could not be spoken: the text-to-speech server answered 500") {
		t.Fatalf("the lane was told %q", note.Message.Text)
	}
	d.next(is(core.EvAgentIdle))
	if n := len(sp.asked); n != 2 {
		t.Fatalf("%d pieces asked for, want 2 (none after the failure)", n)
	}
}

// TestSpeechBounded: a reply of many sentences is spoken in at most
// turn.MaxSpokenPieces pieces, each request within the bytes left, and
// the lane is told the rest is text.
func TestSpeechBounded(t *testing.T) {
	sp := newSpeaker()
	var budgets []int64
	var mu sync.Mutex
	inner := sp.speak
	rg := newRig(t, &agent.Echo{})
	rg.host.speak = func(ctx context.Context, id string, n int, text string, budget int64) (core.Media, error) {
		mu.Lock()
		budgets = append(budgets, budget)
		mu.Unlock()
		return inner(ctx, id, n, text, budget)
	}
	rg.voiceOn()
	d := rg.join("phone")
	rg.send(strings.Repeat(sentence1+" ", 200), nil)
	stop := d.next(is(core.EvMessageStop))
	if n := len(stop.Message.Media); n != turn.MaxSpokenPieces {
		t.Fatalf("%d pieces", n)
	}
	note := d.next(is(core.EvMessage))
	if !strings.Contains(note.Message.Text, "longer than 8 spoken pieces") {
		t.Fatalf("the lane was told %q", note.Message.Text)
	}
	mu.Lock()
	defer mu.Unlock()
	var used int64
	for i, b := range budgets {
		if b != turn.MaxSpokenBytes-used {
			t.Fatalf("piece %d was given %d bytes, %d were left", i+1, b, turn.MaxSpokenBytes-used)
		}
		used += int64(len(sp.spoken()[i]))
	}
	// The pieces grow: the first is one sentence, the last many.
	p := sp.spoken()
	if p[0] != sentence1 || len(p[7]) < 16*len(sentence1) {
		t.Fatalf("pieces of %d and %d characters", len(p[0]), len(p[7]))
	}
}

// TestSpeechOfTextThatWasNotTheReply: text that turns out to be the
// model's thinking aloud (commentary) is no longer cut into the reply's
// pieces: what was queued of it is not spoken.
func TestSpeechOfTextThatWasNotTheReply(t *testing.T) {
	sp := newSpeaker()
	sp.gate = make(chan struct{})
	a := &script{fn: func(ctx context.Context, _ agent.Turn, emit func(agent.Event)) error {
		emit(agent.Event{Kind: agent.Text, Text: sentence1 + " " + sentence2 + " " + sentence1 + " and"})
		sp.nextAsked(t) // the first piece is in flight, the second queued
		emit(agent.Event{Kind: agent.TextIsCommentary})
		close(sp.gate)
		emit(agent.Event{Kind: agent.Text, Text: sentence3})
		return nil
	}}
	rg := newRig(t, a)
	rg.host.speak = sp.speak
	rg.voiceOn()
	d := rg.join("phone")
	rg.send("talk", nil)
	stop := d.next(is(core.EvMessageStop))
	if got := sp.spoken(); len(got) != 2 || got[0] != sentence1 || got[1] != sentence3 || len(stop.Message.Media) != 2 {
		t.Fatalf("spoke %q; the reply lists %d files", got, len(stop.Message.Media))
	}
}

// TestSpeechOffOrUnavailable: /voice off asks for nothing; on, a gateway
// without TTS says nothing of speech.
func TestSpeechOffOrUnavailable(t *testing.T) {
	rg := newRig(t, &agent.Echo{})
	d := rg.join("phone")
	rg.send(sentence1+" "+sentence2, nil)
	rg.voiceOn() // the host has no speak: turn.ErrNoSpeech
	rg.send(sentence1+" "+sentence2, nil)
	for range 2 {
		d.next(is(core.EvAgentIdle))
	}
	for len(d.evs) > 0 {
		if ev := <-d.evs; ev.Type == core.EvSpeech || (ev.Type == core.EvMessage && ev.Message.Role == core.RoleSystem) {
			t.Fatalf("unexpected %s %+v", ev.Type, ev.Message)
		}
	}
}
