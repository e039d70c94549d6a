package push

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakentfy"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/store"
)

// wait is how long a test waits for an expected event.
const wait = 10 * time.Second

// waitChange waits until cond holds, checked at each change of the
// pusher's queue, or fails.
func waitChange(t *testing.T, p *Pusher, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := p.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s did not happen within %v", what, wait)
		}
	}
}

// Issue 14 item 9: a push service that never answers one device's
// request delays no other device. The request is bounded here by an hour,
// so only working devices independently lets the second push through (the
// old serial queue waited out each request's 15 s before the next). When
// the gateway stops, the hung push is cut off unanswered and stays
// queued: the next start sends it.
func TestOneHangingDeviceDelaysNoOther(t *testing.T) {
	nt := fakentfy.New(t)
	nt.Set(func(s *fakentfy.Server) { s.Hang = map[string]bool{"stuck-topic": true} })
	path := filepath.Join(t.TempDir(), "p.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	bg := context.Background()
	st.SeeDevice(bg, store.Device{ID: "stuck", NtfyTopic: "stuck-topic"})
	st.SeeDevice(bg, store.Device{ID: "ok", NtfyTopic: "ok-topic"})
	backends := []Backend{&Ntfy{Server: nt.URL}}
	p := New(st, testLog(t), Config{Backends: backends, Content: ContentFull, Timeout: time.Hour})
	p.Enqueue(bg, "stuck", Note{Kind: KindMessage, Body: "to the stuck phone", Cursor: 1, Collapse: "default"})
	p.Enqueue(bg, "ok", Note{Kind: KindMessage, Body: "to the working phone", Cursor: 2, Collapse: "default"})

	ctx, cancel := context.WithCancel(bg)
	ran := make(chan struct{})
	go func() { defer close(ran); p.Run(ctx) }()
	if got := nt.Wait(t, 1, wait); got[0].Topic != "ok-topic" {
		t.Fatalf("published %+v", got)
	}
	// The server has it; wait for the pusher to have its answer too.
	waitChange(t, p, "the working phone's push recorded", func() bool {
		d, _ := st.Device(bg, "ok")
		return d.LastPushedCursor == 2
	})
	cancel()
	select {
	case <-ran:
	case <-time.After(wait):
		t.Fatal("Run did not stop: a hung request held it")
	}
	if n, _ := st.PendingPushes(bg); n != 1 {
		t.Fatalf("%d pending after the stop, want the hung push kept", n)
	}
	jobs, _ := st.DuePushes(bg, time.Now(), 10)
	if len(jobs) != 1 || jobs[0].DeviceID != "stuck" || jobs[0].Attempts != 0 {
		t.Fatalf("kept %+v, want the stuck push, untried and due", jobs)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The next start, with a service that answers again.
	nt.Set(func(s *fakentfy.Server) { s.Hang = nil })
	if st, err = store.Open(path); err != nil {
		t.Fatal(err)
	}
	New(st, testLog(t), Config{Backends: backends, Content: ContentFull}).SendDue(bg)
	if got := nt.Messages(); len(got) != 2 || got[1].Body != "to the stuck phone" {
		t.Fatalf("after the restart: %+v", got)
	}
}

// Issue 14 item 9: each request is bounded: one that hangs past the
// timeout counts as one, and is retried after its backoff.
func TestHangingRequestTimesOut(t *testing.T) {
	r := newNtfyRig(t, 0)
	r.nt.Set(func(s *fakentfy.Server) { s.Hang = map[string]bool{"phone-topic": true} })
	r.p.cfg.Timeout = 50 * time.Millisecond
	r.device(t, "phone", "phone-topic")
	r.enqueue(t, "phone", Note{Kind: KindMessage, Body: "hi", Cursor: 1, Collapse: "default"})
	r.p.SendDue(context.Background())
	if r.outcomes("ntfy", "timeout") != 1 || r.pending(t) != 1 {
		t.Fatalf("timeout counted %v, %d pending", r.outcomes("ntfy", "timeout"), r.pending(t))
	}
	jobs, _ := r.st.DuePushes(context.Background(), r.clk.Now().Add(time.Minute), 10)
	if len(jobs) != 1 || jobs[0].Attempts != 1 || jobs[0].LastErr == "" {
		t.Fatalf("queued %+v, want a retry with the error", jobs)
	}
}

// Issue 14 item 9: devices are worked at most Concurrency at once, each
// device's pushes one after another in the order they fell due.
func TestDevicesWorkedConcurrentlyEachInOrder(t *testing.T) {
	r := newNtfyRig(t, 0)
	gate := make(chan struct{})
	r.nt.Set(func(s *fakentfy.Server) { s.Gate = gate })
	r.p.cfg.Concurrency = 3
	const devices, lanes = 6, 3
	for d := range devices {
		r.device(t, fmt.Sprint("dev", d), fmt.Sprint("topic", d))
	}
	for l := range lanes {
		for d := range devices {
			r.enqueue(t, fmt.Sprint("dev", d), Note{Kind: KindMessage, Body: fmt.Sprint("lane", l), Cursor: int64(l*devices + d + 1), Collapse: fmt.Sprint("lane", l)})
			r.clk.Add(time.Millisecond) // due in this order
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); r.p.SendDue(context.Background()) }()
	for i := range devices * lanes {
		select {
		case <-r.nt.Entered():
		case <-time.After(wait):
			t.Fatalf("publish %d never came", i+1)
		}
		gate <- struct{}{}
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("SendDue did not return")
	}
	if _, most := r.nt.InFlight(); most > 3 {
		t.Fatalf("%d requests at once, the bound is 3", most)
	}
	next := map[string]int{}
	for _, m := range r.nt.Messages() {
		if want := fmt.Sprint("lane", next[m.Topic]); m.Body != want {
			t.Fatalf("%s got %s before %s: %+v", m.Topic, m.Body, want, r.nt.Messages())
		}
		next[m.Topic]++
	}
	if len(r.nt.Messages()) != devices*lanes || r.pending(t) != 0 {
		t.Fatalf("%d sent, %d pending", len(r.nt.Messages()), r.pending(t))
	}
}

// Newer news of a lane that arrives while its push is being sent is not
// lost: the send finishes only the version it sent, and the newer one
// goes out next.
func TestNewsDuringASendIsNotLost(t *testing.T) {
	r := newNtfyRig(t, 0)
	gate := make(chan struct{})
	r.nt.Set(func(s *fakentfy.Server) { s.Gate = gate })
	r.device(t, "phone", "phone-topic")
	r.enqueue(t, "phone", Note{Kind: KindMessage, Body: "first", Cursor: 1, Collapse: "default"})
	done := make(chan struct{})
	go func() { defer close(done); r.p.SendDue(context.Background()) }()
	select {
	case <-r.nt.Entered():
	case <-time.After(wait):
		t.Fatal("no publish")
	}
	r.enqueue(t, "phone", Note{Kind: KindMessage, Body: "second", Cursor: 2, Collapse: "default"})
	close(gate)
	<-done
	if n := r.pending(t); n != 1 {
		t.Fatalf("%d pending after the first went out, want the second", n)
	}
	r.p.SendDue(context.Background())
	if got := bodies(r.nt); len(got) != 2 || got[1] != "second" || r.pending(t) != 0 {
		t.Fatalf("sent %q, %d pending", got, r.pending(t))
	}
	if d, _ := r.st.Device(context.Background(), "phone"); d.LastPushedCursor != 2 {
		t.Fatalf("last_pushed_cursor %d", d.LastPushedCursor)
	}
}

// testLog logs through the test.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestMain fails the package when a test leaves goroutines behind: every
// worker a pusher starts must be gone once its Run or SendDue returned.
// It stops the PostgreSQL server replicas_test.go started first.
func TestMain(m *testing.M) {
	pgtest.Main(m)
}

// A device whose stored push registration does not decode (a damaged
// file, a hand edit) costs the others nothing: their pushes go out, and
// its own backs off like a failing push instead of being tried again at
// every dispatch ahead of theirs.
func TestUndecodableRegistrationBacksOff(t *testing.T) {
	nt := fakentfy.New(t)
	path := filepath.Join(t.TempDir(), "p.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bg := context.Background()
	st.SeeDevice(bg, store.Device{ID: "bad", NtfyTopic: "bad-topic"})
	st.SeeDevice(bg, store.Device{ID: "ok", NtfyTopic: "ok-topic"})
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)") // the store's indexer may hold the writer
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE devices SET webpush = '{"endpoint":' WHERE device_id = 'bad'`); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	p := New(st, testLog(t), Config{Backends: []Backend{&Ntfy{Server: nt.URL}}, Content: ContentFull, Now: func() time.Time { return now }})
	p.Enqueue(bg, "bad", Note{Kind: KindMessage, Body: "to the damaged device", Cursor: 1, Collapse: "default"})
	p.Enqueue(bg, "ok", Note{Kind: KindMessage, Body: "to the working one", Cursor: 2, Collapse: "default"})
	p.SendDue(bg)
	if got := nt.Messages(); len(got) != 1 || got[0].Topic != "ok-topic" {
		t.Fatalf("published %+v, want the working device's push alone", got)
	}
	if jobs, _ := st.DuePushes(bg, now, 10); len(jobs) != 0 {
		t.Fatalf("due again at once: %+v", jobs)
	}
	jobs, _ := st.DuePushes(bg, now.Add(time.Hour), 10)
	if len(jobs) != 1 || jobs[0].DeviceID != "bad" || jobs[0].Attempts != 1 || !strings.Contains(jobs[0].LastErr, "devices") {
		t.Fatalf("kept %+v, want the damaged device's push with one attempt and its error", jobs)
	}
}
