package e2e

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// burstAgent streams a long reply as fast as the devices that keep up
// let it, in two phases. First bigSteps steps of one word of text
// (coalescable message.update) and one tool.start with a large preview:
// more bytes than a stalled socket absorbs, so a device that stops reading
// has its writer stuck. Then smallSteps small tool.start frames (never
// dropped, never coalesced): more than a queue's item cap, so that
// device's queue overflows. A durable tool.end follows every toolEndEvery
// steps.
//
// An in-process agent could emit frames faster than any socket writer
// drains them, overflowing every device; so before each step it waits
// until the devices it paces on have received all but window of the
// tool.start frames (the gateway itself has no backpressure on agents).
type burstAgent struct {
	bigSteps, smallSteps int
	preview              string
	pace                 *pacer
}

const toolEndEvery = 100

func (a *burstAgent) Name() string { return "burst" }

func (a *burstAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	for i := range a.bigSteps + a.smallSteps {
		if err := a.pace.wait(ctx, i-paceWindow); err != nil {
			return err
		}
		tool := &core.Tool{Index: i, Name: "burst", Preview: "s"}
		if i < a.bigSteps {
			emit(agent.Event{Kind: agent.Text, Text: burstWord(i)})
			tool.Preview = a.preview
		}
		emit(agent.Event{Kind: agent.ToolStart, Tool: tool})
		if i%toolEndEvery == toolEndEvery-1 {
			emit(agent.Event{Kind: agent.ToolEnd, Tool: &core.Tool{Index: i, Name: "burst", OK: true, Duration: 0.001}})
		}
	}
	emit(agent.Event{Kind: agent.Usage, Model: "burst", Tokens: a.bigSteps})
	return nil
}

func burstWord(i int) string { return fmt.Sprintf("w%d ", i) }

func burstText(steps int) string {
	var b strings.Builder
	for i := range steps {
		b.WriteString(burstWord(i))
	}
	return b.String()
}

// pacer tracks, per paced device, how many tool.start frames it has
// received.
type pacer struct {
	mu      sync.Mutex
	got     map[string]int
	changed chan struct{} // closed and replaced on every change
}

func newPacer(devices ...string) *pacer {
	p := &pacer{got: map[string]int{}, changed: make(chan struct{})}
	for _, d := range devices {
		p.got[d] = 0
	}
	return p
}

func (p *pacer) saw(device string, index int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.got[device]; ok && index+1 > p.got[device] {
		p.got[device] = index + 1
		close(p.changed)
		p.changed = make(chan struct{})
	}
}

// wait returns once every paced device has received n tool.start frames.
// After 30s without progress it gives up waiting (the test then fails on
// what the devices got).
func (p *pacer) wait(ctx context.Context, n int) error {
	stall := time.NewTimer(30 * time.Second)
	defer stall.Stop()
	for {
		p.mu.Lock()
		least := n
		for _, g := range p.got {
			least = min(least, g)
		}
		ch := p.changed
		p.mu.Unlock()
		if least >= n {
			return nil
		}
		select {
		case <-ch:
		case <-stall.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// heapWatch samples HeapInuse until stopped and reports the largest value.
type heapWatch struct {
	stop chan struct{}
	done chan uint64
}

func watchHeap() *heapWatch {
	h := &heapWatch{stop: make(chan struct{}), done: make(chan uint64, 1)}
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-h.stop:
				h.done <- peak
				return
			case <-tk.C:
			}
		}
	}()
	return h
}

func (h *heapWatch) peak() uint64 {
	close(h.stop)
	return <-h.done
}

const (
	// 400 × 16 KiB = 6.4 MiB: more than a stalled loopback connection
	// holds (the sender's buffer is capped by net.ipv4.tcp_wmem at 4 MiB;
	// the receiver's stays small while it does not read).
	bigSteps     = 400
	burstPreview = 16 << 10
	// The agent runs at most paceWindow tool.start frames ahead of the
	// fast devices: far below their queue's caps (1024 items, and 8 MiB at
	// 16 KiB a frame).
	paceWindow = 128
	heapBound  = 256 << 20
)

// queueLimits caps the queues at fewer items than hub.DefaultLimits (the
// byte cap is the default), so that overflowing one takes a few thousand
// frames, not tens of thousands: the test stays fast under -race.
var queueLimits = hub.Limits{MaxItems: 1024, MaxBytes: hub.DefaultLimits.MaxBytes}

// smallSteps: whatever batch a stuck writer took, it held at most
// MaxItems of these; the rest (more than MaxItems) overflow the queue.
var smallSteps = 3 * queueLimits.MaxItems

// TestSlowConsumer: four devices watch a fast stream (6.4 MiB of large
// frames, then 3k small ones). Two keep up; two stop reading, so their
// sockets back up. The two fast ones must still get every frame (all
// tool.start in order, every tool.end, the full final text, agent.idle);
// the gateway's memory must stay bounded: the slow devices' queues hit
// their cap (hub.ErrSlow) and they are disconnected; and each slow device,
// reconnecting, must recover with sync every durable frame it missed.
//
// The slow devices differ in how they end. "lagging" reads again once the
// stream is over: it gets what was written to its socket and then the
// gateway's close. "gone" never reads again (its app restarts): the frames
// still in its socket buffers are lost, and since the gateway read nothing
// from it after writing them they are unproven (DECISIONS.md) and must be
// replayed. (A regression test: the hub used to count any disconnect,
// even a reset, as a receipt.)
func TestSlowConsumer(t *testing.T) {
	pace := newPacer("fast1", "fast2")
	ag := &burstAgent{bigSteps: bigSteps, smallSteps: smallSteps, preview: strings.Repeat("p", burstPreview), pace: pace}
	g := testgw.Start(t, func(c *server.AppConfig) {
		c.Agent = ag
		c.QueueLimits = queueLimits
		// Keepalive pings would also drop a device that does not read (it
		// cannot answer them); here only the queue's cap may.
		c.Server.PingInterval = time.Hour
	})
	def := client.Lane{ChatID: "default"}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	want := burstText(bigSteps)

	fast1, fast2 := g.Dial(t, "fast1"), g.Dial(t, "fast2")
	defer fast1.CloseNow()
	defer fast2.CloseNow()
	rFast1 := recordSlim(t, "fast1", fast1.Events(), burstSlimmer(t, "fast1", want, pace))
	rFast2 := recordSlim(t, "fast2", fast2.Events(), burstSlimmer(t, "fast2", want, pace))

	// The slow devices: an Events buffer of one frame that nobody drains,
	// so their read loops stop reading the socket after two frames.
	type slowDev struct {
		id     string
		c      *client.Conn
		cursor int64
		conn   *hub.Conn // the gateway's side
	}
	var slows []*slowDev
	for _, id := range []string{"lagging", "gone"} {
		c, err := client.Dial(ctx, g.URL, client.Options{Token: testgw.Token, DeviceID: id, EventBuffer: 1})
		if err != nil {
			t.Fatalf("%s dial: %v", id, err)
		}
		defer c.CloseNow()
		sd := &slowDev{id: id, c: c, cursor: c.HelloAck().SyncCursor}
		g.App.Hub.Each(func(hc *hub.Conn) {
			if hc.DeviceID == id {
				sd.conn = hc
			}
		})
		if sd.conn == nil {
			t.Fatalf("%s has no hub connection", id)
		}
		slows = append(slows, sd)
	}

	heap := watchHeap()
	start := time.Now()
	if _, err := fast1.Request(ctx, "message.send", def, map[string]any{"text": "go"}); err != nil {
		t.Fatalf("message.send: %v", err)
	}
	turnDone := func(fs []client.Frame) bool {
		i := lastIndex(fs, func(f client.Frame) bool { return f.Type == "message.stop" })
		return i >= 0 && has(fs[i:], func(f client.Frame) bool { return f.Type == "agent.idle" })
	}
	fs1 := rFast1.waitFor(60*time.Second, "message.stop then agent.idle", turnDone)
	fs2 := rFast2.waitFor(60*time.Second, "message.stop then agent.idle", turnDone)
	t.Logf("both fast devices got the whole turn in %v", time.Since(start).Round(time.Millisecond))
	checkBurst(t, "fast1", fs1, want)
	checkBurst(t, "fast2", fs2, want)

	// Memory stayed bounded, and the slow devices' queues hit their cap:
	// an overflow can only happen while the turn publishes, which is over.
	peak := heap.peak()
	t.Logf("peak HeapInuse %.1f MiB", float64(peak)/(1<<20))
	if peak > heapBound {
		t.Errorf("HeapInuse peaked at %.1f MiB, above the %d MiB bound", float64(peak)/(1<<20), heapBound>>20)
	}
	for _, sd := range slows {
		if !errors.Is(sd.conn.Err(), hub.ErrSlow) {
			t.Errorf("%s: queue closed with %v, want hub.ErrSlow: %d frames after its writer got stuck exceed the cap of %d items",
				sd.id, sd.conn.Err(), smallSteps, queueLimits.MaxItems)
		}
	}

	for _, sd := range slows {
		t.Run(sd.id, func(t *testing.T) {
			if sd.id == "gone" {
				sd.c.CloseNow() // whatever is still in its socket buffers is lost
			}
			rSlow := recordSlim(t, sd.id+"#1", sd.c.Events(), burstSlimmer(t, sd.id+"#1", want, nil))
			if !rSlow.waitClosed(20 * time.Second) {
				t.Fatalf("the connection did not end")
			}
			waitOffline(t, g, sd.id, 20*time.Second)
			live := rSlow.snapshot()
			t.Logf("read %d frames live: %s", len(live), clip(summary(live)))
			if sd.id == "gone" {
				// The gateway read nothing from it after its hello, so no
				// frame written since can count as proven. The echo is left
				// out: the device did read it.
				head, err := g.App.Store.OutboxHead(ctx)
				if err != nil {
					t.Fatal(err)
				}
				err = g.SQLite(t).ScanOutbox(ctx, sd.cursor, head, func(r store.OutboxRow) error {
					if r.Type != "message" && sd.conn.Proven(r.Cursor) {
						t.Errorf("%s frame at cursor %d is marked proven, but the device never read it and sent nothing after it", r.Type, r.Cursor)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}

			// Reconnect and sync from its cursor.
			d := g.Dial(t, sd.id)
			defer d.CloseNow()
			r2 := recordSlim(t, sd.id+"#2", d.Events(), burstSlimmer(t, sd.id+"#2", want, nil))
			if _, err := d.Request(ctx, "sync", client.Lane{}, map[string]any{"cursor": sd.cursor}); err != nil {
				t.Fatalf("sync: %v", err)
			}
			after := r2.waitFor(20*time.Second, "sync.done", func(fs []client.Frame) bool {
				return has(fs, func(f client.Frame) bool { return f.Type == "sync.done" })
			})
			checkReplays(t, sd.id+"#2", after)

			// Every durable frame a fast device got, it now has: live or
			// replayed. fast2 is the reference (fast1, the sender, also got
			// its read.receipt, which is not outboxed).
			got := map[string]bool{}
			for _, f := range append(live, after...) {
				got[durableKey(t, f)] = true
			}
			missing, durable := 0, 0
			for _, f := range fs2 {
				k := durableKey(t, f)
				if k == "" {
					continue
				}
				durable++
				if !got[k] {
					missing++
					if missing <= 10 {
						t.Errorf("never got durable frame %s (live: %d frames, replay: %d frames)", k, len(live), len(after))
					}
				}
			}
			if missing > 10 {
				t.Errorf("… %d durable frames missing in all", missing)
			}
			if least := 4 + (bigSteps+smallSteps)/toolEndEvery; durable < least {
				t.Errorf("the reference device got only %d durable frames, want at least %d", durable, least)
			}
		})
	}
}

// waitOffline waits until the gateway no longer lists a live connection of
// the device. The hub has no notification for that, so it is polled, under
// a deadline.
func waitOffline(t *testing.T, g *testgw.GW, deviceID string, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for g.App.Hub.Online(deviceID) {
		select {
		case <-deadline.C:
			t.Fatalf("device %s still connected after %v", deviceID, timeout)
		case <-tick.C:
		}
	}
}

// durableKey names an outboxed frame by what it is about ("" for frames
// that are not outboxed), so a live copy and a replayed one match.
func durableKey(t *testing.T, f client.Frame) string {
	switch f.Type {
	case "message", "message.stop", "commentary":
		return f.Type + "|" + f.ChatID + "|" + f.ThreadID + "|" + str(t, f, "message_id")
	case "tool.end":
		return fmt.Sprintf("%s|%s|%s|%d", f.Type, f.ChatID, f.ThreadID, num(t, f, "index"))
	case "agent.busy", "agent.idle":
		return f.Type + "|" + f.ChatID + "|" + f.ThreadID
	}
	return ""
}

// burstSlimmer checks the large frames of a burstAgent turn as they
// arrive (tool.start previews whole, message.update texts growing
// prefixes of want) and keeps only their small fields.
func burstSlimmer(t *testing.T, who string, want string, pace *pacer) func(client.Frame) client.Frame {
	prev := ""
	return func(f client.Frame) client.Frame {
		switch f.Type {
		case "tool.start":
			var p struct {
				Index   int    `json:"index"`
				Preview string `json:"preview"`
			}
			if err := f.Decode(&p); err != nil {
				t.Errorf("%s: tool.start: %v", who, err)
			}
			wantLen := 1
			if p.Index < bigSteps {
				wantLen = burstPreview
			}
			if len(p.Preview) != wantLen {
				t.Errorf("%s: tool.start %d carries a preview of %d bytes, want %d", who, p.Index, len(p.Preview), wantLen)
			}
			if pace != nil {
				pace.saw(who, p.Index)
			}
			f.Payload = []byte(fmt.Sprintf(`{"index":%d}`, p.Index))
			f.Raw = nil
		case "message.update":
			var p struct {
				Text string `json:"text"`
			}
			f.Decode(&p)
			if !strings.HasPrefix(p.Text, prev) || !strings.HasPrefix(want, p.Text) {
				t.Errorf("%s: message.update text is not a growing prefix of the reply (len %d after %d)", who, len(p.Text), len(prev))
			}
			prev = p.Text
			f.Payload = []byte(fmt.Sprintf(`{"len":%d}`, len(p.Text)))
			f.Raw = nil
		}
		return f
	}
}

// checkBurst checks what a fast device got of a burstAgent turn: every
// tool.start in order, every tool.end, the full final text.
func checkBurst(t *testing.T, who string, fs []client.Frame, want string) {
	t.Helper()
	next := 0
	ends := 0
	var stop client.Frame
	for _, f := range fs {
		switch f.Type {
		case "tool.start":
			if i := int(num(t, f, "index")); i != next {
				t.Fatalf("%s: tool.start %d, want %d: a never-dropped frame was lost or reordered", who, i, next)
			}
			next++
		case "tool.end":
			ends++
		case "message.stop":
			stop = f
		}
	}
	if steps := bigSteps + smallSteps; next != steps || ends != steps/toolEndEvery {
		t.Errorf("%s: got %d tool.start and %d tool.end frames, want %d and %d", who, next, ends, steps, steps/toolEndEvery)
	}
	if got := str(t, stop, "final_text"); got != want {
		t.Errorf("%s: final_text has %d bytes, want the full %d", who, len(got), len(want))
	}
	for _, typ := range []string{"message", "agent.busy", "message.start", "agent.idle"} {
		if !has(fs, func(f client.Frame) bool { return f.Type == typ }) {
			t.Errorf("%s: no %s frame", who, typ)
		}
	}
}

func lastIndex(fs []client.Frame, match func(client.Frame) bool) int {
	for i := len(fs) - 1; i >= 0; i-- {
		if match(fs[i]) {
			return i
		}
	}
	return -1
}
