package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
)

const crashToken = "crash-test-token"

// TestCrashMidStream runs the real irisgate binary, kills it with SIGKILL
// while replies stream to two devices, restarts it on the same data
// directory and port, and checks what the devices can recover:
//
//   - every message id a device received live (echo, read.receipt,
//     message.start/update/stop) is in its lane's history or in a replay;
//   - history holds no message twice;
//   - the outbox cursor never goes backwards: hello.ack sync_cursor and
//     sync.done after the restart are >= every cursor seen before the crash
//     (hello.ack, sync.done, replayed frames, /healthz outbox_head), and
//     each replay is in strictly increasing cursor order;
//   - every reply the crash interrupted ends, after the restart, with a
//     message.stop whose final_text is a non-empty prefix of what was being
//     streamed (the progress saved before the crash), history agrees with
//     it, and its lane gets an agent.idle;
//   - every frame validates against the schema, and the process shuts down
//     cleanly at the end.
//
// One device ("phone") is a client.Client, which reconnects and syncs by
// itself; the other ("tablet") dials and syncs by hand.
func TestCrashMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the irisgate binary")
	}
	bin := irisgateBinary(t)
	data := t.TempDir()
	addr := freeAddr(t)
	url := "ws://" + addr + "/ws"
	env := []string{"IRISGATE_TOKEN=" + crashToken, "IRISGATE_ECHO_DELAY=5ms"}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	p1 := startServe(t, "irisgate#1", bin, addr, data, env...)

	// The tablet dials by hand and opens a second lane, so two lanes stream
	// at once (and the outbox head is past 0 before the phone first connects).
	tab1, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "tablet", DeviceName: "tablet"})
	if err != nil {
		t.Fatalf("tablet dial: %v", err)
	}
	defer tab1.CloseNow()
	rTab1 := record(t, "tablet#1", tab1.Events())
	preCursors := []int64{tab1.HelloAck().SyncCursor}
	f, err := tab1.Request(ctx, "channel.create", client.Lane{}, map[string]any{"name": "crash lane", "kind": "channel"})
	if err != nil {
		t.Fatalf("channel.create: %v", err)
	}
	def := client.Lane{ChatID: "default"}
	side := client.Lane{ChatID: str(t, f, "chat_id")}

	// The phone is a Client: it reconnects and syncs from its cursor itself.
	phone := client.New(url, client.Options{Token: crashToken, DeviceID: "phone", DeviceName: "phone"}, 0)
	rPhone := record(t, "phone", phone.Events())
	runCtx, stopPhone := context.WithCancel(ctx)
	phoneDone := make(chan error, 1)
	go func() { phoneDone <- phone.Run(runCtx) }()
	t.Cleanup(func() {
		stopPhone()
		select {
		case <-phoneDone:
		case <-time.After(10 * time.Second):
			t.Errorf("phone client did not stop")
		}
		rPhone.waitClosed(10 * time.Second)
	})
	pc, err := phone.Conn(ctx)
	if err != nil {
		t.Fatalf("phone connect: %v", err)
	}
	preCursors = append(preCursors, pc.HelloAck().SyncCursor)
	if phone.Cursor() == 0 {
		t.Fatalf("phone cursor is 0 after connecting to a gateway whose head is past 0")
	}

	// Short turns finish before the crash; long ones (600 words at 5ms a
	// word: 3s) are cut by it; the last one of the default lane is still
	// queued then (and, pending turns living in memory only, never runs).
	sent := map[string]string{} // user message id -> text
	send := func(dev string, c interface {
		Request(context.Context, string, client.Lane, any) (client.Frame, error)
	}, lane client.Lane, text string) {
		t.Helper()
		f, err := c.Request(ctx, "message.send", lane, map[string]any{"text": text})
		if err != nil {
			t.Fatalf("%s: message.send: %v", dev, err)
		}
		if f.Type != "message" || str(t, f, "role") != "user" {
			t.Fatalf("%s: message.send answered with %s", dev, f.Raw)
		}
		sent[str(t, f, "message_id")] = text
	}
	longDef, longSide := words("d", 600), words("s", 600)
	send("phone", phone, def, words("x", 10))
	send("phone", phone, def, longDef)
	send("phone", phone, def, words("q", 5)) // queued behind longDef
	send("tablet", tab1, side, words("y", 10))
	send("tablet", tab1, side, longSide)

	// Wait until both long replies have streamed at least 250 words
	// (>= 1.25s, so their progress has been saved at least once) on both
	// devices, and the short replies have finished.
	streamedEnough := func(fs []client.Frame) bool {
		ok := map[client.Lane]bool{}
		stops := 0
		for _, f := range fs {
			switch f.Type {
			case "message.update":
				var p struct{ Text string }
				f.Decode(&p)
				if len(strings.Fields(p.Text)) >= 250 && (strings.HasPrefix(longDef, p.Text) || strings.HasPrefix(longSide, p.Text)) {
					ok[laneOf(f)] = true
				}
			case "message.stop":
				stops++
			}
		}
		return ok[def] && ok[side] && stops >= 2
	}
	rTab1.waitFor(20*time.Second, "both long replies streaming", streamedEnough)
	rPhone.waitFor(20*time.Second, "both long replies streaming", streamedEnough)

	// A sync mid-stream: the tablet's cursor moves to the head of now.
	f, err = tab1.Request(ctx, "sync", client.Lane{}, map[string]any{"cursor": tab1.HelloAck().SyncCursor})
	if err != nil {
		t.Fatalf("tablet sync before the crash: %v", err)
	}
	tabCursor := num(t, f, "cursor")
	preCursors = append(preCursors, tabCursor)
	head, err := p1.healthHead(ctx)
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	preCursors = append(preCursors, head)

	// Crash.
	p1.kill()
	if !rTab1.waitClosed(10 * time.Second) {
		t.Fatalf("tablet's connection still open 10s after the gateway was killed")
	}
	preTab := rTab1.snapshot()
	checkReplays(t, "tablet#1", preTab)
	for _, f := range preTab {
		if f.Cursor > 0 {
			preCursors = append(preCursors, f.Cursor)
		}
	}
	preMax := maxOf(preCursors)

	// The replies cut by the crash: started, not stopped, on the tablet.
	interrupted := map[string]client.Lane{}
	for _, f := range preTab {
		if f.Type == "message.start" {
			interrupted[str(t, f, "message_id")] = laneOf(f)
		}
	}
	for _, f := range preTab {
		if f.Type == "message.stop" {
			delete(interrupted, str(t, f, "message_id"))
		}
	}
	if len(interrupted) != 2 {
		t.Fatalf("want the 2 long replies cut by the crash, got %d: %v (tablet got %s)", len(interrupted), interrupted, summary(preTab))
	}
	prePhoneN := len(rPhone.snapshot())

	// Restart on the same data directory and port.
	p2 := startServe(t, "irisgate#2", bin, addr, data, env...)

	tab2, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "tablet", DeviceName: "tablet"})
	if err != nil {
		t.Fatalf("tablet redial: %v", err)
	}
	defer tab2.CloseNow()
	rTab2 := record(t, "tablet#2", tab2.Events())
	if c := tab2.HelloAck().SyncCursor; c < preMax {
		t.Errorf("hello.ack sync_cursor after the restart = %d, below %d seen before the crash", c, preMax)
	}
	f, err = tab2.Request(ctx, "sync", client.Lane{}, map[string]any{"cursor": tabCursor})
	if err != nil {
		t.Fatalf("tablet sync after the restart: %v", err)
	}
	if c := num(t, f, "cursor"); c < preMax || c < tab2.HelloAck().SyncCursor {
		t.Errorf("sync.done cursor after the restart = %d; before the crash %d was seen, hello.ack said %d", c, preMax, tab2.HelloAck().SyncCursor)
	}

	// Every interrupted reply ends with a message.stop, and its lane gets
	// an agent.idle, on both devices. The two need not come in this order:
	// one may arrive live (committed by the recovery after the device
	// connected) and the other by the replay (committed before).
	endsAll := func(fs []client.Frame) bool {
		for id, lane := range interrupted {
			if !has(fs, func(f client.Frame) bool { return f.Type == "message.stop" && str(t, f, "message_id") == id }) ||
				!has(fs, func(f client.Frame) bool { return f.Type == "agent.idle" && laneOf(f) == lane }) {
				return false
			}
		}
		return true
	}
	tabAfter := rTab2.waitFor(20*time.Second, "message.stop for each interrupted reply and agent.idle in its lane", endsAll)
	phoneAll := rPhone.waitFor(30*time.Second, "a sync after reconnecting, message.stop for each interrupted reply and agent.idle in its lane", func(fs []client.Frame) bool {
		return has(fs[prePhoneN:], func(f client.Frame) bool { return f.Type == "sync.done" }) && endsAll(fs[prePhoneN:])
	})
	phoneAfter := phoneAll[prePhoneN:]
	checkReplays(t, "tablet#2", tabAfter)
	checkReplays(t, "phone", phoneAll)

	// Cursors after the restart never go below those seen before.
	for _, f := range phoneAfter {
		if f.Type == "sync.done" {
			if c := num(t, f, "cursor"); c < preMax {
				t.Errorf("phone: sync.done cursor %d after the restart, below %d seen before the crash", c, preMax)
			}
		}
	}
	if c, err := phone.Conn(ctx); err == nil && c.HelloAck().SyncCursor < preMax {
		t.Errorf("phone: hello.ack sync_cursor %d after the restart, below %d seen before the crash", c.HelloAck().SyncCursor, preMax)
	}
	if c := phone.Cursor(); c < preMax {
		t.Errorf("phone: client cursor %d after the restart, below %d seen before the crash", c, preMax)
	}

	// The interrupted replies' stops carry the progress saved before the
	// crash: a non-empty prefix of what was streaming. Replayed, they are
	// frames committed after the crash.
	stopText := map[string]string{}
	for _, dev := range []struct {
		name string
		fs   []client.Frame
	}{{"tablet", tabAfter}, {"phone", phoneAfter}} {
		for id, lane := range interrupted {
			for _, f := range dev.fs {
				if f.Type != "message.stop" || str(t, f, "message_id") != id {
					continue
				}
				if laneOf(f) != lane {
					t.Errorf("%s: message.stop of %s in lane %v, its stream was in %v", dev.name, id, laneOf(f), lane)
				}
				text := str(t, f, "final_text")
				full := longDef
				if lane == side {
					full = longSide
				}
				// Non-empty: the reply streamed >= 1.25s before the crash and
				// its progress is saved every gateway.Config.ProgressEvery
				// (1s by default, not settable from the command line).
				if text == "" || !strings.HasPrefix(full, text) {
					t.Errorf("%s: interrupted reply %s ends with final_text %q, want a non-empty prefix of the streamed text (the progress saved before the crash)", dev.name, id, clip(text))
				}
				if f.Cursor != 0 && f.Cursor <= head {
					t.Errorf("%s: message.stop of interrupted reply %s replayed with cursor %d, not after the pre-crash head %d", dev.name, id, f.Cursor, head)
				}
				if prev, ok := stopText[id]; ok && prev != text {
					t.Errorf("interrupted reply %s: final_text differs between devices: %q vs %q", id, clip(prev), clip(text))
				}
				stopText[id] = text
			}
		}
	}

	// History, per lane: no duplicates, and every id seen is there (or in
	// a replay).
	seen := map[string]client.Lane{}
	replayed := map[string]bool{}
	for _, fs := range [][]client.Frame{preTab, tabAfter, phoneAll} {
		for _, f := range fs {
			if f.Binary || f.Type == "history" {
				continue
			}
			id := str(t, f, "message_id")
			if id == "" {
				continue
			}
			seen[id] = laneOf(f)
			if f.Cursor > 0 {
				replayed[id] = true
			}
		}
	}
	for id := range sent {
		if _, ok := seen[id]; !ok {
			t.Errorf("user message %s was answered to its sender but never seen as a frame", id)
		}
	}
	inHistory := map[string]string{} // id -> text
	for _, lane := range []client.Lane{def, side} {
		ms := fullHistory(ctx, t, tab2, lane)
		for _, m := range ms {
			if _, dup := inHistory[m.ID]; dup {
				t.Errorf("history of %v holds message %s twice", lane, m.ID)
			}
			inHistory[m.ID] = m.Text
			if want, ok := sent[m.ID]; ok && m.Text != want {
				t.Errorf("history: user message %s text %q, sent %q", m.ID, clip(m.Text), clip(want))
			}
		}
	}
	for id, lane := range seen {
		if _, ok := inHistory[id]; !ok && !replayed[id] {
			t.Errorf("message %s (lane %v) was received live but is neither in history nor replayed", id, lane)
		}
	}
	for id := range sent {
		if _, ok := inHistory[id]; !ok {
			t.Errorf("user message %s is missing from history", id)
		}
	}
	for id, text := range stopText {
		if h, ok := inHistory[id]; !ok || h != text {
			t.Errorf("interrupted reply %s: history text %q, its message.stop said %q", id, clip(h), clip(text))
		}
	}
	for id, text := range stopText {
		t.Logf("interrupted reply %s (%v) recovered with %d words", id, interrupted[id], len(strings.Fields(text)))
	}
	t.Logf("cursor before the crash %d, after: tablet hello.ack %d; frames: tablet %d+%d, phone %d", preMax, tab2.HelloAck().SyncCursor, len(preTab), len(tabAfter), len(phoneAll))
	if !strings.Contains(p2.output(), "finished a reply interrupted by a crash") {
		t.Errorf("the restarted gateway did not log recovering the interrupted replies")
	}

	// A graceful stop of the restarted gateway ends the process cleanly.
	tab2.Close()
	stopPhone()
	if err := p2.stop(20 * time.Second); err != nil {
		t.Errorf("graceful stop after the restart: %v", err)
	}
}

type histMsg struct {
	ID   string `json:"message_id"`
	Role string `json:"role"`
	Text string `json:"text"`
}

// fullHistory pages through a lane's whole history, oldest first.
func fullHistory(ctx context.Context, t *testing.T, c *client.Conn, lane client.Lane) []histMsg {
	t.Helper()
	var all []histMsg
	before := ""
	for range 100 {
		req := map[string]any{"limit": 200}
		if before != "" {
			req["before_message_id"] = before
		}
		f, err := c.Request(ctx, "history", lane, req)
		if err != nil {
			t.Fatalf("history %v: %v", lane, err)
		}
		var p struct {
			Messages []histMsg `json:"messages"`
			HasMore  bool      `json:"has_more"`
			Oldest   string    `json:"oldest_message_id"`
		}
		if err := f.Decode(&p); err != nil {
			t.Fatalf("history %v: %v", lane, err)
		}
		all = append(p.Messages, all...)
		if !p.HasMore {
			return all
		}
		before = p.Oldest
	}
	t.Fatalf("history %v: more than 100 pages", lane)
	return nil
}

// checkReplays checks that the frames each sync replayed (those carrying a
// cursor, up to the sync.done) come in strictly increasing cursor order,
// none above the sync.done cursor.
func checkReplays(t *testing.T, who string, fs []client.Frame) {
	t.Helper()
	var last int64
	for _, f := range fs {
		switch {
		case f.Type == "sync.done":
			if c := num(t, f, "cursor"); last > c {
				t.Errorf("%s: replayed cursor %d above the sync.done cursor %d", who, last, c)
			}
			last = 0
		case f.Cursor > 0:
			if f.Cursor <= last {
				t.Errorf("%s: replay out of order: cursor %d after %d", who, f.Cursor, last)
			}
			last = f.Cursor
		}
	}
}

func maxOf(xs []int64) int64 {
	var m int64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// TestCrashWhileBusy kills the gateway after a turn announced agent.busy
// but before its reply streamed a word (the echo agent waits an hour
// before its first word), restarts it and checks that a device that syncs
// learns the lane is no longer busy: the durable agent.busy it can replay
// must be followed by an agent.idle, or the app shows "thinking…" forever.
func TestCrashWhileBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the irisgate binary")
	}
	bin := irisgateBinary(t)
	data := t.TempDir()
	addr := freeAddr(t)
	url := "ws://" + addr + "/ws"
	env := []string{"IRISGATE_TOKEN=" + crashToken, "IRISGATE_ECHO_DELAY=1h"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	def := client.Lane{ChatID: "default"}

	p1 := startServe(t, "irisgate#1", bin, addr, data, env...)
	c1, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "phone"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c1.CloseNow()
	r1 := record(t, "phone#1", c1.Events())
	cursor := c1.HelloAck().SyncCursor
	if _, err := c1.Request(ctx, "message.send", def, map[string]any{"text": "never answered"}); err != nil {
		t.Fatalf("message.send: %v", err)
	}
	r1.waitFor(10*time.Second, "agent.busy", func(fs []client.Frame) bool {
		return has(fs, func(f client.Frame) bool { return f.Type == "agent.busy" })
	})
	p1.kill()
	r1.waitClosed(10 * time.Second)

	p2 := startServe(t, "irisgate#2", bin, addr, data, env...)
	c2, err := client.Dial(ctx, url, client.Options{Token: crashToken, DeviceID: "phone"})
	if err != nil {
		t.Fatalf("redial: %v", err)
	}
	defer c2.CloseNow()
	r2 := record(t, "phone#2", c2.Events())
	if _, err := c2.Request(ctx, "sync", client.Lane{}, map[string]any{"cursor": cursor}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	// The replay holds the lane's agent.busy; after the restart nothing
	// runs in the lane, so the last word about it must be agent.idle. Its
	// replay ends at sync.done, so what the device knows is final here
	// unless an idle is still on its way: wait for one, with a deadline.
	all := append(r1.snapshot(), r2.snapshot()...)
	_, idle := r2.waitForOK(5*time.Second, func(fs []client.Frame) bool {
		return lastBusyState(fs, def) == "agent.idle"
	})
	if !idle {
		t.Errorf("after the crash and restart the default lane is still busy for a syncing device: the last of agent.busy/agent.idle it got is %q (frames before: %s; after: %s)",
			lastBusyState(r2.snapshot(), def), summary(all[:len(r1.snapshot())]), summary(r2.snapshot()))
	}
	// The turn had not said a word: no stopped reply shows it was cut
	// off, so the lane says so, and that it is not run again.
	r2.waitFor(5*time.Second, "a note that the turn was cut off", func(fs []client.Frame) bool {
		return has(fs, func(f client.Frame) bool {
			if f.Type != "message" || laneOf(f) != def {
				return false
			}
			var p struct{ Role, Text string }
			f.Decode(&p)
			return p.Role == "system" && strings.Contains(p.Text, "cut off before it answered “never answered”")
		})
	})
	_ = p2
}

// lastBusyState is the type of the last agent.busy or agent.idle frame of
// lane in fs, "" when there is none.
func lastBusyState(fs []client.Frame, lane client.Lane) string {
	s := ""
	for _, f := range fs {
		if (f.Type == "agent.busy" || f.Type == "agent.idle") && laneOf(f) == lane {
			s = f.Type
		}
	}
	return s
}
