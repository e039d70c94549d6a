package fakentfy

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// These tests hold the fake to ntfy v2.13's own answers: the routes of
// server.go's handleInternal, the errors of server/errors.go (code, http,
// error and link, exactly), and the message a publish is answered with
// (server/types.go).

type reply struct {
	status int
	body   map[string]any
}

func publish(t *testing.T, s *Server, path, body string, hdr map[string]string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: not JSON: %q", path, body, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", path, ct)
	}
	return reply{res.StatusCode, m}
}

// errorBody is an error as ntfy writes it: code, http, error, link when
// it has one.
func errorBody(code, status int, msg, link string) map[string]any {
	m := map[string]any{"code": float64(code), "http": float64(status), "error": msg}
	if link != "" {
		m["link"] = link
	}
	return m
}

func same(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestErrorsAreNtfys(t *testing.T) {
	s := New(t)
	big := strings.Repeat("x", messageSizeLimit+1)
	for _, tc := range []struct {
		name, path, body string
		hdr              map[string]string
		want             map[string]any
	}{
		// A topic path that fails topicPathRegex is no route at all.
		{"dot in the path", "/my.phone", "hi", nil, errorBody(40401, 404, "page not found", "")},
		{"path too deep", "/a/b", "hi", nil, errorBody(40401, 404, "page not found", "")},
		// The same topic in a JSON publish fails topicRegex.
		{"dot in a JSON topic", "/", `{"topic":"my.phone","message":"hi"}`, nil, errorBody(40009, 400, "invalid request: topic invalid", "")},
		{"reserved name, JSON", "/", `{"topic":"docs","message":"hi"}`, nil, errorBody(40010, 400, "invalid request: topic name is not allowed", "")},
		{"reserved name, path", "/static", "hi", nil, errorBody(40010, 400, "invalid request: topic name is not allowed", "")},
		{"not JSON", "/", `{"topic":`, nil, errorBody(40024, 400, "invalid request: request body must be valid JSON", "")},
		{"priority out of range", "/", `{"topic":"t","message":"hi","priority":7}`, nil, errorBody(40007, 400, "invalid priority parameter", "https://ntfy.sh/docs/publish/#message-priority")},
		{"priority by name unknown", "/t", "hi", map[string]string{"X-Priority": "loud"}, errorBody(40007, 400, "invalid priority parameter", "https://ntfy.sh/docs/publish/#message-priority")},
		{"body too large", "/t", big, nil, errorBody(41301, 413, "attachment too large, or bandwidth limit reached", "https://ntfy.sh/docs/publish/#limitations")},
		{"JSON body too large", "/", `{"topic":"t","message":"` + big + big + `"}`, nil, errorBody(41303, 413, "JSON body too large", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := publish(t, s, tc.path, tc.body, tc.hdr); got.status != int(tc.want["http"].(float64)) || !same(got.body, tc.want) {
				t.Fatalf("HTTP %d %v, want %v", got.status, got.body, tc.want)
			}
		})
	}
	if n := len(s.Messages()); n != 0 {
		t.Fatalf("%d refused publishes kept", n)
	}
}

// With access control on, a token ntfy does not know is 401 before
// anything else (even on no route), a user without write access to the
// topic 403, and anonymous publishes only where allowed.
func TestAccessControl(t *testing.T) {
	s := New(t)
	s.Set(func(s *Server) { s.Tokens = map[string][]string{"tk_a": {"a-topic"}} })
	unauthorized := errorBody(40101, 401, "unauthorized", "https://ntfy.sh/docs/publish/#authentication")
	forbidden := errorBody(40301, 403, "forbidden", "https://ntfy.sh/docs/publish/#authentication")
	for _, tc := range []struct {
		name, path, body, auth string
		anon                   bool
		want                   map[string]any
	}{
		{"unknown token", "/", `{"topic":"a-topic","message":"hi"}`, "Bearer tk_nope", false, unauthorized},
		{"unknown token, no route", "/my.phone", "hi", "Bearer tk_nope", false, unauthorized},
		{"another user's topic", "/b-topic", "hi", "Bearer tk_a", false, forbidden},
		{"anonymous", "/a-topic", "hi", "", false, forbidden},
		{"own topic", "/a-topic", "hi", "Bearer tk_a", false, nil},
		{"anonymous where allowed", "/b-topic", "hi", "", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Set(func(s *Server) { s.AnonymousWrite = tc.anon })
			hdr := map[string]string{}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			got := publish(t, s, tc.path, tc.body, hdr)
			if tc.want == nil {
				if got.status != 200 || got.body["event"] != "message" {
					t.Fatalf("HTTP %d %v", got.status, got.body)
				}
				return
			}
			if got.status != int(tc.want["http"].(float64)) || !same(got.body, tc.want) {
				t.Fatalf("HTTP %d %v, want %v", got.status, got.body, tc.want)
			}
		})
	}
}

// A publish is answered with the message ntfy stored: its fields as sent
// (headers or JSON), empty ones left out, a missing body as "triggered",
// the priority only when one was given; the time and, with the default
// cache, its expiry 12 hours on.
func TestPublishIsAnsweredWithTheMessage(t *testing.T) {
	s := New(t)
	before := time.Now().Unix()
	got := publish(t, s, "/", `{"topic":"t","title":"Agent","message":"Done.","priority":4,"tags":["question"],"click":"https://x.invalid/"}`, nil)
	b := got.body
	if got.status != 200 || b["event"] != "message" || b["topic"] != "t" || b["title"] != "Agent" || b["message"] != "Done." ||
		b["priority"] != float64(4) || b["click"] != "https://x.invalid/" || len(b["id"].(string)) != 12 {
		t.Fatalf("answer %v", b)
	}
	if tm := int64(b["time"].(float64)); tm < before || int64(b["expires"].(float64)) != tm+12*3600 {
		t.Fatalf("time %v expires %v", b["time"], b["expires"])
	}
	got = publish(t, s, "/t", "", map[string]string{"X-Title": "Ping", "X-Tags": "alarm_clock,tada"})
	if b := got.body; b["message"] != "triggered" || b["title"] != "Ping" || b["priority"] != nil || b["click"] != nil || len(b["tags"].([]any)) != 2 {
		t.Fatalf("answer %v", b)
	}
	// Unknown JSON fields are dropped, as ntfy's decoder does.
	if got := publish(t, s, "/", `{"topic":"t","message":"x","chat_id":"c_1"}`, nil); got.status != 200 || got.body["chat_id"] != nil {
		t.Fatalf("answer %v", got.body)
	}
	msgs := s.Messages()
	if len(msgs) != 3 || msgs[0].Priority != 4 || msgs[1].Priority != 3 || !msgs[0].JSON || msgs[1].JSON {
		t.Fatalf("kept %+v", msgs)
	}
}

// v2.13 knows no sequence ids: two publishes are two notifications, and
// the answer names none. As v2.16 (Sequences), the second replaces the
// first.
func TestSequenceIDs(t *testing.T) {
	for _, v216 := range []bool{false, true} {
		s := New(t)
		s.Set(func(s *Server) { s.Sequences = v216 })
		var last reply
		for _, m := range []string{"one", "two"} {
			last = publish(t, s, "/", `{"topic":"t","message":"`+m+`","sequence_id":"ig-news-1"}`, nil)
		}
		want, seq := 2, any(nil)
		if v216 {
			want, seq = 1, "ig-news-1"
		}
		if s.Shown("t") != want || last.body["sequence_id"] != seq {
			t.Fatalf("v2.16 %v: %d shown, answer %v", v216, s.Shown("t"), last.body)
		}
	}
}

// FailNext answers as ntfy does under load or for UnifiedPush, then
// takes publishes again.
func TestFailNext(t *testing.T) {
	s := New(t)
	s.Set(func(s *Server) { s.FailNext = []int{500, 429, 507} })
	for _, want := range []map[string]any{
		errorBody(50001, 500, "internal server error", ""),
		errorBody(42901, 429, "limit reached: too many requests", "https://ntfy.sh/docs/publish/#limitations"),
		errorBody(50701, 507, "cannot publish to UnifiedPush topic without previously active subscriber", ""),
	} {
		if got := publish(t, s, "/t", "hi", nil); !same(got.body, want) {
			t.Fatalf("%v, want %v", got.body, want)
		}
	}
	if got := publish(t, s, "/t", "hi", nil); got.status != 200 {
		t.Fatalf("after the failures: %v", got.body)
	}
}
