package main

import (
	"log/slog"
	"net/url"
	"time"

	"github.com/irisgate/irisgate/voice"
)

// VoiceFlags configure speech: recordings transcribed through an
// OpenAI-compatible /v1/audio/transcriptions endpoint (README: "Voice").
type VoiceFlags struct {
	STTURL      string        `name:"stt-url" help:"OpenAI-compatible speech-to-text endpoint (base like http://127.0.0.1:8080/v1, or the full …/audio/transcriptions URL): voice messages are transcribed through it. None: the agent gets recordings as files." env:"IRISGATE_STT_URL" group:"Voice"`
	STTModel    string        `name:"stt-model" help:"Transcription model (whisper-1, gpt-4o-mini-transcribe, Systran/faster-whisper-small…; whisper.cpp ignores it)." default:"whisper-1" env:"IRISGATE_STT_MODEL" group:"Voice"`
	STTKey      string        `name:"stt-key" help:"API key of the speech endpoints (default: --api-key when they are on the model's host; local servers need none)." env:"IRISGATE_STT_KEY" group:"Voice"`
	STTLanguage string        `name:"stt-language" help:"ISO-639-1 language of the recordings (empty: the server detects it)." env:"IRISGATE_STT_LANGUAGE" group:"Voice"`
	TTSURL      string        `name:"tts-url" help:"OpenAI-compatible text-to-speech endpoint (base like http://127.0.0.1:8880/v1, or the full …/audio/speech URL): replies in chats with /voice on are spoken through it. Key: --stt-key's rule." env:"IRISGATE_TTS_URL" group:"Voice"`
	TTSModel    string        `name:"tts-model" help:"Speech model (tts-1, gpt-4o-mini-tts, kokoro…)." default:"tts-1" env:"IRISGATE_TTS_MODEL" group:"Voice"`
	TTSVoice    string        `name:"tts-voice" help:"Voice of the replies (alloy, af_bella…)." default:"alloy" env:"IRISGATE_TTS_VOICE" group:"Voice"`
	TTSFormat   string        `name:"tts-format" help:"Audio format of the replies: mp3, opus, aac, flac, wav or pcm." default:"opus" env:"IRISGATE_TTS_FORMAT" group:"Voice"`
	STTTimeout  time.Duration `name:"stt-timeout" help:"Longest one transcription may take; the message then goes with its recording only." default:"2m" env:"IRISGATE_STT_TIMEOUT" group:"Voice"`
	// Pieces are spoken while the reply streams, but the final message
	// waits for the last ones: a hung speech server must not hold it for
	// long.
	TTSTimeout time.Duration `name:"tts-timeout" help:"Longest one spoken piece may take; the reply then keeps its text and says why." default:"1m" env:"IRISGATE_TTS_TIMEOUT" group:"Voice"`
}

// speechKey is the key sent to a speech endpoint at endpoint: the one set
// for speech, else the model's own, but only to the model's host (a key
// for one provider is not handed to another server).
func speechKey(explicit, endpoint string, a *AgentFlags) string {
	if explicit != "" {
		return explicit
	}
	e, err1 := url.Parse(endpoint)
	m, err2 := url.Parse(a.BaseURL)
	if err1 == nil && err2 == nil && e.Host != "" && e.Host == m.Host && e.Scheme == m.Scheme {
		return a.APIKey
	}
	return ""
}

// transcriber is the STT client the flags describe, nil without a URL.
func (f *VoiceFlags) transcriber(log *slog.Logger, a *AgentFlags) (*voice.STT, error) {
	if f.STTURL == "" {
		return nil, nil
	}
	s, err := voice.NewSTT(voice.STTConfig{URL: f.STTURL, Model: f.STTModel, Key: speechKey(f.STTKey, f.STTURL, a),
		Language: f.STTLanguage, Timeout: f.STTTimeout})
	if err != nil {
		return nil, err
	}
	log.Info("speech to text", "url", s.URL(), "model", f.STTModel)
	return s, nil
}

// speaker is the TTS client the flags describe, nil without a URL.
func (f *VoiceFlags) speaker(log *slog.Logger, a *AgentFlags) (*voice.TTS, error) {
	if f.TTSURL == "" {
		return nil, nil
	}
	s, err := voice.NewTTS(voice.TTSConfig{URL: f.TTSURL, Model: f.TTSModel, Voice: f.TTSVoice, Format: f.TTSFormat,
		Key: speechKey(f.STTKey, f.TTSURL, a), Timeout: f.TTSTimeout})
	if err != nil {
		return nil, err
	}
	log.Info("text to speech", "url", s.URL(), "model", f.TTSModel, "voice", f.TTSVoice, "format", f.TTSFormat)
	return s, nil
}
