// Package fakesearxng is a SearXNG instance for tests: its JSON search API
// as searx/webapp.py and searx/webutils.py (SearXNG 2024–2025) answer it.
//
//   - GET or POST /search (and /) with q and format; format=json is
//     answered only when the instance's settings.yml lists json in
//     search.formats (it does not by default): otherwise 403, as
//     webapp.py's flask.abort(403) does.
//   - The body is get_json_response's: query, number_of_results, results
//     (url, title, content, engine, engines, positions, score, category,
//     parsed_url, template, publishedDate…), answers, corrections,
//     infoboxes, suggestions, unresponsive_engines ([engine, error text]
//     pairs). When every engine fails it is still 200, with empty results
//     and the failures in unresponsive_engines.
//   - An empty q is answered with the HTML start page (a 200), not JSON.
package fakesearxng

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Result is one hit the fake returns.
type Result struct {
	URL, Title, Content, Engine string
}

// Server is a running fake.
type Server struct {
	URL string

	mu sync.Mutex
	// JSON says whether search.formats lists json (true by default here:
	// tests of the 403 turn it off).
	json    bool
	results []Result
	failed  [][2]string
	queries []string
}

// New starts a fake that answers every query with results.
func New(t testing.TB, results ...Result) *Server {
	s := &Server{json: true, results: results}
	ts := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// SetJSON turns the json format on or off in the instance's settings.
func (s *Server) SetJSON(on bool) { s.mu.Lock(); s.json = on; s.mu.Unlock() }

// FailEngines makes every engine fail, with these [engine, error] pairs.
func (s *Server) FailEngines(pairs ...[2]string) { s.mu.Lock(); s.failed = pairs; s.mu.Unlock() }

// Queries are the q values asked for in JSON, in order.
func (s *Server) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/search" && r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	q := r.Form.Get("q")
	format := r.Form.Get("format")
	switch format {
	case "", "html", "csv", "rss", "json":
	default:
		format = "html" // webapp.py: an unknown format falls back to html
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if format != "html" && !(format == "json" && s.json) {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	if q == "" || format == "html" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!DOCTYPE html><html><head><title>SearXNG</title></head><body><form id=\"search\"></form></body></html>"))
		return
	}
	s.queries = append(s.queries, q)
	results := []map[string]any{}
	unresponsive := [][]string{}
	if len(s.failed) > 0 {
		for _, f := range s.failed {
			unresponsive = append(unresponsive, []string{f[0], f[1]})
		}
	} else {
		for i, res := range s.results {
			u, _ := url.Parse(res.URL)
			parsed := []string{"", "", "", "", "", ""}
			if u != nil {
				parsed = []string{u.Scheme, u.Host, u.Path, "", u.RawQuery, u.Fragment}
			}
			engine := res.Engine
			if engine == "" {
				engine = "duckduckgo"
			}
			results = append(results, map[string]any{
				"url": res.URL, "title": res.Title, "content": res.Content, "engine": engine,
				"parsed_url": parsed, "template": "default.html", "engines": []string{engine},
				"positions": []int{i + 1}, "score": 1.0 / float64(i+1), "category": "general",
				"publishedDate": nil, "thumbnail": "", "priority": "",
			})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"query": q, "number_of_results": 0, "results": results, "answers": []any{},
		"corrections": []any{}, "infoboxes": []any{}, "suggestions": []string{q + " tutorial"},
		"unresponsive_engines": unresponsive,
	})
}
