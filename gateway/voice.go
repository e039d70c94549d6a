package gateway

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
)

// Voice in: a recording sent without words (a Hermes Mobile audio frame
// with no text of its own, an Iris upload of kind audio with an empty
// message) is transcribed before its message is stored, so the person's
// message carries the transcript beside the recording and the agent gets
// words. The device's request waits for it, bounded by the transcriber's
// timeout: Iris has no frame to edit a person's message afterwards, and a
// turn must not start on a message that has not said what it says.
// Nothing is lost when it fails: the message goes with the recording, and
// the lane is told why it has no transcript.

// Transcriber turns a recording into text (voice.STT).
type Transcriber interface {
	Transcribe(ctx context.Context, filename, mimeType string, size int64, r io.Reader) (string, error)
}

// noSTTNote is said once per lane and run when a recording arrives and no
// endpoint is configured.
const noSTTNote = "🎤 Voice messages are not transcribed: this gateway has no speech-to-text endpoint (irisgate serve --stt-url). The agent gets the recording as a file."

// voiceNotes remembers the lanes already told there is no transcriber.
type voiceNotes struct {
	mu   sync.Mutex
	told map[core.Lane]bool
}

// first reports whether lk has not been told yet, and marks it told. The
// map is bounded by the lanes of the directory.
func (v *voiceNotes) first(lk core.Lane) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.told[lk] {
		return false
	}
	if v.told == nil {
		v.told = make(map[core.Lane]bool)
	}
	v.told[lk] = true
	return true
}

// isAudio reports whether an upload is a recording to transcribe.
func isAudio(m core.Media) bool {
	return m.Kind == "audio" || m.Kind == "voice" || strings.HasPrefix(m.Mime, "audio/")
}

// transcribe returns the transcript of the first recording among a
// message's refs, and what the lane must be told (empty: nothing). It is
// called only for a message without text.
func (g *Gateway) transcribe(ctx context.Context, dev string, lk core.Lane, refs []string) (text, note string) {
	var rec core.Media
	found := false
	for _, r := range refs {
		m, err := g.st.Upload(ctx, dev, r)
		if err == nil && isAudio(m) {
			rec, found = m, true
			break
		}
	}
	if !found || g.cfg.Media == nil {
		return "", ""
	}
	if g.cfg.STT == nil {
		if g.voice.first(lk) {
			return "", noSTTNote
		}
		return "", ""
	}
	f, err := g.cfg.Media.Open(rec)
	if err != nil {
		g.log.Warn("voice: opening a recording", "err", err)
		return "", "🎤 The recording could not be read for transcription; the agent gets it as a file."
	}
	defer f.Close()
	text, err = g.cfg.STT.Transcribe(ctx, rec.Filename, rec.Mime, rec.Size, f)
	if err != nil {
		g.log.Warn("voice: transcription failed", "lane", lk.String(), "err", err)
		if errors.Is(err, context.Canceled) {
			return "", ""
		}
		return "", "🎤 The recording could not be transcribed (" + err.Error() + "); the agent gets it as a file."
	}
	if text == "" {
		return "", "🎤 The recording was transcribed as silence; the agent gets it as a file."
	}
	if len(text) > MaxTextBytes {
		text = text[:MaxTextBytes]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	return text, ""
}
