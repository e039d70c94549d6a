package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/sqlitetest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
)

// Issue 17: a connection's consecutive message.send commit together
// (gateway.SendPipe), and nothing a device sees changes but the speed.

// parked is an agent whose turns end only when the gateway stops, so a
// send commits its message and its turn and nothing else.
type parked struct{}

func (parked) Name() string { return "parked" }
func (parked) Run(ctx context.Context, _ agent.Turn, _ func(agent.Event)) error {
	<-ctx.Done()
	return ctx.Err()
}

func parkedAgent(c *server.AppConfig) { c.Agent = parked{} }

// pipeline writes message.send frames with ids from+0, from+1, … without
// waiting for any answer, in one burst: text(i) is the i-th text, sent to
// lanes in turn (a lane queues at most turn.MaxQueued turns).
func pipeline(t *testing.T, d *testgw.Device, lanes []client.Lane, from int64, n int, text func(i int) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	for i := range n {
		lane := lanes[i%len(lanes)]
		b, err := irisv1.Marshal(irisv1.Envelope{V: irisv1.Version, ID: from + int64(i), Type: irisv1.TypeMessageSend, ChatID: lane.ChatID}, irisv1.MessageSend{Text: text(i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.SendRaw(ctx, b, false); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// answersOf reads d's frames until ids from … from+n-1 are all answered and
// returns those answers in the order they came (other frames are left).
func answersOf(t *testing.T, d *testgw.Device, from int64, n int) []client.Frame {
	t.Helper()
	var out []client.Frame
	until(t, d, func(f client.Frame) bool {
		if f.ID >= from && f.ID < from+int64(n) {
			out = append(out, f)
		}
		return len(out) == n
	})
	return out
}

// holdWrites takes SQLite's write lock on the gateway's database from a
// connection of the test's own, as another writer would, so the gateway's
// group commit waits (busy_timeout) with whatever it queued; release lets
// it go.
func holdWrites(t *testing.T, g *testgw.GW) (release func()) {
	return sqlitetest.HoldWriteLock(t, filepath.Join(g.Dir, server.DBFile))
}

// fourLanes makes four channels for a pipeline to rotate over.
func fourLanes(t *testing.T, d *testgw.Device) []client.Lane {
	var ls []client.Lane
	for i := range 4 {
		ls = append(ls, client.Lane{ChatID: createChannel(t, d, fmt.Sprint("lane ", i), "").ChatID})
	}
	return ls
}

// waitValue waits until fn's value is v.
func waitValue(t *testing.T, what string, fn func() float64, v float64) {
	t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	for fn() != v {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", what, fn(), v)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func value(m prometheus.Metric) *dto.Metric {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	return &d
}

func gauge(g prometheus.Gauge) func() float64 {
	return func() float64 { return value(g).GetGauge().GetValue() }
}

func counter(c prometheus.Counter) func() float64 {
	return func() float64 { return value(c).GetCounter().GetValue() }
}

// bigBatches counts the transactions that held more than n writes.
func bigBatches(h prometheus.Histogram, n float64) uint64 {
	d := value(h).GetHistogram()
	below := uint64(0)
	for _, b := range d.GetBucket() {
		if b.GetUpperBound() <= n {
			below = b.GetCumulativeCount()
		}
	}
	return d.GetSampleCount() - below
}

// A pipeline of sends with a refused one in the middle is answered in
// send order: each echo with its id, the refusal where it was sent; the
// ping and the history written right behind them are barriers that see
// every send before them.
func TestPipelinedSendsAnswerInOrder(t *testing.T) {
	g := testgw.Start(t, parkedAgent)
	d := g.Dial(t, "phone")
	lane := client.Lane{ChatID: "default"}
	const n, bad = 30, 17
	text := func(i int) string {
		if i == bad {
			return "   " // refused: empty_message
		}
		return fmt.Sprintf("piped %02d", i)
	}
	pipeline(t, d, []client.Lane{lane}, 100, n, text)
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	for _, raw := range []string{
		`{"v":1,"id":200,"type":"ping","payload":{"ts":1}}`,
		`{"v":1,"id":201,"type":"history","chat_id":"default","payload":{"limit":200}}`,
	} {
		if err := d.SendRaw(ctx, []byte(raw), false); err != nil {
			t.Fatal(err)
		}
	}
	got := answersOf(t, d, 100, n)
	for i, f := range got {
		if f.ID != 100+int64(i) {
			t.Fatalf("answer %d has id %d, want %d (%s)", i, f.ID, 100+i, f.Raw)
		}
		if i == bad {
			if f.Type != "error" || testgw.Str(t, f, "code") != "unsupported" {
				t.Fatalf("the empty send was answered with %s", f.Raw)
			}
			continue
		}
		if f.Type != "message" || testgw.Str(t, f, "text") != text(i) {
			t.Fatalf("send %d was answered with %s", i, f.Raw)
		}
	}
	pong := d.Expect("pong", nil)
	if pong.ID != 200 {
		t.Fatalf("pong = %s", pong.Raw)
	}
	f := d.Expect("history", nil)
	var h histPage
	if err := f.Decode(&h); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range h.Messages {
		texts = append(texts, m.Text)
	}
	var want []string
	for i := range n {
		if i != bad {
			want = append(want, text(i))
		}
	}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("history after the pipeline:\n%q\nwant\n%q", texts, want)
	}
}

// Sends queued behind a transaction that cannot commit yet all go into
// the next one: the commit-batch metric sees one transaction of them.
func TestPipelinedSendsShareATransaction(t *testing.T) {
	g := testgw.Start(t, parkedAgent)
	d := g.Dial(t, "phone")
	m := g.App.Metrics
	lanes := fourLanes(t, d)
	release := holdWrites(t, g)
	const n = gateway.MaxPipelined
	before := bigBatches(m.CommitBatch, n/4)
	pipeline(t, d, lanes, 100, n, func(i int) string { return fmt.Sprint("batched ", i) })
	waitValue(t, "sends pipelined", gauge(m.Pipelined), n)
	release()
	for i, f := range answersOf(t, d, 100, n) {
		if f.Type != "message" || f.ID != 100+int64(i) {
			t.Fatalf("answer %d = %s", i, f.Raw)
		}
	}
	// The transaction that waited holds the sends queued when it began
	// (at least the first), the next one all the others: one of the two
	// holds at least half of them. One at a time, none would hold two.
	if got := bigBatches(m.CommitBatch, n/4) - before; got < 1 {
		t.Fatalf("no transaction held more than %d writes", n/4)
	}
	waitValue(t, "sends pipelined", gauge(m.Pipelined), 0)
}

// The read loop takes at most MaxPipelined sends ahead of their commits:
// the next waits (counted), and everything is answered in order once
// the commits go through.
func TestPipelineIsBounded(t *testing.T) {
	// A token's turns are bounded too (64): lifted, so the pipe's bound
	// is the one met.
	g := testgw.Start(t, parkedAgent, func(c *server.AppConfig) { c.Bounds.PerToken, c.Bounds.InAll = 1024, 1024 })
	d := g.Dial(t, "phone")
	m := g.App.Metrics
	lanes := fourLanes(t, d)
	release := holdWrites(t, g)
	const n = gateway.MaxPipelined + 20
	pipeline(t, d, lanes, 100, n, func(i int) string { return fmt.Sprint("bounded ", i) })
	waitValue(t, "pipeline full", counter(m.PipelineFull), 1)
	if got := gauge(m.Pipelined)(); got != gateway.MaxPipelined {
		t.Fatalf("sends pipelined while full = %v, want %d", got, gateway.MaxPipelined)
	}
	release()
	for i, f := range answersOf(t, d, 100, n) {
		if f.Type != "message" || f.ID != 100+int64(i) {
			t.Fatalf("answer %d = %s", i, f.Raw)
		}
	}
	waitValue(t, "sends pipelined", gauge(m.Pipelined), 0)
}

// A device that drops while its sends are queued loses none of them: they
// commit, and a device that connects next finds them in history.
func TestCloseMidPipelineKeepsQueuedSends(t *testing.T) {
	g := testgw.Start(t, parkedAgent)
	d := g.Dial(t, "phone")
	m := g.App.Metrics
	release := holdWrites(t, g)
	const n = 30
	text := func(i int) string { return fmt.Sprint("dropped ", i) }
	pipeline(t, d, []client.Lane{{ChatID: "default"}}, 100, n, text)
	waitValue(t, "sends pipelined", gauge(m.Pipelined), n)
	d.CloseNow()
	release()
	g.WaitOffline(t, "phone")
	waitValue(t, "sends pipelined", gauge(m.Pipelined), 0)
	h, err := history(t, g.Dial(t, "tablet"), client.Lane{ChatID: "default"}, map[string]any{"limit": 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != n {
		t.Fatalf("history holds %d messages, want %d", len(h.Messages), n)
	}
	for i, msg := range h.Messages {
		if msg.Text != text(i) {
			t.Fatalf("message %d = %q, want %q", i, msg.Text, text(i))
		}
	}
}

// The agent answers a pipeline's messages in the order they were sent:
// their turns were queued in send order.
func TestPipelinedTurnsRunInOrder(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	const n = 20
	text := func(i int) string { return fmt.Sprintf("turn%02d", i) }
	pipeline(t, d, []client.Lane{{ChatID: "default"}}, 100, n, text)
	var finals []string
	until(t, d, func(f client.Frame) bool {
		if f.Type == "message.stop" {
			finals = append(finals, testgw.Str(t, f, "final_text"))
		}
		return len(finals) == n
	})
	for i, s := range finals {
		if !strings.Contains(s, text(i)) {
			t.Fatalf("reply %d = %q, want the echo of %q (replies: %q)", i, s, text(i), finals)
		}
	}
}
