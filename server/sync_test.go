package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// syncAll asks for a replay from cursor and returns the replayed frames
// and the sync.done. Replayed frames carry increasing cursors above the
// one asked for; frames sent live meanwhile (no cursor) are left out.
func syncAll(t *testing.T, d *testgw.Device, cursor int64) ([]client.Frame, client.Frame) {
	t.Helper()
	done := d.MustDo("sync", client.Lane{}, map[string]any{"cursor": cursor})
	if done.Type != "sync.done" {
		t.Fatalf("sync answered with %s", done.Raw)
	}
	got := until(t, d, reply(done.ID))
	var out []client.Frame
	last := cursor
	for _, f := range got[:len(got)-1] {
		if f.Cursor == 0 {
			continue
		}
		if f.Cursor <= last || f.ID != 0 {
			t.Errorf("replayed %s with cursor %d after %d", f.Raw, f.Cursor, last)
		}
		last = f.Cursor
		out = append(out, f)
	}
	var p struct {
		Cursor int64 `json:"cursor"`
	}
	done.Decode(&p)
	if p.Cursor < last {
		t.Errorf("sync.done cursor %d below the last replayed %d", p.Cursor, last)
	}
	return out, done
}

func syncFrom(t *testing.T, d *testgw.Device, cursor int64) []client.Frame {
	t.Helper()
	fs, _ := syncAll(t, d, cursor)
	return fs
}

func types(fs []client.Frame) []string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.Type
	}
	return s
}

// leave closes a device's connection cleanly and waits until it is gone.
func leave(d *testgw.Device) {
	d.Close()
	<-d.Done()
}

func TestSyncReplaysWhileAway(t *testing.T) { testSyncReplaysWhileAway(t) }

func testSyncReplaysWhileAway(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, on...)
	a := g.Dial(t, "phone")
	from := a.HelloAck().SyncCursor
	leave(a)

	b := g.Dial(t, "tablet")
	c := createChannel(t, b, "Reports", "")
	msg := send(t, b, def, "while you were away")
	b.Expect("agent.idle", nil)

	a = g.Dial(t, "phone")
	head := a.HelloAck().SyncCursor
	got, done := syncAll(t, a, from)
	want := []string{"channel.created", "message", "agent.busy", "message.stop", "agent.idle"}
	if !slices.Equal(types(got), want) {
		t.Fatalf("replayed %v, want %v", types(got), want)
	}
	if entry(t, got[0]).ChatID != c.ChatID || testgw.Str(t, got[1], "message_id") != msg || got[1].ChatID != "default" {
		t.Errorf("replayed %s / %s", got[0].Raw, got[1].Raw)
	}
	if got[len(got)-1].Cursor != head {
		t.Errorf("last replayed cursor %d, head %d", got[len(got)-1].Cursor, head)
	}
	p := testgw.P(t, done)
	if p["cursor"] != float64(head) || p["truncated"] != nil {
		t.Errorf("sync.done %s, want cursor %d", done.Raw, head)
	}
	// Caught up: a sync from the head replays nothing.
	if got := syncFrom(t, a, head); len(got) != 0 {
		t.Errorf("sync from the head replayed %v", types(got))
	}
}

func TestSyncTruncated(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	for _, n := range []string{"One", "Two", "Three", "Four"} {
		createChannel(t, a, n, "")
	}
	head := a.HelloAck().SyncCursor + 4
	removed, err := g.SQLite(t).PruneOutbox(context.Background(), 2, 0)
	if err != nil || removed != 2 {
		t.Fatalf("prune removed %d, %v", removed, err)
	}
	floor := head - 2

	b := g.Dial(t, "tablet")
	got, done := syncAll(t, b, 0)
	if p := testgw.P(t, done); p["truncated"] != true || p["cursor"] != float64(head) {
		t.Errorf("sync.done %s, want truncated at cursor %d", done.Raw, head)
	}
	if len(got) != 2 || got[0].Cursor != floor+1 || got[1].Cursor != head {
		t.Errorf("replayed %v, want what retention kept", types(got))
	}
	// From the floor on nothing is missing; what b got above is proven by
	// its second request.
	got, done = syncAll(t, b, floor)
	if p := testgw.P(t, done); p["truncated"] != nil {
		t.Errorf("sync.done %s, want no truncation", done.Raw)
	}
	if len(got) != 0 {
		t.Errorf("replayed %v again", types(got))
	}
}

func TestSyncMidStream(t *testing.T) {
	g := testgw.Start(t, slowEcho(20*time.Millisecond))
	b := g.Dial(t, "tablet")
	text := words(500)
	send(t, b, def, text)
	up := b.Expect("message.update", nil)
	streamID := testgw.Str(t, up, "message_id")

	a := g.Dial(t, "phone")
	if f := a.Next(); f.Type != "status" || testgw.Str(t, f, "state") != "online" {
		t.Fatalf("after hello.ack: %s, want status", f.Raw)
	}
	start := a.Next()
	if start.Type != "message.start" || start.ChatID != "default" || testgw.Str(t, start, "message_id") != streamID || testgw.Str(t, start, "role") != "assistant" {
		t.Fatalf("after status: %s, want the running stream's message.start", start.Raw)
	}
	update := a.Next()
	cur := testgw.Str(t, update, "text")
	if update.Type != "message.update" || testgw.Str(t, update, "message_id") != streamID || len(cur) < len(testgw.Str(t, up, "text")) || cur[:2] != "w1" {
		t.Fatalf("after message.start: %s, want the newest message.update", update.Raw)
	}
	b.MustDo("agent.stop", def, nil)
	stop := a.Expect("message.stop", nil)
	if testgw.Str(t, stop, "message_id") != streamID {
		t.Errorf("stop %s", stop.Raw)
	}
}

// Devices that connect while a reply streams fast get their greeting
// first: status, then the stream's start, and never an update before it.
func TestGreetingBeforeLiveFrames(t *testing.T) {
	g := testgw.Start(t)
	b := g.Dial(t, "tablet")
	send(t, b, def, words(9000))
	b.Expect("message.update", nil)
	for i := range 20 {
		a := g.Dial(t, "late"+string(rune('a'+i)))
		if f := a.Next(); f.Type != "status" {
			t.Fatalf("%s: first frame after hello.ack: %.100s", a.ID, f.Raw)
		}
		started := false
		for _, f := range barrier(t, a) {
			started = started || f.Type == "message.start"
			if f.Type == "message.update" && !started {
				t.Fatalf("%s: message.update before its message.start: %.100s", a.ID, f.Raw)
			}
		}
		a.CloseNow()
	}
	b.MustDo("agent.stop", def, nil) // if it still runs
}

// A delete empties the replay cache, so a sync across it takes older
// frames from the outbox and newer ones from the cache: the two must
// interleave in cursor order, without the deleted message's frames.
func TestSyncAcrossADeleteMixesStoredAndCachedFrames(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	from := a.HelloAck().SyncCursor
	leave(a)

	b := g.Dial(t, "tablet")
	gone := send(t, b, def, "delete me")
	b.Expect("agent.idle", nil)
	kept := send(t, b, def, "keep me")
	b.Expect("agent.idle", nil)
	b.MustDo("message.delete", def, map[string]any{"message_ids": []string{gone}})
	after := send(t, b, def, "after the delete")
	b.Expect("agent.idle", nil)

	a = g.Dial(t, "phone")
	got := syncFrom(t, a, from) // checks cursors strictly increase
	var users []string
	for _, f := range got {
		if f.Type == "message" && testgw.Str(t, f, "role") == "user" {
			users = append(users, testgw.Str(t, f, "message_id"))
		}
	}
	if !slices.Equal(users, []string{kept, after}) {
		t.Fatalf("replayed user messages %v, want %v (%v)", users, []string{kept, after}, types(got))
	}
	if count(got, "message.deleted") != 1 {
		t.Errorf("replayed %v, want the delete once", types(got))
	}
}
