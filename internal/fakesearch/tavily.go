package fakesearch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// Tavily is Tavily's search API
// (https://docs.tavily.com/documentation/api-reference/endpoint/search),
// answering as tavily-python's client (tavily/tavily.py) expects:
//
//   - POST /search with a JSON body: query (required; more than 400
//     characters is 400 {"detail":{"error":"Query is too long. Max query
//     length is 400 characters."}}, as Tavily's best-practices page
//     shows), max_results (0 to 20, default 5); the key as "Authorization:
//     Bearer tvly-…".
//   - 200: {"query","follow_up_questions":null,"answer":null,"images":[],
//     "results":[{"title","url","content","score","raw_content":null}],
//     "response_time","request_id"}.
//   - Errors are {"detail":{"error":"…"}}: 401 for a missing or wrong key
//     ("Unauthorized: missing or invalid API key."), 400 for a bad
//     request, 429 too many requests, 432 the plan's limit reached and
//     433 the pay-as-you-go limit reached (tavily-python raises
//     ForbiddenError for 403, 432 and 433). The texts of the 401, the
//     432 and the long query are Tavily's; those of 429, 433 and the
//     other 400s are this fake's: a client must not depend on them.
type Tavily struct {
	URL string // the endpoint, …/search
	Key string

	mu      sync.Mutex
	results []Result
	status  int // a refusal every request gets (429, 432, 433), or 0
	bodies  []map[string]any
}

// NewTavily starts a fake answering every query with results.
func NewTavily(t testing.TB, key string, results ...Result) *Tavily {
	v := &Tavily{Key: key, results: results}
	srv := httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(srv.Close)
	v.URL = srv.URL + "/search"
	return v
}

// Refuse makes every request answered with status (429, 432 or 433); 0
// lifts it.
func (v *Tavily) Refuse(status int) { v.mu.Lock(); v.status = status; v.mu.Unlock() }

// Bodies are the JSON bodies of the searches answered, in order.
func (v *Tavily) Bodies() []map[string]any {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]map[string]any(nil), v.bodies...)
}

func tavilyError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"detail": map[string]any{"error": msg}})
}

var refusals = map[int]string{
	http.StatusTooManyRequests: "Your request has been blocked due to excessive requests. Please reduce the rate of requests.",
	432:                        "This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com",
	433:                        "This request exceeds the pay-as-you-go limit. You can increase your limit on the Tavily dashboard.",
}

func (v *Tavily) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/search" {
		tavilyError(w, http.StatusNotFound, "Not Found")
		return
	}
	if r.Method != http.MethodPost {
		tavilyError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+v.Key {
		tavilyError(w, http.StatusUnauthorized, "Unauthorized: missing or invalid API key.")
		return
	}
	var body map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		tavilyError(w, http.StatusBadRequest, fmt.Sprintf("Invalid JSON body: %v", err))
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if msg, ok := refusals[v.status]; ok {
		tavilyError(w, v.status, msg)
		return
	}
	q, _ := body["query"].(string)
	switch {
	case strings.TrimSpace(q) == "":
		tavilyError(w, http.StatusBadRequest, "Query is missing.")
		return
	case utf8.RuneCountInString(q) > 400:
		tavilyError(w, http.StatusBadRequest, "Query is too long. Max query length is 400 characters.")
		return
	}
	n := 5
	if m, ok := body["max_results"].(float64); ok {
		if m < 0 || m > 20 || m != float64(int(m)) {
			tavilyError(w, http.StatusBadRequest, "max_results must be an integer between 0 and 20.")
			return
		}
		n = int(m)
	}
	v.bodies = append(v.bodies, body)
	results := []any{}
	for i, res := range v.results {
		if i == n {
			break
		}
		results = append(results, map[string]any{"title": res.Title, "url": res.URL, "content": res.Snippet,
			"score": 0.9 - 0.1*float64(i), "raw_content": nil})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"query": q, "follow_up_questions": nil, "answer": nil, "images": []any{},
		"results": results, "response_time": 1.02, "request_id": "123e4567-e89b-12d3-a456-426614174111"})
}
