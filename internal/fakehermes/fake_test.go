package fakehermes

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// These tests hold the fake to the wire format of
// ../shared/spec/hermes-api-server.md, with plain HTTP.

const key = "k-test"

type client struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newClient(t *testing.T, s *Server) *client {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	return &client{t: t, base: s.URL, c: c}
}

func (c *client) do(method, path, body, auth string) (int, http.Header, string) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return m
}

func errCode(t *testing.T, body string) string {
	t.Helper()
	e, _ := decode(t, body)["error"].(map[string]any)
	if _, ok := e["message"].(string); !ok {
		t.Fatalf("error body %s has no message", body)
	}
	c, _ := e["code"].(string)
	return c
}

func TestAuthAndStart(t *testing.T) {
	s := New(t, Config{Key: key})
	c := newClient(t, s)
	for _, auth := range []string{"", "wrong"} {
		code, _, body := c.do("POST", "/v1/runs", `{"input":"hi"}`, auth)
		if code != 401 || body != Unauthorized {
			t.Fatalf("auth %q: %d %s", auth, code, body)
		}
	}
	if code, _, body := c.do("POST", "/v1/runs", `{"session_id":"s"}`, key); code != 400 || !strings.Contains(body, "Missing 'input' field") {
		t.Fatalf("no input: %d %s", code, body)
	}
	if code, _, body := c.do("POST", "/v1/runs", `{nope`, key); code != 400 || !strings.Contains(body, "Invalid JSON") {
		t.Fatalf("bad JSON: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", s.URL+"/v1/runs", strings.NewReader(`{"input":"hi","session_id":"sess_1"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Hermes-Session-Key", "lane-1")
	resp, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := decode(t, string(b))
	id, _ := m["run_id"].(string)
	if resp.StatusCode != 202 || !strings.HasPrefix(id, "run_") || len(id) != 36 || m["status"] != "started" || resp.Header.Get("X-Hermes-Session-Key") != "lane-1" {
		t.Fatalf("start: %d %s %v", resp.StatusCode, b, resp.Header)
	}
	if !s.Wait(5*time.Second, func(rs []Run) bool { return len(rs) == 1 && rs[0].Status == "completed" }) {
		t.Fatalf("runs %+v", s.Runs())
	}
	code, _, body := c.do("GET", "/v1/runs/"+id, "", key)
	st := decode(t, body)
	if code != 200 || st["object"] != "hermes.run" || st["run_id"] != id || st["status"] != "completed" || st["session_id"] != "sess_1" ||
		st["model"] != "hermes-agent" || st["last_event"] != "run.completed" || st["output"] != "ok" || st["usage"] == nil ||
		st["created_at"] == nil || st["updated_at"] == nil {
		t.Fatalf("status %d %s", code, body)
	}
	if code, _, body := c.do("GET", "/v1/runs/run_nope", "", key); code != 404 || errCode(t, body) != "run_not_found" {
		t.Fatalf("unknown status: %d %s", code, body)
	}
}

func TestEventStream(t *testing.T) {
	s := New(t, Config{Key: key, UnknownRunWait: 100 * time.Millisecond})
	s.Push(Script{Steps: []Step{Split(Delta("héllo"), 5), Keepalive(), ToolStarted("terminal", "ls"), Completed("héllo", 3, 2)}})
	c := newClient(t, s)
	_, _, body := c.do("POST", "/v1/runs", `{"input":"hi"}`, key)
	id := decode(t, body)["run_id"].(string)
	req, _ := http.NewRequest("GET", s.URL+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %v", resp.StatusCode, resp.Header)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var events []map[string]any
	var comments []string
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	blank := true
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if blank {
				t.Fatalf("two blank lines in a row: %q", raw)
			}
			blank = true
			continue
		case strings.HasPrefix(line, ": "):
			comments = append(comments, line)
		case strings.HasPrefix(line, "data: "):
			ev := decode(t, strings.TrimPrefix(line, "data: "))
			if ev["run_id"] != id {
				t.Fatalf("event %v", ev)
			}
			if _, ok := ev["timestamp"].(float64); !ok {
				t.Fatalf("event %v has no float timestamp", ev)
			}
			events = append(events, ev)
		default:
			t.Fatalf("unexpected line %q (no event: names, only data: lines)", line)
		}
		if !blank {
			t.Fatalf("two lines in one event: %q", raw)
		}
		blank = false
	}
	var names []string
	for _, e := range events {
		names = append(names, e["event"].(string))
	}
	if strings.Join(names, ",") != "message.delta,tool.started,run.completed" || events[0]["delta"] != "héllo" || events[1]["preview"] != "ls" {
		t.Fatalf("events %v", events)
	}
	if strings.Join(comments, "|") != ": keepalive|: stream closed" {
		t.Fatalf("comments %q", comments)
	}
	// The stream is gone once closed.
	start := time.Now()
	if code, _, body := c.do("GET", "/v1/runs/"+id+"/events", "", key); code != 404 || errCode(t, body) != "run_not_found" || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("second subscription: %d %s after %v", code, body, time.Since(start))
	}
}

func TestApprovalAndStop(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "current", true: "legacy"}[legacy], func(t *testing.T) {
			s := New(t, Config{Key: key, Legacy: legacy})
			hold := make(chan struct{})
			defer close(hold)
			s.Push(Script{Steps: []Step{Hold(hold)}}, Script{Steps: []Step{Approval("rm -rf x", "delete"), Hold(hold)}})
			c := newClient(t, s)
			_, _, body := c.do("POST", "/v1/runs", `{"input":"hi"}`, key)
			first := decode(t, body)["run_id"].(string)
			if code, _, body := c.do("POST", "/v1/runs/"+first+"/approval", `{"choice":"once"}`, key); code != 409 || errCode(t, body) != "approval_not_pending" {
				t.Fatalf("nothing asked yet: %d %s", code, body)
			}
			_, _, body = c.do("POST", "/v1/runs", `{"input":"hi"}`, key)
			id := decode(t, body)["run_id"].(string)
			if !s.Wait(5*time.Second, func(rs []Run) bool { return len(rs) == 2 && rs[1].Status == "waiting_for_approval" }) {
				t.Fatalf("runs %+v", s.Runs())
			}
			_, _, body = c.do("GET", "/v1/runs/"+id, "", key)
			ap, hasApproval := decode(t, body)["approval"].(map[string]any)
			if hasApproval == legacy || !legacy && (ap["command"] != "rm -rf x" || ap["request_id"] == nil) {
				t.Fatalf("status while waiting: %s", body)
			}
			if code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"maybe"}`, key); code != 400 || errCode(t, body) != "invalid_approval_choice" {
				t.Fatalf("bad choice: %d %s", code, body)
			}
			code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"Approve"}`, key)
			if m := decode(t, body); code != 200 || m["object"] != "hermes.run.approval_response" || m["run_id"] != id || m["choice"] != "once" || m["resolved"] != float64(1) {
				t.Fatalf("approval: %d %s", code, body)
			}
			if code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`, key); code != 409 || errCode(t, body) != "approval_not_pending" {
				t.Fatalf("nothing pending: %d %s", code, body)
			}
			code, _, body = c.do("POST", "/v1/runs/"+id+"/stop", "", key)
			if m := decode(t, body); code != 200 || m["run_id"] != id || m["status"] != "stopping" {
				t.Fatalf("stop: %d %s", code, body)
			}
			if !s.Wait(5*time.Second, func(rs []Run) bool { return rs[1].Status == "cancelled" }) {
				t.Fatalf("not cancelled: %+v", s.Runs()[1])
			}
			if r := s.Runs()[1]; !r.StopRequested || len(r.Approvals) != 1 || r.Approvals[0] != "once" {
				t.Fatalf("after stop %+v", r)
			}
			code, _, body = c.do("POST", "/v1/runs/"+id+"/stop", "", key)
			if legacy && (code != 404 || errCode(t, body) != "run_not_found") || !legacy && (code != 200 || decode(t, body)["status"] != "cancelled") {
				t.Fatalf("stopping an ended run: %d %s", code, body)
			}
			if code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`, key); code != 409 || errCode(t, body) != "approval_not_active" {
				t.Fatalf("approval after the end: %d %s", code, body)
			}
		})
	}
}

func TestTenRunsAtOnce(t *testing.T) {
	s := New(t, Config{Key: key})
	c := newClient(t, s)
	for i := 0; i < 10; i++ {
		if code, _, body := c.do("POST", "/v1/runs", `{"input":"hi"}`, key); code != 202 {
			t.Fatalf("run %d: %d %s", i, code, body)
		}
	}
	code, _, body := c.do("POST", "/v1/runs", `{"input":"hi"}`, key)
	if code != 429 || errCode(t, body) != "rate_limit_exceeded" || !strings.Contains(body, "Too many concurrent runs (max 10)") {
		t.Fatalf("eleventh: %d %s", code, body)
	}
	s.Sweep()
	if code, _, body := c.do("POST", "/v1/runs", `{"input":"hi"}`, key); code != 202 {
		t.Fatalf("after the sweep: %d %s", code, body)
	}
}
