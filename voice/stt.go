// Package voice speaks to OpenAI-compatible speech endpoints: speech to
// text (POST /v1/audio/transcriptions: OpenAI, whisper.cpp's server with
// --inference-path, faster-whisper servers, Groq) and text to speech
// (POST /v1/audio/speech). The gateway calls them through its own small
// interfaces; nothing here knows of lanes or devices.
package voice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults of the clients' bounds.
const (
	// DefaultMaxUpload is OpenAI's limit on a transcription's file; the
	// phones' recordings (8 MiB) fit.
	DefaultMaxUpload = 25 << 20
	// DefaultTimeout bounds one request: a CPU whisper takes a while over
	// a long memo, a hung server must not hold the lane forever.
	DefaultTimeout = 2 * time.Minute
	// maxSTTResponse bounds the answer read: a transcript is text, a
	// megabyte is hours of speech.
	maxSTTResponse = 1 << 20
	// maxErrorBody is what is read of a failed request's body to say why.
	maxErrorBody = 8 << 10
)

// STTConfig configures a speech-to-text endpoint.
type STTConfig struct {
	// URL is the endpoint's base (http://127.0.0.1:8080/v1, as for the
	// model) or the full …/audio/transcriptions address.
	URL   string
	Model string // whisper-1, gpt-4o-mini-transcribe, Systran/faster-whisper-small…
	Key   string // sent as a bearer token when set
	// Language is an ISO-639-1 hint (empty: the server detects it).
	Language  string
	Timeout   time.Duration // DefaultTimeout unless set
	MaxUpload int64         // DefaultMaxUpload unless set
	HTTP      *http.Client  // http.DefaultClient's transport unless set
}

// STT is a speech-to-text client.
type STT struct {
	cfg STTConfig
	url string
}

// ErrTooLarge is a recording over the upload bound: it is not sent.
var ErrTooLarge = errors.New("voice: the recording is larger than the speech-to-text limit")

// NewSTT checks cfg and makes the client.
func NewSTT(cfg STTConfig) (*STT, error) {
	u, err := endpoint(cfg.URL, "/audio/transcriptions")
	if err != nil {
		return nil, fmt.Errorf("--stt-url: %w", err)
	}
	if cfg.Model == "" {
		cfg.Model = "whisper-1"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	return &STT{cfg: cfg, url: u}, nil
}

// URL is the transcription endpoint requests go to.
func (s *STT) URL() string { return s.url }

// endpoint completes a base URL with path unless it ends with it already.
func endpoint(raw, path string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if !strings.HasSuffix(u.Path, path) {
		u.Path = strings.TrimSuffix(u.Path, "/") + path
	}
	return u.String(), nil
}

// Transcribe sends size bytes of r (a recording named filename, of type
// mimeType) and returns the transcript, trimmed. A recording over the
// bound is refused before a byte is sent.
func (s *STT) Transcribe(ctx context.Context, filename, mimeType string, size int64, r io.Reader) (string, error) {
	if size > s.cfg.MaxUpload {
		return "", fmt.Errorf("%w (%d bytes, the limit is %d)", ErrTooLarge, size, s.cfg.MaxUpload)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	// The form is streamed: the recording is never copied into memory.
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeForm(mw, s.cfg, filename, mimeType, io.LimitReader(r, size)))
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, pr)
	if err != nil {
		pr.Close()
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	if s.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.Key)
	}
	resp, err := s.cfg.HTTP.Do(req)
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the request did not read it all
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return "", fmt.Errorf("the speech-to-text server did not answer within %s", s.cfg.Timeout)
		}
		return "", fmt.Errorf("the speech-to-text server cannot be reached: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", statusError("speech-to-text", resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSTTResponse+1))
	if err != nil {
		return "", fmt.Errorf("reading the transcript: %w", err)
	}
	if len(body) > maxSTTResponse {
		return "", fmt.Errorf("the transcript is larger than %d bytes", maxSTTResponse)
	}
	var out struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Text == nil {
		return "", fmt.Errorf("the speech-to-text server answered without a transcript (%s)", snippet(body))
	}
	if !utf8.ValidString(*out.Text) {
		return "", errors.New("the transcript is not UTF-8")
	}
	return strings.TrimSpace(*out.Text), nil
}

// writeForm writes the multipart fields OpenAI's API reference names:
// file, model, response_format and an optional language.
func writeForm(mw *multipart.Writer, cfg STTConfig, filename, mimeType string, r io.Reader) error {
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, safeName(filename)))
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	h.Set("Content-Type", mimeType)
	fw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fw, r); err != nil {
		return err
	}
	fields := [][2]string{{"model", cfg.Model}, {"response_format", "json"}}
	if cfg.Language != "" {
		fields = append(fields, [2]string{"language", cfg.Language})
	}
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return err
		}
	}
	return mw.Close()
}

// safeName keeps a file name a form header can carry: servers read the
// extension to pick a decoder, so that much must survive.
func safeName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == '"' || r == '\\' || r == 0x7f || r == '/' {
			return '_'
		}
		return r
	}, name)
	if len(name) > 100 {
		name = name[len(name)-100:]
	}
	if !utf8.ValidString(name) || name == "" {
		return "audio"
	}
	return name
}

// statusError says why a request failed, from the shapes servers answer
// with: OpenAI's {"error":{"message"}}, whisper.cpp's {"error":"…"},
// FastAPI's {"detail":…}, or the body's start.
func statusError(what string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &nested) == nil && nested.Message != "":
			msg = nested.Message
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			msg = s
		case json.Unmarshal(e.Detail, &s) == nil && s != "":
			msg = s
		case len(e.Detail) > 0:
			msg = string(e.Detail)
		}
	}
	if msg == "" {
		msg = string(body)
	}
	return fmt.Errorf("the %s server answered %s: %s", what, resp.Status, snippet([]byte(msg)))
}

// snippet is the start of a server's words, safe to show in a chat.
func snippet(b []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(b)), "�")
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	if s == "" {
		return "no details"
	}
	return s
}
