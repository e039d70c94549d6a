// Package fakentfy is an ntfy server for tests. It answers publishes the
// way ntfy v2.13 does (github.com/binwiederhier/ntfy, server/server.go,
// server/errors.go, server/config.go), in the cases the gateway meets:
//
//   - routing (handleInternal): POST/PUT / is a JSON publish, POST/PUT
//     /<topic> a publish with headers when the path matches topicPathRegex
//     `^/[-_A-Za-z0-9]{1,64}$`; any other path is 404 40401 "page not
//     found" (so /my.phone is a 404, not a bad topic);
//   - the JSON publish (transformBodyJSON): a body that is not JSON is 400
//     40024, a topic that fails topicRegex 400 40009; unknown fields are
//     ignored (a plain json.Decoder);
//   - topics (topicsFromIDs): a name in DisallowedTopics (by default
//     config.go DefaultDisallowedTopics) is 400 40010;
//   - authentication (maybeAuthenticate, authorizeTopic): with access
//     control on, an Authorization header with an unknown token is 401
//     40101, a user (or anonymous) without write access to the topic 403
//     40301;
//   - priorities (util.ParsePriority): 1–5 or min…urgent, else 400 40007;
//   - a message over MessageSizeLimit (4096) with no attachment cache:
//     413 41301; a JSON body over twice that: 413 41303;
//   - errors are JSON {"code","http","error","link"} (handleError);
//     a publish is answered with the stored message as JSON (empty fields
//     left out, a missing body as "triggered").
//
// ntfy v2.13 has no way to update a notification: each publish is one
// more on the phone. With Sequences set, the fake behaves as ntfy's
// documentation describes v2.16 and later (docs/publish.md, "Updating
// notifications"): a publish with the sequence id of an earlier one
// replaces its notification, and the answer names the sequence_id.
package fakentfy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one accepted publish.
type Message struct {
	Topic, Title, Body, Click, Auth, SequenceID string
	Priority                                    int
	Tags                                        []string
	JSON                                        bool // published as JSON
}

// Server is a fake ntfy server; URL is its base URL.
type Server struct {
	URL string
	srv *httptest.Server

	mu sync.Mutex
	// Disallowed are the topic names refused with 40010.
	Disallowed []string
	// Tokens, when not nil, turns access control on: each known token
	// and the topics its user may write ("*" for all). Anonymous
	// publishes are allowed when AnonymousWrite is.
	Tokens         map[string][]string
	AnonymousWrite bool
	// Sequences makes the server update notifications by sequence id
	// (v2.16 and later).
	Sequences bool
	// Hang holds publishes to these topics until the request is given up
	// or the server closes.
	Hang map[string]bool
	// Gate, when set, holds each publish until it can take a value from
	// it (or the request is given up): a test lets them through one by one.
	Gate chan struct{}
	// FailNext answers the next publishes with these statuses (500 50001,
	// 429 42901, 507 50701) before taking any again.
	FailNext []int

	msgs    []Message
	reqs    int
	flight  int // publishes held at the gate now
	maxFl   int
	entered chan struct{}
	shown   map[string]int // topic → notifications on a subscribed phone
	seqs    map[string]bool
	arrived chan struct{}
	closing chan struct{}
	once    sync.Once
}

var (
	topicRegex     = regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)
	topicPathRegex = regexp.MustCompile(`^/[-_A-Za-z0-9]{1,64}$`)
)

// DefaultDisallowedTopics is ntfy's config.go DefaultDisallowedTopics.
var DefaultDisallowedTopics = []string{"docs", "static", "file", "app", "metrics", "account", "settings", "signup", "login", "v1"}

const (
	messageSizeLimit = 4096
	emptyMessageBody = "triggered"    // server.go: what a publish without a body says
	cacheDuration    = 12 * time.Hour // config.go DefaultCacheDuration: the answer's expires
)

// answer is the message a publish is answered with (server/types.go
// message: empty fields left out), plus sequence_id from v2.16.
type answer struct {
	ID         string   `json:"id"`
	Time       int64    `json:"time"`
	Expires    int64    `json:"expires,omitempty"`
	Event      string   `json:"event"`
	Topic      string   `json:"topic"`
	Title      string   `json:"title,omitempty"`
	Message    string   `json:"message,omitempty"`
	Priority   int      `json:"priority,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Click      string   `json:"click,omitempty"`
	SequenceID string   `json:"sequence_id,omitempty"`
}

// New starts a server until the test ends.
func New(t testing.TB) *Server {
	s := &Server{Disallowed: DefaultDisallowedTopics, shown: map[string]int{}, seqs: map[string]bool{},
		arrived: make(chan struct{}, 1000), entered: make(chan struct{}, 1000), closing: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close releases hung requests and stops the server.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closing) })
	s.srv.Close()
}

// Set changes the server's behaviour under its lock.
func (s *Server) Set(f func(s *Server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// Messages returns what was published so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// Requests counts the requests made, answered or not.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs
}

// InFlight is how many publishes wait at the gate now, and the most that
// ever did at once.
func (s *Server) InFlight() (now, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flight, s.maxFl
}

// Entered receives a value for each publish that reaches the gate.
func (s *Server) Entered() <-chan struct{} { return s.entered }

// Shown is how many notifications a phone subscribed to topic shows.
func (s *Server) Shown(topic string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shown[topic]
}

// Arrived receives a value for each accepted publish.
func (s *Server) Arrived() <-chan struct{} { return s.arrived }

// Wait waits for n accepted publishes in all, or fails the test.
func (s *Server) Wait(t testing.TB, n int, within time.Duration) []Message {
	t.Helper()
	deadline := time.After(within)
	for {
		if m := s.Messages(); len(m) >= n {
			return m
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("ntfy got %d publishes, want %d: %+v", len(s.Messages()), n, s.Messages())
		}
	}
}

type errHTTP struct {
	Code     int    `json:"code,omitempty"`
	HTTPCode int    `json:"http"`
	Message  string `json:"error"`
	Link     string `json:"link,omitempty"`
}

// The errors of server/errors.go the gateway can meet.
var (
	errNotFound        = errHTTP{40401, 404, "page not found", ""}
	errUnauthorized    = errHTTP{40101, 401, "unauthorized", "https://ntfy.sh/docs/publish/#authentication"}
	errForbidden       = errHTTP{40301, 403, "forbidden", "https://ntfy.sh/docs/publish/#authentication"}
	errTopicInvalid    = errHTTP{40009, 400, "invalid request: topic invalid", ""}
	errTopicDisallowed = errHTTP{40010, 400, "invalid request: topic name is not allowed", ""}
	errJSONInvalid     = errHTTP{40024, 400, "invalid request: request body must be valid JSON", ""}
	errPriorityInvalid = errHTTP{40007, 400, "invalid priority parameter", "https://ntfy.sh/docs/publish/#message-priority"}
	errTooLarge        = errHTTP{41301, 413, "attachment too large, or bandwidth limit reached", "https://ntfy.sh/docs/publish/#limitations"}
	errJSONTooLarge    = errHTTP{41303, 413, "JSON body too large", ""}
	errTooManyRequests = errHTTP{42901, 429, "limit reached: too many requests", "https://ntfy.sh/docs/publish/#limitations"}
	errInternal        = errHTTP{50001, 500, "internal server error", ""}
	errInsufficientUP  = errHTTP{50701, 507, "cannot publish to UnifiedPush topic without previously active subscriber", ""}
	failures           = map[int]errHTTP{500: errInternal, 429: errTooManyRequests, 507: errInsufficientUP}
	priorities         = map[string]int{"": 0, "1": 1, "min": 1, "2": 2, "low": 2, "3": 3, "default": 3, "4": 4, "high": 4, "5": 5, "max": 5, "urgent": 5}
)

func writeErr(w http.ResponseWriter, e errHTTP) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.HTTPCode)
	b, _ := json.Marshal(e)
	w.Write(append(b, '\n'))
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	// maybeAuthenticate runs before routing.
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	var user []string
	s.mu.Lock()
	s.reqs++
	acl, anon := s.Tokens, s.AnonymousWrite
	if acl != nil && strings.HasPrefix(strings.ToLower(auth), "bearer ") {
		topics, ok := acl[strings.TrimSpace(auth[len("bearer "):])]
		if !ok {
			s.mu.Unlock()
			writeErr(w, errUnauthorized)
			return
		}
		user = topics
	}
	s.mu.Unlock()
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		writeErr(w, errNotFound)
		return
	}
	var m Message
	var badPriority bool
	switch {
	case r.URL.Path == "/":
		var pm struct {
			Topic      string   `json:"topic"`
			Title      string   `json:"title"`
			Message    string   `json:"message"`
			Priority   int      `json:"priority"`
			Tags       []string `json:"tags"`
			Click      string   `json:"click"`
			SequenceID string   `json:"sequence_id"` // read only with Sequences (v2.16)
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 2*messageSizeLimit+1))
		if len(b) > 2*messageSizeLimit {
			writeErr(w, errJSONTooLarge)
			return
		}
		if json.Unmarshal(b, &pm) != nil {
			writeErr(w, errJSONInvalid)
			return
		}
		if !topicRegex.MatchString(pm.Topic) {
			writeErr(w, errTopicInvalid)
			return
		}
		// transformBodyJSON hands a priority on as X-Priority "%d", which
		// parsePublishParams then reads.
		badPriority = pm.Priority < 0 || pm.Priority > 5
		m = Message{Topic: pm.Topic, Title: pm.Title, Body: pm.Message, Priority: pm.Priority, Tags: pm.Tags, Click: pm.Click, SequenceID: pm.SequenceID, JSON: true}
	case topicPathRegex.MatchString(r.URL.Path):
		p, ok := priorities[strings.ToLower(strings.TrimSpace(first(r.Header, "X-Priority", "Priority")))]
		badPriority = !ok
		b, _ := io.ReadAll(io.LimitReader(r.Body, messageSizeLimit+1))
		if len(b) > messageSizeLimit {
			writeErr(w, errTooLarge)
			return
		}
		m = Message{Topic: r.URL.Path[1:], Title: first(r.Header, "X-Title", "Title"), Body: string(b), Priority: p,
			Click: first(r.Header, "X-Click", "Click")}
		if t := first(r.Header, "X-Tags", "Tags"); t != "" {
			m.Tags = strings.Split(t, ",")
		}
	default:
		writeErr(w, errNotFound)
		return
	}
	if h := r.Header.Get("X-Sequence-ID"); h != "" {
		m.SequenceID = h
	}
	m.Auth = auth
	if m.Body == "" {
		m.Body = emptyMessageBody
	}
	given := m.Priority // the answer has it only when given (omitempty)
	if m.Priority == 0 {
		m.Priority = 3 // what the phone shows
	}
	// In ntfy's order: the topic (limitRequestsWithTopic), its access
	// (authorizeTopicWrite), then the publish's parameters and body.
	s.mu.Lock()
	if slices.Contains(s.Disallowed, m.Topic) {
		s.mu.Unlock()
		writeErr(w, errTopicDisallowed)
		return
	}
	if acl != nil && !(user == nil && anon) && !slices.Contains(user, m.Topic) && !slices.Contains(user, "*") {
		s.mu.Unlock()
		writeErr(w, errForbidden)
		return
	}
	if len(s.FailNext) > 0 {
		st := s.FailNext[0]
		s.FailNext = s.FailNext[1:]
		s.mu.Unlock()
		writeErr(w, failures[st])
		return
	}
	hang, gate := s.Hang[m.Topic], s.Gate
	s.mu.Unlock()
	if badPriority {
		writeErr(w, errPriorityInvalid)
		return
	}
	if len(m.Body) > messageSizeLimit {
		writeErr(w, errTooLarge)
		return
	}
	if hang {
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return
	}
	if gate != nil {
		s.mu.Lock()
		s.flight++
		s.maxFl = max(s.maxFl, s.flight)
		s.mu.Unlock()
		s.entered <- struct{}{}
		var passed bool
		select {
		case <-gate:
			passed = true
		case <-r.Context().Done():
		case <-s.closing:
		}
		s.mu.Lock()
		s.flight--
		s.mu.Unlock()
		if !passed {
			return
		}
	}
	s.mu.Lock()
	if !s.Sequences {
		m.SequenceID = "" // v2.13 knows no sequence ids
	}
	s.msgs = append(s.msgs, m)
	key := m.Topic + "/" + m.SequenceID
	if m.SequenceID == "" || !s.seqs[key] {
		s.shown[m.Topic]++
	}
	if m.SequenceID != "" {
		s.seqs[key] = true
	}
	s.mu.Unlock()
	id := make([]byte, 6)
	rand.Read(id)
	now := time.Now().Unix()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer{ID: hex.EncodeToString(id), Time: now, Expires: now + int64(cacheDuration/time.Second), Event: "message",
		Topic: m.Topic, Title: m.Title, Message: m.Body, Priority: given, Tags: m.Tags, Click: m.Click, SequenceID: m.SequenceID})
	select {
	case s.arrived <- struct{}{}:
	default:
	}
}

func first(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}
