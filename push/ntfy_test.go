package push

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/store"
)

// clock is a test clock the pusher's workers may read concurrently.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// logs collects what the pusher logs.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.Write(p) }

func (l *logs) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

func (l *logs) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// ntfyRig is a pusher with one ntfy backend, a test clock and a hold.
type ntfyRig struct {
	nt  *fakentfy.Server
	st  *store.Store
	p   *Pusher
	clk *clock
	log *logs
	reg *prometheus.Registry
}

func newNtfyRig(t *testing.T, hold time.Duration, edit ...func(*Ntfy)) *ntfyRig {
	r := &ntfyRig{nt: fakentfy.New(t), st: openStore(t), clk: newClock(), log: &logs{}, reg: prometheus.NewRegistry()}
	n := &Ntfy{Server: r.nt.URL, Click: "https://chat.example.invalid/open?app=iris"}
	for _, e := range edit {
		e(n)
	}
	r.p = New(r.st, r.log.logger(), Config{Backends: []Backend{n}, Content: ContentFull, Now: r.clk.Now, Hold: hold, Metrics: r.reg})
	return r
}

func (r *ntfyRig) device(t *testing.T, id, topic string) {
	t.Helper()
	// Straight into the store: registration checks topics, a database
	// from before the checks may hold any.
	if err := r.st.SeeDevice(context.Background(), store.Device{ID: id, NtfyTopic: topic}); err != nil {
		t.Fatal(err)
	}
}

func (r *ntfyRig) enqueue(t *testing.T, dev string, n Note) {
	t.Helper()
	if err := r.p.Enqueue(context.Background(), dev, n); err != nil {
		t.Fatal(err)
	}
}

func (r *ntfyRig) pending(t *testing.T) int {
	t.Helper()
	n, err := r.st.PendingPushes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *ntfyRig) outcomes(backend, outcome string) float64 { return counted(r.p, backend, outcome) }

// counted reads irisgate_push_total{backend,outcome}.
func counted(p *Pusher, backend, outcome string) float64 {
	var m dto.Metric
	if err := p.outcomes.WithLabelValues(backend, outcome).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// Issue 14 item 6: a picker and the notification committed right after
// it collapse into one push, and the picker's urgency wins: priority 4
// and the question tag, its title, whatever arrived later. A cron post and
// its notification keep the cron tag and the job's title, and the
// message id of the post. The cursor is the newest.
func TestMostUrgentPushOfALaneWins(t *testing.T) {
	r := newNtfyRig(t, 2*time.Second)
	r.device(t, "phone", "phone-topic")
	lane := Note{ChatID: "default", Collapse: "default"}
	picker, notif := lane, lane
	picker.Kind, picker.Title, picker.Body, picker.Cursor = KindPicker, "Run this command?", "rm -rf build", 10
	notif.Kind, notif.Title, notif.Body, notif.Cursor = KindMessage, "Agent", "Waiting for your approval", 11
	r.enqueue(t, "phone", picker)
	r.enqueue(t, "phone", notif)

	cron := Note{ChatID: "chan_ops", Collapse: "chan_ops"}
	post, cnote := cron, cron
	post.Kind, post.Title, post.Body, post.MessageID, post.Cursor = KindCron, "Cron", "Standup in 5", "m_post", 12
	cnote.Kind, cnote.Title, cnote.Body, cnote.Cursor = KindCron, "standup", "Standup in 5", 13
	r.enqueue(t, "phone", post)
	r.enqueue(t, "phone", cnote)

	r.p.SendDue(context.Background())
	if got := r.nt.Messages(); len(got) != 0 {
		t.Fatalf("sent %+v during the hold", got)
	}
	r.clk.Add(2 * time.Second)
	r.p.SendDue(context.Background())
	got := r.nt.Messages()
	if len(got) != 2 {
		t.Fatalf("ntfy got %d publishes, want one per lane: %+v", len(got), got)
	}
	ask, cr := got[0], got[1]
	if ask.Priority != 4 || !slices.Equal(ask.Tags, []string{"question"}) || ask.Title != "Run this command?" || ask.Body != "rm -rf build" {
		t.Fatalf("the approval's push became %+v", ask)
	}
	if q := clickQuery(t, ask); q.Get("cursor") != "11" {
		t.Fatalf("cursor %q in %s, want the newest (11)", q.Get("cursor"), ask.Click)
	}
	if cr.Priority != 3 || !slices.Equal(cr.Tags, []string{"alarm_clock"}) || cr.Title != "standup" {
		t.Fatalf("the cron push became %+v", cr)
	}
	if q := clickQuery(t, cr); q.Get("message_id") != "m_post" || q.Get("cursor") != "13" || q.Get("chat_id") != "chan_ops" {
		t.Fatalf("cron push ids %s", cr.Click)
	}
	if d, _ := r.st.Device(context.Background(), "phone"); d.LastPushedCursor != 13 {
		t.Fatalf("last_pushed_cursor %d", d.LastPushedCursor)
	}

	// Once the approval went out, the reply after it is a push of its own
	// at its own (default) priority.
	reply := lane
	reply.Kind, reply.Title, reply.Body, reply.MessageID, reply.Cursor = KindMessage, "Agent", "Done.", "m_9", 20
	r.enqueue(t, "phone", reply)
	r.clk.Add(2 * time.Second)
	r.p.SendDue(context.Background())
	if got := r.nt.Messages(); len(got) != 3 || got[2].Priority != 3 || !slices.Equal(got[2].Tags, []string{"speech_balloon"}) || got[2].Body != "Done." {
		t.Fatalf("after the approval: %+v", got)
	}
}

func clickQuery(t *testing.T, m fakentfy.Message) url.Values {
	t.Helper()
	u, err := url.Parse(m.Click)
	if err != nil || u.Host != "chat.example.invalid" || u.Path != "/open" {
		t.Fatalf("click %q: %v", m.Click, err)
	}
	return u.Query()
}

// Issue 14 item 7: ntfy v2.13 cannot update a notification. Ten replies
// within a lane's hold are one publish, of the newest, so the phone shows
// one notification, not ten; the push carries the ids (in the click URL,
// the one field ntfy keeps for the app) and the lane's sequence id.
func TestNtfyBurstIsOneNotification(t *testing.T) {
	r := newNtfyRig(t, 2*time.Second)
	r.device(t, "phone", "phone-topic")
	for i := 1; i <= 10; i++ {
		r.enqueue(t, "phone", Note{Kind: KindMessage, Title: "Agent", Body: "reply " + string(rune('0'+i%10)), ChatID: "chan_1", ThreadID: "t_1",
			MessageID: "m_" + string(rune('a'+i)), Cursor: int64(100 + i), Collapse: "chan_1/t_1"})
		r.clk.Add(100 * time.Millisecond)
		r.p.SendDue(context.Background())
	}
	r.clk.Add(2 * time.Second)
	r.p.SendDue(context.Background())
	got := r.nt.Messages()
	if len(got) != 1 || r.nt.Shown("phone-topic") != 1 {
		t.Fatalf("%d publishes, %d shown; want one of the burst", len(got), r.nt.Shown("phone-topic"))
	}
	m := got[0]
	if !m.JSON || m.Body != "reply 0" {
		t.Fatalf("published %+v, want the newest as JSON", m)
	}
	q := clickQuery(t, m)
	if q.Get("app") != "iris" || q.Get("chat_id") != "chan_1" || q.Get("thread_id") != "t_1" || q.Get("message_id") != "m_k" || q.Get("cursor") != "110" {
		t.Fatalf("click %s", m.Click)
	}
}

// Issue 14 item 7: without --ntfy-click a tap opens the push's chat in
// the web app (its #/c/<lane> route, the lane as the web app encodes it),
// the ids in the query; with neither, the push has no click URL, and the
// ids go nowhere.
func TestNtfyClickOpensTheChatInTheWebApp(t *testing.T) {
	for _, tc := range []struct{ app, want string }{
		{"https://iris.example.com/", "https://iris.example.com/?chat_id=chan_1&cursor=110&message_id=m_1&thread_id=t_1#/c/chan_1%2Ft_1"},
		{"https://example.com/iris/", "https://example.com/iris/?chat_id=chan_1&cursor=110&message_id=m_1&thread_id=t_1#/c/chan_1%2Ft_1"},
		{"", ""},
	} {
		r := newNtfyRig(t, 0, func(n *Ntfy) { n.Click, n.App = "", tc.app })
		r.device(t, "phone", "phone-topic")
		r.enqueue(t, "phone", Note{Kind: KindMessage, Title: "Agent", Body: "Done.", ChatID: "chan_1", ThreadID: "t_1", MessageID: "m_1", Cursor: 110, Collapse: "chan_1/t_1"})
		r.p.SendDue(context.Background())
		if got := r.nt.Messages(); len(got) != 1 || got[0].Click != tc.want {
			t.Fatalf("app %q: published %+v, want click %q", tc.app, got, tc.want)
		}
	}
}

// Issue 14 item 7: from v2.16 ntfy replaces a notification that has the
// same sequence id. Each lane has one, so two bursts of one lane are one
// notification, updated; the lane's questions have another, so an
// approval is never overwritten by the chat that follows.
func TestNtfySequenceIDUpdatesTheLanesNotification(t *testing.T) {
	r := newNtfyRig(t, 0)
	r.nt.Set(func(s *fakentfy.Server) { s.Sequences = true })
	r.device(t, "phone", "phone-topic")
	send := func(n Note) {
		r.enqueue(t, "phone", n)
		r.p.SendDue(context.Background())
	}
	send(Note{Kind: KindMessage, Body: "first", Cursor: 1, Collapse: "default"})
	send(Note{Kind: KindMessage, Body: "second", Cursor: 2, Collapse: "default"})
	if got := r.nt.Messages(); len(got) != 2 || r.nt.Shown("phone-topic") != 1 || got[0].SequenceID == "" || got[0].SequenceID != got[1].SequenceID {
		t.Fatalf("two publishes of one lane show %d notifications: %+v", r.nt.Shown("phone-topic"), got)
	}
	send(Note{Kind: KindPicker, Body: "rm -rf build", Cursor: 3, Collapse: "default"})
	send(Note{Kind: KindMessage, Body: "third", Cursor: 4, Collapse: "default"})
	send(Note{Kind: KindMessage, Body: "elsewhere", Cursor: 5, Collapse: "chan_2"})
	if n := r.nt.Shown("phone-topic"); n != 3 {
		t.Fatalf("%d notifications shown, want the lane's, its approval and the other lane's", n)
	}
}

// Issue 14 item 8: each ntfy answer is read the way ntfy means it
// (server/errors.go), and counted in /metrics.
func TestNtfyAnswersAreClassified(t *testing.T) {
	ctx := context.Background()
	type want struct {
		outcome    string
		keptTopic  bool
		retried    bool
		logSays    string
		noRequests bool
	}
	for _, tc := range []struct {
		name  string
		topic string
		setup func(*fakentfy.Server)
		ntfy  func(*Ntfy)
		want  want
	}{
		// A name ntfy reserves by default (docs: 400 40010) is known
		// without asking; one the server's own list adds is learnt from
		// its 40010. Neither is retried for hours: the topic is dropped.
		{"reserved topic", "docs", nil, nil, want{outcome: "invalid_address", noRequests: true, logSays: "reserves for its own pages"}},
		{"topic of the server's own disallowed list", "family", func(s *fakentfy.Server) { s.Disallowed = append(s.Disallowed, "family") }, nil,
			want{outcome: "invalid_address", logSays: "40010"}},
		// A topic ntfy's regex refuses (my.phone: a POST there is 404
		// "page not found") is never sent: it is dropped unsent.
		{"invalid topic", "my.phone", nil, nil, want{outcome: "invalid_address", noRequests: true, logSays: "only letters, digits"}},
		// 401 40101: the token is wrong. Retried, said once with the fix.
		{"wrong token", "phone-topic", func(s *fakentfy.Server) { s.Tokens = map[string][]string{"tk_good": {"*"}} },
			func(n *Ntfy) { n.Token = "tk_wrong" }, want{outcome: "auth", keptTopic: true, retried: true, logSays: "--ntfy-token"}},
		// 403 40301: no token, and anonymous may not write.
		{"no write access", "phone-topic", func(s *fakentfy.Server) { s.Tokens = map[string][]string{"tk_good": {"other"}} }, nil,
			want{outcome: "auth", keptTopic: true, retried: true, logSays: "write access"}},
		// 404 40401 to a JSON publish: not an ntfy server. The topic is
		// not gone (ntfy has no such thing): kept, retried, said once.
		{"not an ntfy server", "phone-topic", nil, func(n *Ntfy) { n.Server += "/not-ntfy" },
			want{outcome: "misconfigured", keptTopic: true, retried: true, logSays: "--ntfy-server"}},
		{"rate limited", "phone-topic", func(s *fakentfy.Server) { s.FailNext = []int{429, 429} }, nil,
			want{outcome: "rate_limited", keptTopic: true, retried: true, logSays: "too many requests"}},
		{"server error", "phone-topic", func(s *fakentfy.Server) { s.FailNext = []int{500, 500} }, nil,
			want{outcome: "failed", keptTopic: true, retried: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newNtfyRig(t, 0, func(n *Ntfy) {
				if tc.ntfy != nil {
					tc.ntfy(n)
				}
			})
			if tc.setup != nil {
				r.nt.Set(tc.setup)
			}
			r.device(t, "phone", tc.topic)
			r.enqueue(t, "phone", Note{Kind: KindMessage, Body: "hi", Cursor: 1, Collapse: "default"})
			r.p.SendDue(ctx)
			if got := r.outcomes("ntfy", tc.want.outcome); got != 1 {
				t.Fatalf("irisgate_push_total{ntfy,%s} = %v, want 1; logs:\n%s", tc.want.outcome, got, r.log)
			}
			d, _ := r.st.Device(ctx, "phone")
			if (d.NtfyTopic != "") != tc.want.keptTopic {
				t.Fatalf("topic %q, want kept %v", d.NtfyTopic, tc.want.keptTopic)
			}
			if n := r.pending(t); (n == 1) != tc.want.retried {
				t.Fatalf("%d pending, want retried %v", n, tc.want.retried)
			}
			if tc.want.retried {
				// Tried again after its backoff: the failure is not said twice.
				r.clk.Add(time.Minute)
				r.p.SendDue(ctx)
				if got := r.outcomes("ntfy", tc.want.outcome); got != 2 {
					t.Fatalf("second attempt not counted: %v", got)
				}
				if tc.want.logSays != "" && strings.Count(r.log.String(), tc.want.logSays) != 1 {
					t.Fatalf("want %q said once, logs:\n%s", tc.want.logSays, r.log)
				}
			} else if !strings.Contains(r.log.String(), tc.want.logSays) {
				t.Fatalf("want %q in the logs:\n%s", tc.want.logSays, r.log)
			}
			if tc.want.noRequests && r.nt.Requests() != 0 {
				t.Fatalf("%d requests for a topic ntfy refuses", r.nt.Requests())
			}
			if d.LastPushedCursor != 0 || len(r.nt.Messages()) != 0 {
				t.Fatalf("a refused push counted as sent: cursor %d, %+v", d.LastPushedCursor, r.nt.Messages())
			}
		})
	}
}

// Issue 14 item 8: an auth failure is said once, and again after the
// backend worked in between; what went out is counted as sent.
func TestNtfyAuthFailureSaidOnceUntilFixed(t *testing.T) {
	ctx := context.Background()
	token := "tk_old"
	r := newNtfyRig(t, 0, func(n *Ntfy) { n.Token = token })
	r.nt.Set(func(s *fakentfy.Server) { s.Tokens = map[string][]string{"tk_new": {"*"}} })
	r.device(t, "phone", "phone-topic")
	for i := range 3 {
		r.enqueue(t, "phone", Note{Kind: KindMessage, Body: "x", Cursor: int64(i + 1), Collapse: "default"})
		r.clk.Add(time.Hour)
		r.p.SendDue(ctx)
	}
	if n := strings.Count(r.log.String(), "--ntfy-token"); n != 1 || r.outcomes("ntfy", "auth") != 3 {
		t.Fatalf("said %d times over %v failures:\n%s", n, r.outcomes("ntfy", "auth"), r.log)
	}
	// The operator fixes the token on the ntfy side: the queued push goes.
	r.nt.Set(func(s *fakentfy.Server) { s.Tokens[token] = []string{"*"} })
	r.clk.Add(time.Hour)
	r.p.SendDue(ctx)
	if r.outcomes("ntfy", "sent") != 1 || !strings.Contains(r.log.String(), "works again") {
		t.Fatalf("sent %v; logs:\n%s", r.outcomes("ntfy", "sent"), r.log)
	}
}
