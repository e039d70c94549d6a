// Package fakeopenai is an OpenAI-compatible Chat Completions server for
// tests: it replays scripted streams as real SSE chunks (text and
// reasoning deltas, tool-call arguments split over many chunks, usage in
// the last chunk), error statuses to retry, and streams cut halfway.
package fakeopenai

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log"
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
	// request is cancelled); with HoldAfter > 0, after that many chunks
	// instead, so a reply is held halfway.
	Hold      chan struct{}
	HoldAfter int
	// EmptyBody, with Status, answers with no body at all, as Caddy's
	// reverse_proxy does (502) when the model server behind it is down.
	EmptyBody bool
	// ErrorBody, with Status, is the exact body to answer with (a server's
	// own error shape, or a proxy's page), of ErrorType (default
	// application/json).
	ErrorBody, ErrorType string
	// Sending, when set, is called right before chunk i is written and
	// flushed to the connection (the benchmark times the first token with
	// it: after the flush the reader may have it before this goroutine
	// runs again).
	Sending func(i int)
}

// Server is a fake endpoint; URL is its base URL (ending in /v1).
type Server struct {
	URL string
	srv *httptest.Server

	// ContextLimit, when > 0, refuses (HTTP 400, context_length_exceeded,
	// as OpenAI does) a request whose messages hold more than about this
	// many tokens (four bytes a token). Set it before the first request.
	ContextLimit int
	// Efforts, when set, are the only reasoning_effort values accepted:
	// another is refused with vLLM's 400 (see refuseEffort). Set it before
	// the first request.
	Efforts []string

	mu       sync.Mutex
	scripts  []Script
	requests []map[string]any
	arrived  chan struct{} // closed and renewed at each request
}

// New starts a server until the test ends.
func New(t testing.TB) *Server {
	s := NewServer()
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a server; Close stops it.
func NewServer() *Server {
	s := &Server{arrived: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL + "/v1"
	return s
}

// NewTLS starts a server on HTTPS until the test ends. Its certificate is
// its own, trusted by Client and by nothing else: a provider behind a
// private CA, as a self-hosted one often is.
func NewTLS(t testing.TB) *Server {
	s := &Server{arrived: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	// A client that does not trust the certificate is refused in the
	// handshake: what tests provoke, not worth a log line.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.StartTLS()
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.Close)
	return s
}

// Client is an HTTP client for the server: on HTTPS, the one client that
// trusts its certificate.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close stops the server (after the requests in flight).
func (s *Server) Close() { s.srv.Close() }

// WaitRequests waits until at least n requests have arrived and returns
// them all; ok is false when they did not within timeout.
func (s *Server) WaitRequests(n int, timeout time.Duration) (reqs []map[string]any, ok bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		reqs = append([]map[string]any(nil), s.requests...)
		arrived := s.arrived
		s.mu.Unlock()
		if len(reqs) >= n {
			return reqs, true
		}
		select {
		case <-arrived:
		case <-deadline.C:
			return reqs, false
		}
	}
}

// Pending is how many pushed scripts no request has taken yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.scripts)
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
	if msg := badToolSequence(body); msg != "" {
		// OpenAI refuses these; so does the fake, so a runtime that
		// leaves a call unanswered is caught.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": "messages", "code": nil}})
		w.Write(b)
		s.mu.Lock()
		s.requests = append(s.requests, body)
		close(s.arrived)
		s.arrived = make(chan struct{})
		s.mu.Unlock()
		return
	}
	if s.refuseEffort(w, body) {
		return
	}
	if s.ContextLimit > 0 {
		if n := promptTokens(body); n > s.ContextLimit {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, s.ContextLimit, n)
			s.mu.Lock()
			s.requests = append(s.requests, body)
			close(s.arrived)
			s.arrived = make(chan struct{})
			s.mu.Unlock()
			return
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, body)
	close(s.arrived)
	s.arrived = make(chan struct{})
	var sc Script
	if len(s.scripts) > 0 {
		sc = s.scripts[0]
		s.scripts = s.scripts[1:]
	} else {
		sc = Script{Chunks: Text("ok", 1)}
	}
	s.mu.Unlock()

	if sc.Status != 0 && sc.EmptyBody {
		w.WriteHeader(sc.Status)
		return
	}
	if sc.Status != 0 && sc.ErrorBody != "" {
		w.Header().Set("Content-Type", cmp.Or(sc.ErrorType, "application/json"))
		w.WriteHeader(sc.Status)
		io.WriteString(w, sc.ErrorBody)
		return
	}
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
	hold := func() bool {
		select {
		case <-sc.Hold:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if sc.Hold != nil && sc.HoldAfter <= 0 && !hold() {
		return
	}
	for i, c := range sc.Chunks {
		if sc.Hold != nil && sc.HoldAfter > 0 && i == sc.HoldAfter {
			if !hold() {
				return
			}
		}
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
		if sc.Sending != nil {
			sc.Sending(i)
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

// Call is one tool call of ToolCalls.
type Call struct {
	ID, Name, Args string
}

// Style is how a server streams tool calls.
type Style struct {
	// RepeatName puts the whole function name in every delta of a call,
	// not only its first (see RepeatingName).
	RepeatName bool
}

// OpenAI is how OpenAI streams tool calls: each call's id and name in its
// first delta, then its arguments, under the call's index.
var OpenAI = Style{}

// ToolCalls streams several tool calls in one response as OpenAI does.
func ToolCalls(text string, n int, calls ...Call) []string {
	return OpenAI.ToolCalls(text, n, calls...)
}

// ToolCalls streams several tool calls in one response, each one's
// arguments in n pieces, optionally after some text.
func (st Style) ToolCalls(text string, n int, calls ...Call) []string {
	out := []string{chunk(map[string]any{"role": "assistant"}, "")}
	if text != "" {
		out = append(out, chunk(map[string]any{"content": text}, ""))
	}
	for i, c := range calls {
		out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, ""))
		for _, p := range split(c.Args, n) {
			fn := map[string]any{"arguments": p}
			tc := map[string]any{"index": i, "function": fn}
			if st.RepeatName {
				fn["name"], tc["type"] = c.Name, "function"
			}
			out = append(out, chunk(map[string]any{"tool_calls": []any{tc}}, ""))
		}
	}
	return append(out, chunk(map[string]any{}, "tool_calls"), Usage(20, 10))
}

// WithUsage replaces the usage chunk that ends chunks.
func WithUsage(chunks []string, prompt, completion int) []string {
	out := append([]string(nil), chunks...)
	if len(out) > 0 && strings.Contains(out[len(out)-1], `"usage"`) {
		out = out[:len(out)-1]
	}
	return append(out, Usage(prompt, completion))
}

// badToolSequence checks what OpenAI checks of tool messages: an assistant
// message with tool_calls is followed by one tool message for each of its
// ids, and a tool message answers such a call.
func badToolSequence(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	for i := 0; i < len(msgs); i++ {
		m, _ := msgs[i].(map[string]any)
		switch m["role"] {
		case "tool":
			return fmt.Sprintf("messages[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls'", i)
		case "assistant":
			calls, _ := m["tool_calls"].([]any)
			if len(calls) == 0 {
				continue
			}
			want := map[string]bool{}
			for _, c := range calls {
				cm, _ := c.(map[string]any)
				want[fmt.Sprint(cm["id"])] = true
			}
			j := i + 1
			for ; j < len(msgs); j++ {
				tm, _ := msgs[j].(map[string]any)
				if tm["role"] != "tool" {
					break
				}
				delete(want, fmt.Sprint(tm["tool_call_id"]))
			}
			if len(want) > 0 {
				return fmt.Sprintf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'", i)
			}
			i = j - 1
		}
	}
	return ""
}

// promptTokens estimates a request's size the way OpenAI counts it,
// roughly: four bytes a token, a few more per message.
func promptTokens(body map[string]any) int {
	msgs, _ := body["messages"].([]any)
	n := 0
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		n += len(b)/4 + 4
	}
	return n
}

// Usage is the final chunk with token counts and no choices.
func Usage(prompt, completion int) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
	return string(b)
}
