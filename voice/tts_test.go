package voice

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakespeech"
)

func TestSpeakReturnsTheServersAudio(t *testing.T) {
	fake := &fakespeech.TTS{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s, err := NewTTS(TTSConfig{URL: srv.URL + "/v1", Model: "tts-1", Voice: "nova", Format: "wav"})
	if err != nil {
		t.Fatal(err)
	}
	audio, mt, ext, err := s.Speak(context.Background(), "Hello there.")
	if err != nil || mt != "audio/wav" || ext != "wav" {
		t.Fatalf("Speak: %s %s %v", mt, ext, err)
	}
	if rate, n, err := fakespeech.ParseWAV(audio); err != nil || rate != 24000 || n != 120 {
		t.Fatalf("the audio: %d Hz, %d samples, %v", rate, n, err)
	}
	if r := fake.Requests(); len(r) != 1 || r[0] != (fakespeech.Speech{Model: "tts-1", Input: "Hello there.", Voice: "nova", Format: "wav"}) {
		t.Fatalf("the server got %+v", r)
	}
	// Bounds: too much to say in one request, too much audio back.
	if _, _, _, err := s.Speak(context.Background(), strings.Repeat("a", MaxSpeechInput+1)); err == nil {
		t.Fatal("an input over the limit was sent")
	}
	small, _ := NewTTS(TTSConfig{URL: srv.URL + "/v1", Format: "wav", MaxAudio: 100})
	if _, _, _, err := small.Speak(context.Background(), "Hello there."); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized audio: %v", err)
	}
	// The server's refusal is said in its words.
	mp3, _ := NewTTS(TTSConfig{URL: srv.URL + "/v1", Format: "mp3"})
	if _, _, _, err := mp3.Speak(context.Background(), "Hi."); err == nil || !strings.Contains(err.Error(), "wav and opus only") {
		t.Fatalf("refused: %v", err)
	}
	if _, err := NewTTS(TTSConfig{URL: srv.URL, Format: "midi"}); err == nil {
		t.Fatal("a format OpenAI does not list was taken")
	}
}

func TestSplitterSpeaksSentencesAsTheyStream(t *testing.T) {
	s := Splitter{MinPiece: 10}
	var got []string
	for _, piece := range []string{"Hi. This is the first", " sentence. And here", " comes the second one! Tail"} {
		got = append(got, s.Add(piece)...)
	}
	want := []string{"Hi. This is the first sentence.", "And here comes the second one!"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("pieces %q", got)
	}
	if rest := s.Flush(); rest != "Tail" {
		t.Fatalf("flush %q", rest)
	}
	// No sentence end at all: cut at a space below the request limit.
	long := strings.Repeat("word ", MaxSpeechInput)
	pieces := s.Add(long)
	for _, p := range pieces {
		if n := len([]rune(p)); n > MaxSpeechInput || n == 0 {
			t.Fatalf("a piece of %d characters", n)
		}
	}
	if len(pieces) == 0 {
		t.Fatal("nothing cut from an endless sentence")
	}
}

// TestSplitterByTheCharacter: a reply streamed a character at a time is
// cut exactly where it is cut whole, the threshold growing between
// pieces as the speaking worker grows it.
func TestSplitterByTheCharacter(t *testing.T) {
	text := strings.Repeat("One short sentence. Then a longer one follows it here! ", 30) + "End"
	cut := func(step int) []string {
		s := Splitter{MinPiece: 20}
		var got []string
		r := []rune(text)
		for i := 0; i < len(r); i += step {
			for _, p := range s.Add(string(r[i:min(i+step, len(r))])) {
				got = append(got, p)
				s.MinPiece *= 2
			}
		}
		return append(got, s.Flush())
	}
	whole, byChar := cut(len(text)), cut(1)
	if len(byChar) < 4 || strings.Join(byChar, " ") != text {
		t.Fatalf("%d pieces: %q", len(byChar), byChar)
	}
	// Whole, every piece is cut at the first threshold; by the character,
	// each at its own.
	if len(whole) <= len(byChar) || len([]rune(byChar[0])) < 20 || len([]rune(byChar[1])) < 40 || len([]rune(byChar[2])) < 80 {
		t.Fatalf("pieces of %d, %d, %d characters (whole: %d pieces)", len(byChar[0]), len(byChar[1]), len(byChar[2]), len(whole))
	}
}

// A speech server that hangs is given up on after the timeout: the final
// message waits for the last pieces, so it must not wait long.
func TestSpeakTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s, err := NewTTS(TTSConfig{URL: srv.URL + "/v1", Format: "wav", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Speak(context.Background(), "Hello there."); err == nil || !strings.Contains(err.Error(), "did not answer within 50ms") {
		t.Fatalf("a hung server: %v", err)
	}
}
