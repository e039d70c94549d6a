package main

import (
	"log/slog"
	"testing"
	"time"
)

// TestSpeechKey: the model's key goes to a speech endpoint on the model's
// own host only; another server gets none unless one is set for it.
func TestSpeechKey(t *testing.T) {
	a := &AgentFlags{BaseURL: "https://api.openai.com/v1", APIKey: "sk-model"}
	for _, tc := range []struct{ explicit, url, want string }{
		{"", "https://api.openai.com/v1", "sk-model"},
		{"", "http://127.0.0.1:8080/v1", ""},
		{"", "http://api.openai.com/v1", ""}, // not over plain http
		{"sk-stt", "http://127.0.0.1:8080/v1", "sk-stt"},
	} {
		if got := speechKey(tc.explicit, tc.url, a); got != tc.want {
			t.Errorf("speechKey(%q, %q) = %q, want %q", tc.explicit, tc.url, got, tc.want)
		}
	}
	s := parse(t, "serve", "--stt-url", "http://127.0.0.1:8080/v1").Serve
	if stt, err := s.VoiceFlags.transcriber(slog.New(slog.DiscardHandler), &s.AgentFlags); err != nil || stt == nil || stt.URL() != "http://127.0.0.1:8080/v1/audio/transcriptions" {
		t.Fatalf("transcriber: %v, %v", stt, err)
	}
	if s.VoiceFlags.TTSTimeout != time.Minute {
		t.Fatalf("--tts-timeout defaults to %s", s.VoiceFlags.TTSTimeout)
	}
	if got := parse(t, "serve", "--tts-timeout", "5s").Serve.VoiceFlags.TTSTimeout; got != 5*time.Second {
		t.Fatalf("--tts-timeout 5s gave %s", got)
	}
}
