package voice

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Text to speech: POST /v1/audio/speech with {model, input, voice,
// response_format}, answered with the audio's bytes (OpenAI's API
// reference; Kokoro-FastAPI, openedai-speech and LocalAI copy it).

// Bounds of speech.
const (
	// MaxSpeechInput is OpenAI's limit on one request's input, in
	// characters: longer replies are spoken in pieces (Splitter).
	MaxSpeechInput = 4096
	// DefaultMaxAudio bounds one piece's audio: what a Hermes Mobile
	// phone takes in one file (8 MiB).
	DefaultMaxAudio = 8 << 20
)

// TTSConfig configures a text-to-speech endpoint.
type TTSConfig struct {
	URL      string // base (…/v1) or the full …/audio/speech address
	Model    string // tts-1, gpt-4o-mini-tts, kokoro…
	Voice    string // alloy, af_bella…
	Format   string // mp3, opus, aac, flac, wav, pcm
	Key      string
	Timeout  time.Duration // DefaultTimeout unless set
	MaxAudio int64         // DefaultMaxAudio unless set
	HTTP     *http.Client
}

// TTS is a text-to-speech client.
type TTS struct {
	cfg TTSConfig
	url string
}

// formats are the response formats OpenAI's reference lists, with the
// mime type of each.
var formats = map[string]string{
	"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/L16",
}

// NewTTS checks cfg and makes the client.
func NewTTS(cfg TTSConfig) (*TTS, error) {
	u, err := endpoint(cfg.URL, "/audio/speech")
	if err != nil {
		return nil, fmt.Errorf("--tts-url: %w", err)
	}
	if cfg.Model == "" {
		cfg.Model = "tts-1"
	}
	if cfg.Voice == "" {
		cfg.Voice = "alloy"
	}
	if cfg.Format == "" {
		cfg.Format = "opus"
	}
	if _, ok := formats[cfg.Format]; !ok {
		return nil, fmt.Errorf("--tts-format %q: want mp3, opus, aac, flac, wav or pcm", cfg.Format)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAudio <= 0 {
		cfg.MaxAudio = DefaultMaxAudio
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	return &TTS{cfg: cfg, url: u}, nil
}

// URL is the speech endpoint requests go to.
func (s *TTS) URL() string { return s.url }

// Speak returns text spoken: the audio's bytes, their mime type and a
// file extension. text longer than MaxSpeechInput is refused (split it).
func (s *TTS) Speak(ctx context.Context, text string) (audio []byte, mimeType, ext string, err error) {
	if n := utf8.RuneCountInString(text); n > MaxSpeechInput {
		return nil, "", "", fmt.Errorf("%d characters to speak, the limit of one request is %d", n, MaxSpeechInput)
	}
	body, _ := json.Marshal(map[string]string{"model": s.cfg.Model, "input": text, "voice": s.cfg.Voice, "response_format": s.cfg.Format})
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.Key)
	}
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, "", "", fmt.Errorf("the text-to-speech server did not answer within %s", s.cfg.Timeout)
		}
		return nil, "", "", fmt.Errorf("the text-to-speech server cannot be reached: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, "", "", statusError("text-to-speech", resp)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "text/") {
		// A 200 with words instead of sound is a proxy's or a wrong path's.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, "", "", fmt.Errorf("the text-to-speech server answered %s instead of audio: %s", ct, snippet(b))
	}
	audio, err = io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxAudio+1))
	if err != nil {
		return nil, "", "", fmt.Errorf("reading the speech: %w", err)
	}
	if int64(len(audio)) > s.cfg.MaxAudio {
		return nil, "", "", fmt.Errorf("the speech is larger than %d bytes", s.cfg.MaxAudio)
	}
	if len(audio) == 0 {
		return nil, "", "", fmt.Errorf("the text-to-speech server answered no audio")
	}
	ext = s.cfg.Format
	if ext == "opus" {
		ext = "ogg" // an Ogg container, as OpenAI sends it
	}
	return audio, formats[s.cfg.Format], ext, nil
}

// Splitter cuts a streamed reply into pieces to speak as they complete:
// at sentence ends once a piece has MinPiece characters, at a space
// before MaxSpeechInput whatever comes.
type Splitter struct {
	MinPiece int // 60 unless set; may grow between calls, never shrink
	buf      []rune
	// scanned is how far buf was searched for a sentence end: a reply
	// streamed in many small deltas is searched once, not once a delta.
	scanned int
}

// Add takes more of the reply and returns the pieces now complete.
func (s *Splitter) Add(text string) []string {
	s.buf = append(s.buf, []rune(text)...)
	var out []string
	for {
		p, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, p)
	}
}

// Flush returns what is left, at the reply's end.
func (s *Splitter) Flush() string {
	p := strings.TrimSpace(string(s.buf))
	s.buf, s.scanned = nil, 0
	return p
}

func (s *Splitter) next() (string, bool) {
	minPiece := s.MinPiece
	if minPiece <= 0 {
		minPiece = 60
	}
	cut := -1
	i := max(minPiece, s.scanned)
	for ; i < len(s.buf)-1 && i < MaxSpeechInput; i++ {
		if isSentenceEnd(s.buf[i]) && unicode.IsSpace(s.buf[i+1]) {
			cut = i + 1
			break
		}
	}
	s.scanned = i
	if cut < 0 && len(s.buf) > MaxSpeechInput {
		cut = MaxSpeechInput
		for i := MaxSpeechInput - 1; i > MaxSpeechInput/2; i-- {
			if unicode.IsSpace(s.buf[i]) {
				cut = i
				break
			}
		}
	}
	if cut < 0 {
		return "", false
	}
	p := strings.TrimSpace(string(s.buf[:cut]))
	s.buf, s.scanned = s.buf[cut:], 0
	if p == "" {
		return s.next()
	}
	return p, true
}

func isSentenceEnd(r rune) bool {
	switch r {
	case '.', '!', '?', '…', '。', '！', '？', '\n':
		return true
	}
	return false
}
