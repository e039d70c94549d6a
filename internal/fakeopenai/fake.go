// Package fakeopenai is an OpenAI-compatible Chat Completions server for
// tests: it replays scripted streams as real SSE chunks (text and
// reasoning deltas, tool-call arguments split over many chunks, usage in
// the last chunk), error statuses to retry, and streams cut halfway.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Script is one response.
type Script struct {
	Status int      // 0: 200 with Chunks as SSE; else this status with an error body
	Chunks []string // JSON objects, each sent as one "data:" event
	// CutAfter, when > 0, drops the connection after that many chunks.
	CutAfter int
	// Gap is a pause before each chunk.
	Gap time.Duration
	// Hold, when set, is waited on before the first chunk (or until the
	// request is cancelled).
	Hold chan struct{}
}

// Server is a fake endpoint; URL is its base URL (ending in /v1).
type Server struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	scripts  []Script
	requests []map[string]any
}

// New starts a server until the test ends.
func New(t testing.TB) *Server {
	s := &Server{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

// Push queues responses, served in order.
func (s *Server) Push(scripts ...Script) {
	s.mu.Lock()
	s.scripts = append(s.scripts, scripts...)
	s.mu.Unlock()
}

// Requests returns the decoded request bodies received so far.
func (s *Server) Requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.requests...)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"no key","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, body)
	var sc Script
	if len(s.scripts) > 0 {
		sc = s.scripts[0]
		s.scripts = s.scripts[1:]
	} else {
		sc = Script{Chunks: Text("ok", 1)}
	}
	s.mu.Unlock()

	if sc.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After-Ms", "10")
		w.WriteHeader(sc.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"server_error","code":null}}`, sc.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	if sc.Hold != nil {
		select {
		case <-sc.Hold:
		case <-r.Context().Done():
			return
		}
	}
	for i, c := range sc.Chunks {
		if sc.CutAfter > 0 && i == sc.CutAfter {
			// Drop the connection mid-stream, as a proxy or a crash would.
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
				}
			}
			return
		}
		if sc.Gap > 0 {
			select {
			case <-time.After(sc.Gap):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "data: %s\n\n", c)
		fl.Flush()
	}
	io.WriteString(w, "data: [DONE]\n\n")
	fl.Flush()
}

func chunk(delta map[string]any, finish string) string {
	choice := map[string]any{"index": 0, "delta": delta, "finish_reason": nil}
	if finish != "" {
		choice["finish_reason"] = finish
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
		"choices": []any{choice},
	})
	return string(b)
}

// split cuts s into n pieces of about equal length (on rune boundaries).
func split(s string, n int) []string {
	r := []rune(s)
	if n < 1 {
		n = 1
	}
	var out []string
	for i := 0; i < n; i++ {
		a, b := i*len(r)/n, (i+1)*len(r)/n
		if a < b {
			out = append(out, string(r[a:b]))
		}
	}
	return out
}

// Text streams text in n deltas, then a stop and usage.
func Text(text string, n int) []string {
	out := []string{chunk(map[string]any{"role": "assistant", "content": ""}, "")}
	for _, p := range split(text, n) {
		out = append(out, chunk(map[string]any{"content": p}, ""))
	}
	return append(out, chunk(map[string]any{}, "stop"), Usage(11, len(text)/4+1))
}

// Reasoning is n reasoning deltas under the given field
// ("reasoning_content" or "reasoning").
func Reasoning(field, text string, n int) []string {
	var out []string
	for _, p := range split(text, n) {
		out = append(out, chunk(map[string]any{field: p}, ""))
	}
	return out
}

// ToolCall streams one tool call whose arguments arrive in n pieces,
// optionally after some text, then finish_reason tool_calls and usage.
func ToolCall(text, id, name, args string, n int) []string {
	out := []string{chunk(map[string]any{"role": "assistant"}, "")}
	if text != "" {
		out = append(out, chunk(map[string]any{"content": text}, ""))
	}
	out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": ""},
	}}}, ""))
	for _, p := range split(args, n) {
		out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "function": map[string]any{"arguments": p},
		}}}, ""))
	}
	return append(out, chunk(map[string]any{}, "tool_calls"), Usage(20, 10))
}

// Usage is the final chunk with token counts and no choices.
func Usage(prompt, completion int) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
	return string(b)
}
