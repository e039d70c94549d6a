// Package fakespeech fakes OpenAI-compatible speech servers for tests:
// POST /v1/audio/transcriptions and POST /v1/audio/speech, as OpenAI's
// API reference describes them (platform.openai.com/docs/api-reference/
// audio), with the errors the real servers answer: OpenAI's
// {"error":{"message","type","param","code"}} with 400/401/413, and
// whisper.cpp's server ({"error":"…"} when the file cannot be decoded).
// Recordings are checked as WAV files the way whisper.cpp's server reads
// them (RIFF/WAVE, a fmt chunk, PCM data).
package fakespeech

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// WAV makes a real WAV file: 16-bit mono PCM at rate, n samples of a
// 440 Hz tone.
func WAV(rate, n int) []byte {
	var b bytes.Buffer
	data := n * 2
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(36+data))
	b.WriteString("WAVEfmt ")
	binary.Write(&b, binary.LittleEndian, uint32(16))     // fmt chunk size
	binary.Write(&b, binary.LittleEndian, uint16(1))      // PCM
	binary.Write(&b, binary.LittleEndian, uint16(1))      // mono
	binary.Write(&b, binary.LittleEndian, uint32(rate))   // sample rate
	binary.Write(&b, binary.LittleEndian, uint32(rate*2)) // byte rate
	binary.Write(&b, binary.LittleEndian, uint16(2))      // block align
	binary.Write(&b, binary.LittleEndian, uint16(16))     // bits per sample
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(data))
	for i := range n {
		v := int16(8000 * math.Sin(2*math.Pi*440*float64(i)/float64(rate)))
		binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

// ParseWAV checks a WAV file's header and returns its sample rate and
// number of samples (16-bit mono PCM only, what WAV makes).
func ParseWAV(b []byte) (rate, samples int, err error) {
	if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " {
		return 0, 0, errors.New("not a RIFF/WAVE file")
	}
	if binary.LittleEndian.Uint16(b[20:]) != 1 || binary.LittleEndian.Uint16(b[22:]) != 1 || binary.LittleEndian.Uint16(b[34:]) != 16 {
		return 0, 0, errors.New("not 16-bit mono PCM")
	}
	if string(b[36:40]) != "data" {
		return 0, 0, errors.New("no data chunk")
	}
	n := int(binary.LittleEndian.Uint32(b[40:]))
	if n > len(b)-44 || n%2 != 0 {
		return 0, 0, fmt.Errorf("the data chunk says %d bytes, the file has %d", n, len(b)-44)
	}
	return int(binary.LittleEndian.Uint32(b[24:])), n / 2, nil
}

// Transcription is one request the fake STT took.
type Transcription struct {
	Model, Language, Format, Filename, ContentType string
	File                                           []byte
	Auth                                           string
}

// STT is a fake transcription server. Transcript answers a recording
// that is a valid WAV; anything else gets whisper.cpp's error.
type STT struct {
	Key        string // when set, requests need "Bearer <Key>" (OpenAI's 401 otherwise)
	Transcript func(Transcription) string
	// Status, when set, fails every request with it, OpenAI's error body.
	Status int

	mu   sync.Mutex
	reqs []Transcription
}

// Requests are the transcriptions asked for so far.
func (s *STT) Requests() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transcription(nil), s.reqs...)
}

func openAIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func (s *STT) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions" {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return
	}
	if s.Key != "" && r.Header.Get("Authorization") != "Bearer "+s.Key {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	if s.Status != 0 {
		openAIError(w, s.Status, "server_error", "The server had an error while processing your request.")
		return
	}
	// OpenAI refuses files over 25 MB with a 413.
	if err := r.ParseMultipartForm(26 << 20); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "Could not parse multipart form")
		return
	}
	t := Transcription{Model: r.FormValue("model"), Language: r.FormValue("language"), Format: r.FormValue("response_format"), Auth: r.Header.Get("Authorization")}
	f, h, err := r.FormFile("file")
	if err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "you must provide a file")
		return
	}
	t.File, _ = io.ReadAll(f)
	t.Filename, t.ContentType = h.Filename, h.Header.Get("Content-Type")
	if t.Model == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "you must provide a model parameter")
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, t)
	s.mu.Unlock()
	if _, _, err := ParseWAV(t.File); err != nil && !strings.HasSuffix(t.Filename, ".ogg") {
		// whisper.cpp's server: "failed to read audio data" as its error.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"failed to read audio data"}`)
		return
	}
	text := "hello"
	if s.Transcript != nil {
		text = s.Transcript(t)
	}
	switch t.Format {
	case "text":
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, text)
	default: // json, OpenAI's default
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"text": text})
	}
}

// Speech is one request the fake TTS took.
type Speech struct{ Model, Input, Voice, Format string }

// TTS is a fake POST /v1/audio/speech: a JSON body, answered with a real
// WAV (response_format wav) of ten samples per character of input, unless
// Samples says otherwise, or a real Ogg Opus file as long (opus); other
// formats get OpenAI's 400 here. Like OpenAI's, it sends nothing until the audio is made: a
// held request (Hold) answers nothing until released or given up by the
// client.
type TTS struct {
	// Samples, when set, is how many samples the speech of input has.
	Samples func(input string) int
	// Rate is the WAVs' sample rate (default 24000, OpenAI's): a test that
	// needs megabytes of audio that plays briefly raises it.
	Rate int
	// Taken, when set, gets each request as it is taken (give it room).
	Taken chan Speech
	// Hold, when set, holds requests from the HoldFrom-th (1: every one)
	// until a value arrives on it or the client gives up (counted by
	// Cancelled).
	Hold     chan struct{}
	HoldFrom int
	// FailFrom, when > 0, answers the FailFrom-th request and later ones
	// with Status (default 500) and OpenAI's error body.
	FailFrom int
	Status   int

	mu        sync.Mutex
	reqs      []Speech
	cancelled int
}

// Requests are the speech requests taken so far.
func (s *TTS) Requests() []Speech {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Speech(nil), s.reqs...)
}

// Cancelled counts the held requests their client gave up.
func (s *TTS) Cancelled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// WaitCancelled waits up to d until n held requests were given up, and
// returns how many were: the server learns it when the client's request
// ends, which may be after the client has moved on.
func (s *TTS) WaitCancelled(n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		if got := s.Cancelled(); got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Audio is the WAV the fake answers for input.
func (s *TTS) Audio(input string) []byte {
	n := 10 * len([]rune(input))
	if s.Samples != nil {
		n = s.Samples(input)
	}
	return WAV(cmp.Or(s.Rate, 24000), n)
}

func (s *TTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/speech" {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return
	}
	var sp struct {
		Model  string `json:"model"`
		Input  string `json:"input"`
		Voice  string `json:"voice"`
		Format string `json:"response_format"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&sp); err != nil || sp.Model == "" || sp.Voice == "" || sp.Input == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "model, input and voice are required")
		return
	}
	if len([]rune(sp.Input)) > 4096 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "string too long. Expected a string with maximum length 4096")
		return
	}
	if sp.Format != "wav" && sp.Format != "opus" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "this fake speaks wav and opus only")
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, Speech{sp.Model, sp.Input, sp.Voice, sp.Format})
	n := len(s.reqs)
	s.mu.Unlock()
	if s.Taken != nil {
		s.Taken <- Speech{sp.Model, sp.Input, sp.Voice, sp.Format}
	}
	if s.Hold != nil && n >= max(s.HoldFrom, 1) {
		select {
		case <-s.Hold:
		case <-r.Context().Done():
			s.mu.Lock()
			s.cancelled++
			s.mu.Unlock()
			return
		}
	}
	if s.FailFrom > 0 && n >= s.FailFrom {
		// OpenAI's answer when the model server fails.
		openAIError(w, cmp.Or(s.Status, http.StatusInternalServerError), "server_error", "The server had an error while processing your request. Sorry about that!")
		return
	}
	if sp.Format == "opus" {
		w.Header().Set("Content-Type", "audio/ogg")
		w.Write(s.Opus(sp.Input))
		return
	}
	w.Header().Set("Content-Type", "audio/wav")
	w.Write(s.Audio(sp.Input))
}

// Opus is the Ogg Opus file the fake answers for input (format opus): as
// long as its WAV, in 20 ms frames.
func (s *TTS) Opus(input string) []byte {
	n := 10 * len([]rune(input))
	if s.Samples != nil {
		n = s.Samples(input)
	}
	return OggOpus(n * 1000 / 24000)
}
