package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// --- HTTP ---

func (h *Hermes) headers(req *http.Request) {
	if h.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+h.cfg.Key)
	}
	req.Header.Set("User-Agent", "irisgate")
}

// hermesAPIError is an error answer of the API server.
type hermesAPIError struct {
	status  int
	message string
	code    string
}

func (e *hermesAPIError) Error() string {
	if e.message == "" {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.message)
}

func apiError(status int, body []byte) *hermesAPIError {
	var b struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	e := &hermesAPIError{status: status}
	if json.Unmarshal(body, &b) == nil && b.Error.Message != "" {
		e.message, e.code = b.Error.Message, b.Error.Code
	} else {
		e.message = bodySnippet(body, 200) // a proxy's HTML page, or plain text
	}
	return e
}

func isStatus(err error, codes ...int) bool {
	var ae *hermesAPIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, c := range codes {
		if ae.status == c {
			return true
		}
	}
	return false
}

// isCode says whether err is an API error with this error code.
func isCode(err error, code string) bool {
	var ae *hermesAPIError
	return errors.As(err, &ae) && ae.code == code
}

// call makes a request other than the event stream and decodes its JSON
// answer into out (when not nil).
func (h *Hermes) call(ctx context.Context, method, path string, body, out any) error {
	return h.callWith(ctx, method, path, nil, body, out)
}

// callWith is call with extra request headers.
func (h *Hermes) callWith(ctx context.Context, method, path string, hdr http.Header, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return err
	}
	h.headers(req)
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("Hermes answered %s %s with something that is not the expected JSON: %v", method, path, err)
		}
	}
	return nil
}

// newIdempotencyKey names one turn's run request. Retries of the request
// carry the same key, so a Hermes that already made the run (the answer
// was lost behind a proxy: 502, 504) answers with that run instead of
// starting it again (api_server_runs.py replays it); a Hermes that does
// not know the header ignores it.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "irisgate-" + hex.EncodeToString(b)
}

// start starts a run, retrying while Hermes is busy or briefly away; every
// attempt carries the same Idempotency-Key.
func (h *Hermes) start(ctx context.Context, body runRequest) (string, error) {
	wait := h.cfg.RetryBackoff
	hdr := http.Header{"Idempotency-Key": {newIdempotencyKey()}}
	for attempt := 0; ; attempt++ {
		var out struct {
			RunID string `json:"run_id"`
		}
		err := h.callWith(ctx, http.MethodPost, "/v1/runs", hdr, body, &out)
		if err == nil {
			if out.RunID == "" {
				return "", errors.New("Hermes accepted the run but sent no run id")
			}
			return out.RunID, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !retryable(err) || attempt >= h.cfg.MaxRetries {
			return "", h.describe(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		}
		wait *= 2
	}
}

// retryable says whether starting a run may be tried again: Hermes was busy
// or unavailable, or the connection was refused (so no run was made).
func retryable(err error) bool {
	if isStatus(err, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// status polls a run.
func (h *Hermes) status(ctx context.Context, runID string) (hermesStatus, error) {
	var st hermesStatus
	err := h.call(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), nil, &st)
	return st, err
}

// describe turns a failed request into a sentence a person can act on.
func (h *Hermes) describe(err error) error {
	var ae *hermesAPIError
	if errors.As(err, &ae) {
		switch ae.status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("Hermes refused irisgate's API key (HTTP %d: %s): set --hermes-key (or IRISGATE_HERMES_KEY) to the API_SERVER_KEY of Hermes's API server", ae.status, orText(ae.message, "unauthorized"))
		case http.StatusTooManyRequests:
			return fmt.Errorf("Hermes is busy: it runs at most 10 runs at once and all are taken (HTTP 429: %s). Send your message again once one has finished", orText(ae.message, "too many runs"))
		case http.StatusNotFound:
			return fmt.Errorf("%s has no Hermes run endpoints (HTTP 404: %s): is it Hermes Agent's API server, and a version with /v1/runs?", h.base, orText(ae.message, "not found"))
		}
		return fmt.Errorf("Hermes answered HTTP %d: %s", ae.status, orText(ae.message, http.StatusText(ae.status)))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Hermes at %s did not answer within %v", h.base, h.cfg.RequestTimeout)
	}
	return fmt.Errorf("cannot reach Hermes at %s (%v): is it running, with its API server enabled (API_SERVER_ENABLED=true)?", h.base, unwrapURL(err))
}

func orText(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}

// unwrapURL drops the "Post http://…:" wrapping of a transport error.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// --- Server-sent events ---

// sseItem is one thing read from an event stream: an event's data, a
// comment, or the end of the stream (err, io.EOF when it closed cleanly).
type sseItem struct {
	data    string
	comment bool
	err     error
}

// maxSSELine bounds one line of the stream.
const maxSSELine = 16 << 20

// readSSE parses a stream of server-sent events into items until it ends
// or done closes. Lines may arrive split across any number of reads; an
// event is dispatched at its blank line, so one cut short is dropped.
func readSSE(r io.Reader, out chan<- sseItem, done <-chan struct{}) {
	defer close(out)
	send := func(it sseItem) bool {
		select {
		case out <- it:
			return true
		case <-done:
			return false
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var data []string
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxSSELine {
				send(sseItem{err: errors.New("an event stream line is too long")})
				return
			}
			continue
		}
		if err != nil {
			send(sseItem{err: err})
			return
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
		line = line[:0]
		switch {
		case s == "":
			if data != nil {
				if !send(sseItem{data: strings.Join(data, "\n")}) {
					return
				}
				data = nil
			}
		case s[0] == ':':
			if !send(sseItem{comment: true, data: strings.TrimSpace(s[1:])}) {
				return
			}
		default:
			field, value, _ := strings.Cut(s, ":")
			if field == "data" {
				data = append(data, strings.TrimPrefix(value, " "))
			}
			// event:, id: and retry: are not used: Hermes names the event
			// inside its JSON.
		}
	}
}

// HermesToolEmoji is the emoji shown for one of Hermes's tools ("" when
// the tool is not known).
func HermesToolEmoji(name string) string {
	if e, ok := hermesEmoji[name]; ok {
		return e
	}
	switch {
	case strings.HasPrefix(name, "browser_"):
		return "🌐"
	case strings.HasPrefix(name, "mcp_"):
		return "🔌"
	case strings.HasPrefix(name, "ha_"):
		return "🏠"
	case strings.HasPrefix(name, "skill"):
		return "📚"
	}
	return ""
}

var hermesEmoji = map[string]string{
	"terminal":          "💻",
	"process":           "⚙️",
	"execute_code":      "🐍",
	"read_file":         "📖",
	"write_file":        "✍️",
	"patch":             "🩹",
	"search_files":      "🔍",
	"web_search":        "🔎",
	"web_extract":       "🌐",
	"web_crawl":         "🕸️",
	"vision_analyze":    "👁️",
	"image_generate":    "🎨",
	"text_to_speech":    "🔊",
	"memory":            "🧠",
	"session_search":    "🗂️",
	"todo":              "📋",
	"clarify":           "❓",
	"delegate_task":     "🤝",
	"mixture_of_agents": "🧩",
	"send_message":      "📨",
	"cronjob":           "⏰",
}
