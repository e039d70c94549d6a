package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/voice"
)

// Voice out: in a lane with /voice on, a finished reply's text is spoken
// through the TTS endpoint in sentence pieces (voice.Splitter), each
// piece's audio stored in the media store, offered (media.offer) and
// listed in the reply's media: Iris devices get attachments of the final
// message, Hermes Mobile phones media of kind voice. The pieces are spoken
// once the agent is done and before message.stop, so the final message
// carries them all; speaking as the text streams is not done yet. A
// failure costs only the audio: the reply goes as text, and the lane is
// told why.

// Speaker speaks text (voice.TTS).
type Speaker interface {
	Speak(ctx context.Context, text string) (audio []byte, mimeType, ext string, err error)
}

// Bounds of one spoken reply: what a long reply can make the gateway ask
// for and store.
const (
	MaxSpokenPieces = 8
	MaxSpokenBytes  = 32 << 20
)

// speakReply speaks text as audio files tied to the reply messageID. It
// returns the files stored, and what went wrong after them (the text
// beyond a bound is left unspoken, and said).
func (g *Gateway) speakReply(ctx context.Context, lk core.Lane, messageID, text string) ([]core.Media, error) {
	if g.cfg.TTS == nil || g.cfg.Media == nil {
		return nil, nil
	}
	sp := voice.Splitter{MinPiece: 200}
	pieces := append(sp.Add(text), sp.Flush())
	var out []core.Media
	total := 0
	for i, p := range pieces {
		if p == "" {
			continue
		}
		if len(out) == MaxSpokenPieces {
			return out, fmt.Errorf("the reply is longer than %d spoken pieces; the rest is text only", MaxSpokenPieces)
		}
		audio, mimeType, ext, err := g.cfg.TTS.Speak(ctx, p)
		if err != nil {
			return out, err
		}
		if total += len(audio); total > MaxSpokenBytes {
			return out, fmt.Errorf("the reply's speech is over %d MiB; the rest is text only", MaxSpokenBytes>>20)
		}
		m, err := g.storeSpeech(ctx, lk, messageID, fmt.Sprintf("reply-%d.%s", i+1, ext), mimeType, audio)
		if err != nil {
			return out, fmt.Errorf("storing the speech: %w", err)
		}
		out = append(out, m)
	}
	return out, nil
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
				err = errors.New("the reply was deleted")
			}
			return err
		}, &core.Event{Type: core.EvMediaOffer, Lane: lk, Media: &offer})
	})
	return m, err
}
