package gateway

import (
	"bytes"
	"context"
	"fmt"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/store"
)

// Voice out: in a lane with /voice on, the reply is spoken in pieces as it
// streams (package turn cuts them and runs one speaking worker per turn;
// see gateway/turn/speech.go). Each piece is spoken here through the TTS
// endpoint, stored in the media store and offered at once (media.offer
// tied to the reply): Iris devices pull it while the reply still streams,
// Hermes Mobile phones get it as media of kind voice, and the final
// message lists every piece. A failure costs only the audio.

// Speaker speaks text (voice.TTS).
type Speaker interface {
	Speak(ctx context.Context, text string) (audio []byte, mimeType, ext string, err error)
}

// Bounds of one spoken reply (turn.MaxSpokenPieces, turn.MaxSpokenBytes).
const (
	MaxSpokenPieces = turn.MaxSpokenPieces
	MaxSpokenBytes  = turn.MaxSpokenBytes
)

// speakPiece speaks piece n of the reply messageID and stores and offers
// its audio, refused when it is over budget bytes. Without a TTS endpoint
// (or a media store to keep the audio in) it says so with
// turn.ErrNoSpeech.
func (g *Gateway) speakPiece(ctx context.Context, lk core.Lane, messageID string, n int, text string, budget int64) (core.Media, error) {
	if g.cfg.TTS == nil || g.cfg.Media == nil {
		return core.Media{}, turn.ErrNoSpeech
	}
	audio, mimeType, ext, err := g.cfg.TTS.Speak(ctx, text)
	if err != nil {
		return core.Media{}, err
	}
	if int64(len(audio)) > budget {
		return core.Media{}, fmt.Errorf("the reply's speech is over %d MiB; the rest is text only", MaxSpokenBytes>>20)
	}
	m, err := g.storeSpeech(ctx, lk, messageID, fmt.Sprintf("reply-%d.%s", n, ext), mimeType, audio)
	if err != nil {
		return m, fmt.Errorf("storing the speech: %w", err)
	}
	return m, nil
}

// storeSpeech stores one piece's audio, ties it to the reply and offers it.
func (g *Gateway) storeSpeech(ctx context.Context, lk core.Lane, messageID, filename, mimeType string, audio []byte) (core.Media, error) {
	b := g.cfg.Media.NewBatch()
	defer b.Abort(ctx)
	m, err := b.Add(ctx, filename, mimeType, bytes.NewReader(audio))
	if err != nil {
		return m, err
	}
	m.ID, m.MessageID = core.NewID("md_"), messageID
	offer := m
	err = b.Commit(ctx, func([]core.Media) error {
		return g.commit(ctx, func(tx store.Tx) error {
			if err := tx.PutBlob(m.SHA256, m.Size); err != nil {
				return err
			}
			ok, err := tx.InsertMedia(m, lk)
			if err == nil && !ok {
				// Deleted while it streamed: nothing to say.
				err = fmt.Errorf("the reply was deleted: %w", store.ErrNotFound)
			}
			return err
		}, &core.Event{Type: core.EvMediaOffer, Lane: lk, Media: &offer})
	})
	return m, err
}
