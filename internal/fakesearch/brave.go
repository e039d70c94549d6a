// Package fakesearch holds the Brave Search and Tavily APIs for tests:
// their endpoints, authentication, limits, result JSON and error answers
// as the providers document them and as they answer in the cases a client
// must tell apart (a wrong key, a query too long, limits of rate and plan).
// SearXNG's fake is internal/fakesearxng.
package fakesearch

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Result is one hit a fake returns.
type Result struct {
	Title, URL, Snippet string
}

// Brave is the Brave Search API's web search
// (https://api-dashboard.search.brave.com/app/documentation/web-search,
// API reference "Web search"):
//
//   - GET /res/v1/web/search with q (required, at most 400 characters and
//     50 words) and count (1 to 20, default 20); the key in the
//     X-Subscription-Token header.
//   - 200: {"type":"search","query":{"original":…},"mixed":…,"web":{"type":
//     "search","results":[{"type":"search_result","title","url",
//     "description" (with <strong> around the query's words), "language",
//     "family_friendly","meta_url"…}]}}; "web" is absent when nothing was
//     found.
//   - Errors are {"type":"ErrorResponse","error":{"id","status","code",
//     "detail","meta"},"time"}: the shape the live API answers (the
//     reference's examples list them under "errors"). A missing key is 422
//     VALIDATION (meta.errors[].loc ["header","x-subscription-token"]), a
//     wrong one 422 SUBSCRIPTION_TOKEN_INVALID, a bad parameter 422
//     VALIDATION, too many requests a second 429 RATE_LIMITED, the plan's
//     monthly quota used up 429 QUOTA_LIMITED. (A path or method it does
//     not serve gets 404 or 405 in that shape: codes of our own.)
type Brave struct {
	URL string // the endpoint, …/res/v1/web/search
	Key string

	mu      sync.Mutex
	results []Result
	limit   string // "" or RATE_LIMITED or QUOTA_LIMITED
	queries []string
}

// NewBrave starts a fake answering every query with results.
func NewBrave(t testing.TB, key string, results ...Result) *Brave {
	b := &Brave{Key: key, results: results}
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	b.URL = srv.URL + "/res/v1/web/search"
	return b
}

// Limit makes every request refused with 429 and code (RATE_LIMITED or
// QUOTA_LIMITED); "" lifts it.
func (b *Brave) Limit(code string) { b.mu.Lock(); b.limit = code; b.mu.Unlock() }

// Queries are the queries answered, in order.
func (b *Brave) Queries() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.queries...)
}

func braveError(w http.ResponseWriter, status int, code, detail string, meta any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "ErrorResponse", "time": time.Now().Unix(), "error": map[string]any{
		"id": "5d832250-9396-4f6e-b84a-2a1fe524cd7d", "status": status, "code": code, "detail": detail, "meta": meta,
	}})
}

func invalid(loc ...string) map[string]any {
	return map[string]any{"errors": []any{map[string]any{"type": "value_error", "loc": loc, "msg": "Invalid value"}}}
}

func (b *Brave) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/res/v1/web/search" {
		braveError(w, http.StatusNotFound, "NOT_FOUND", "Not found.", nil)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		braveError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Method Not Allowed", nil)
		return
	}
	key := r.Header.Get("X-Subscription-Token")
	switch {
	case key == "":
		braveError(w, http.StatusUnprocessableEntity, "VALIDATION", "Unable to validate request parameter(s)",
			map[string]any{"errors": []any{map[string]any{"type": "missing", "loc": []string{"header", "x-subscription-token"}, "msg": "Field required"}}})
		return
	case key != b.Key:
		braveError(w, http.StatusUnprocessableEntity, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.",
			map[string]any{"component": "authentication"})
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.limit {
	case "RATE_LIMITED":
		braveError(w, http.StatusTooManyRequests, "RATE_LIMITED", "Request rate limit exceeded for plan.", map[string]any{"component": "rate_limiter"})
		return
	case "QUOTA_LIMITED":
		braveError(w, http.StatusTooManyRequests, "QUOTA_LIMITED", "Request quota limit exceeded for plan.", map[string]any{"component": "rate_limiter"})
		return
	}
	q := r.URL.Query().Get("q")
	if q == "" || utf8.RuneCountInString(q) > 400 || len(strings.Fields(q)) > 50 {
		braveError(w, http.StatusUnprocessableEntity, "VALIDATION", "Unable to validate request parameter(s)", invalid("query", "q"))
		return
	}
	count := 20
	if c := r.URL.Query().Get("count"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 || n > 20 {
			braveError(w, http.StatusUnprocessableEntity, "VALIDATION", "Unable to validate request parameter(s)", invalid("query", "count"))
			return
		}
		count = n
	}
	b.queries = append(b.queries, q)
	body := map[string]any{"type": "search", "query": map[string]any{"original": q, "show_strict_warning": false, "is_navigational": false,
		"country": "us", "spellcheck_off": true, "more_results_available": false}, "mixed": map[string]any{"type": "mixed", "main": []any{}}}
	var hits []any
	for i, res := range b.results {
		if i == count {
			break
		}
		hits = append(hits, map[string]any{"type": "search_result", "subtype": "generic", "title": res.Title, "url": res.URL,
			"description": strong(res.Snippet, q), "is_source_local": false, "is_source_both": false, "language": "en",
			"family_friendly": true, "meta_url": map[string]any{"scheme": "https", "netloc": hostOf(res.URL), "path": ""}})
	}
	if len(hits) > 0 {
		body["web"] = map[string]any{"type": "search", "results": hits, "family_friendly": true}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

// strong marks the query's words in a snippet as Brave does.
func strong(s, q string) string {
	for _, w := range strings.Fields(q) {
		s = strings.ReplaceAll(s, w, "<strong>"+w+"</strong>")
	}
	return s
}

func hostOf(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	host, _, _ := strings.Cut(rest, "/")
	return host
}
