package voice

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakespeech"
)

func TestTranscribeSendsTheFormOpenAINames(t *testing.T) {
	fake := &fakespeech.STT{Key: "sk-1", Transcript: func(tr fakespeech.Transcription) string {
		rate, n, _ := fakespeech.ParseWAV(tr.File)
		if rate == 16000 && n == 8000 {
			return "  half a second of tone \n"
		}
		return "wrong audio"
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s, err := NewSTT(STTConfig{URL: srv.URL + "/v1", Model: "whisper-1", Key: "sk-1", Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	wav := fakespeech.WAV(16000, 8000)
	got, err := s.Transcribe(context.Background(), "voice.wav", "audio/wav", int64(len(wav)), bytes.NewReader(wav))
	if err != nil || got != "half a second of tone" {
		t.Fatalf("Transcribe = %q, %v", got, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "whisper-1" || r.Language != "en" || r.Format != "json" || r.Filename != "voice.wav" || r.ContentType != "audio/wav" || !bytes.Equal(r.File, wav) {
		t.Fatalf("the server got %+v", r)
	}
}

func TestTranscribeErrors(t *testing.T) {
	wav := fakespeech.WAV(8000, 100)
	run := func(t *testing.T, h http.Handler, cfg STTConfig, data []byte) error {
		t.Helper()
		srv := httptest.NewServer(h)
		defer srv.Close()
		cfg.URL = srv.URL + "/v1/audio/transcriptions"
		s, err := NewSTT(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Transcribe(context.Background(), "voice.wav", "audio/wav", int64(len(data)), bytes.NewReader(data))
		if err == nil {
			t.Fatal("no error")
		}
		return err
	}
	t.Run("wrong key: OpenAI's message", func(t *testing.T) {
		err := run(t, &fakespeech.STT{Key: "right"}, STTConfig{Key: "wrong"}, wav)
		if !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Incorrect API key provided.") {
			t.Fatal(err)
		}
	})
	t.Run("not audio: whisper.cpp's message", func(t *testing.T) {
		err := run(t, &fakespeech.STT{}, STTConfig{}, []byte("not a wav at all, just words"))
		if !strings.Contains(err.Error(), "failed to read audio data") {
			t.Fatal(err)
		}
	})
	t.Run("too large: refused before sending", func(t *testing.T) {
		fake := &fakespeech.STT{}
		err := run(t, fake, STTConfig{MaxUpload: 50}, wav)
		if !errors.Is(err, ErrTooLarge) || len(fake.Requests()) != 0 {
			t.Fatalf("%v, %d requests", err, len(fake.Requests()))
		}
	})
	t.Run("an answer without text", func(t *testing.T) {
		err := run(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"task":"transcribe"}`)) }), STTConfig{}, wav)
		if !strings.Contains(err.Error(), "without a transcript") {
			t.Fatal(err)
		}
	})
	t.Run("an endless answer is cut", func(t *testing.T) {
		err := run(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"text":"`))
			w.Write(bytes.Repeat([]byte("a"), maxSTTResponse+10))
		}), STTConfig{}, wav)
		if !strings.Contains(err.Error(), "larger than") {
			t.Fatal(err)
		}
	})
	t.Run("a hung server times out", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		err := run(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // then the server sees the client go
			select {
			case <-release:
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}), STTConfig{Timeout: 50 * time.Millisecond}, wav)
		if !strings.Contains(err.Error(), "did not answer within") {
			t.Fatal(err)
		}
	})
}

func TestEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080/v1":                       "http://127.0.0.1:8080/v1/audio/transcriptions",
		"http://127.0.0.1:8080/v1/":                      "http://127.0.0.1:8080/v1/audio/transcriptions",
		"https://api.openai.com/v1/audio/transcriptions": "https://api.openai.com/v1/audio/transcriptions",
	} {
		if got, err := endpoint(in, "/audio/transcriptions"); err != nil || got != want {
			t.Errorf("endpoint(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "ftp://x/v1", "127.0.0.1:8080"} {
		if _, err := NewSTT(STTConfig{URL: bad}); err == nil {
			t.Errorf("NewSTT(%q) took it", bad)
		}
	}
}
