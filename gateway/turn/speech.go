package turn

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/voice"
)

// Voice out as the reply streams. In a lane with /voice on, the recorder
// feeds the reply's text to a voice.Splitter as it arrives; each piece it
// cuts is queued for the turn's one speaking worker, which speaks the
// pieces in order, one request at a time (Host.SpeakPiece stores each and
// offers it at once), so the first audio reaches the devices while the
// model is still writing. The worker exists from the first piece until
// the reply's end: finish hands it the last piece and waits for it, so
// the final message lists every piece and no goroutine outlives the turn.
// That wait is only the tail of the speech: the final text never waits
// longer than it did when the whole reply was spoken after it ended. A
// stop cancels the request in flight and what is queued; a failure stops
// the reply's speech (its text goes on) and is said once, after it.

// Bounds of one spoken reply: what a long reply can make the gateway ask
// for and store. The queue holds at most MaxSpokenPieces, so the agent's
// goroutine never waits for speech.
const (
	MaxSpokenPieces = 8
	MaxSpokenBytes  = 32 << 20
)

// Piece lengths: the first piece closes at the first sentence end after
// firstPiece characters, so the voice starts soon; each later one may be
// twice as long as the one before (up to maxPieceMin), so the bounded
// pieces cover long replies while each plays long enough for the next to
// be made.
const (
	firstPiece  = 60
	maxPieceMin = voice.MaxSpeechInput / 2
)

// ErrNoSpeech is Host.SpeakPiece's answer when the gateway cannot speak
// (no TTS endpoint or media store): the reply stays text, silently.
var ErrNoSpeech = errors.New("no text-to-speech endpoint")

// speech is a reply's voice: the splitter (the agent's goroutine's) and
// the worker speaking what it cuts.
type speech struct {
	r      *Runner
	lk     core.Lane
	id     string // the reply
	ctx    context.Context
	cancel context.CancelFunc

	// The agent's goroutine's.
	split  voice.Splitter
	queued int
	over   error // a bound left the rest of the reply unspoken
	queue  chan piece
	done   chan struct{} // closed when the worker ends; nil before it starts

	// gen counts the times the text so far stopped being the reply (it
	// was commentary or reasoning): queued pieces of an older gen are not
	// spoken.
	gen    atomic.Int64
	failed atomic.Bool // the worker stopped speaking: cut no more pieces

	// The worker's, read once done is closed.
	spoken []core.Media
	err    error
}

type piece struct {
	text string
	gen  int64
}

// newSpeech prepares the voice of the reply id; ctx is the turn's, so a
// stop cancels the request in flight.
func (r *Runner) newSpeech(ctx context.Context, lk core.Lane, id string) *speech {
	ctx, cancel := context.WithCancel(ctx)
	return &speech{r: r, lk: lk, id: id, ctx: ctx, cancel: cancel,
		split: voice.Splitter{MinPiece: firstPiece}, queue: make(chan piece, MaxSpokenPieces)}
}

// add takes more of the reply's text and queues the pieces it completes.
func (s *speech) add(text string) {
	if s == nil || s.over != nil || s.failed.Load() {
		return
	}
	for _, p := range s.split.Add(text) {
		s.push(p)
	}
}

// reset drops the text so far: it was not the reply after all. Pieces
// spoken already stay with the reply; those queued are dropped.
func (s *speech) reset() {
	if s == nil {
		return
	}
	s.split.Flush()
	s.gen.Add(1)
}

func (s *speech) push(text string) {
	if s.over != nil {
		return
	}
	if s.queued == MaxSpokenPieces {
		s.over = fmt.Errorf("the reply is longer than %d spoken pieces; the rest is text only", MaxSpokenPieces)
		return
	}
	s.queued++
	s.split.MinPiece = min(s.split.MinPiece*2, maxPieceMin)
	if s.done == nil {
		s.done = make(chan struct{})
		go s.run()
	}
	s.queue <- piece{text, s.gen.Load()} // never blocks: the queue holds every piece allowed
}

// run speaks the queued pieces in order until the queue is closed. After
// a failure it only drains the queue.
func (s *speech) run() {
	defer close(s.done)
	var total int64
	for p := range s.queue {
		if s.err != nil || p.gen != s.gen.Load() {
			continue
		}
		m, err := s.r.host.SpeakPiece(s.ctx, s.lk, s.id, len(s.spoken)+1, p.text, MaxSpokenBytes-total)
		if err != nil {
			s.err = err
			s.failed.Store(true)
			continue
		}
		total += m.Size
		s.spoken = append(s.spoken, m)
		if len(s.spoken) == 1 {
			// After the first piece's offer, not before: a gateway that
			// cannot speak says nothing of speech at all.
			s.r.c.Publish(&core.Event{Type: core.EvSpeech, Lane: s.lk, StreamID: s.id, On: true})
		}
	}
}

// end finishes the reply's voice: the rest of the text is spoken and
// waited for, or, for a reply the turn did not finish (stopped, failed),
// what is queued or in flight is cancelled. It returns the pieces stored,
// and what the lane must be told of the speech (nil: nothing).
func (s *speech) end(stopped bool) ([]core.Media, error) {
	if s == nil {
		return nil, nil
	}
	defer s.cancel()
	if stopped {
		s.cancel()
	} else if s.over == nil && !s.failed.Load() {
		if p := s.split.Flush(); p != "" {
			s.push(p)
		}
	}
	if s.done == nil { // nothing was cut to speak
		return nil, s.over
	}
	close(s.queue)
	<-s.done
	if len(s.spoken) > 0 {
		s.r.c.Publish(&core.Event{Type: core.EvSpeech, Lane: s.lk, StreamID: s.id})
	}
	err := s.err
	switch {
	case stopped, errors.Is(err, ErrNoSpeech), errors.Is(err, context.Canceled), errors.Is(err, store.ErrNotFound):
		// Asked for, not configured, or the reply is gone: nothing to say.
		return s.spoken, nil
	case err == nil:
		err = s.over
	}
	return s.spoken, err
}
