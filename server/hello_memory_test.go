package server_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
)

// What a hello reads from memory instead of the store (issue 17: the
// storm): the directory, icons and order included, kept right by the
// committed channel events; the outbox head, from the commit log; and the
// device row, written in the group commit and read in the same statement.

// ackChannel finds a channel in a hello.ack.
func ackChannel(cs []irisv1.Channel, chatID string) (irisv1.Channel, bool) {
	for _, c := range cs {
		if c.ChatID == chatID {
			return c, true
		}
	}
	return irisv1.Channel{}, false
}

// Each hello.ack after a channel event shows the directory as the event
// left it: a rename, an icon, a favourite moving it first, a deletion. The
// first hello reads the directory, and every one after it is answered
// from memory: a list that outlived an event would show the old one.
func TestHelloAckDirectoryFollowsChannelEvents(t *testing.T) { testHelloAckDirectory(t) }

func testHelloAckDirectory(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, on...)
	a := g.Dial(t, "phone") // its hello.ack read the directory: held from now on
	c := createChannel(t, a, "Reports", "")
	lane := client.Lane{ChatID: c.ChatID}
	hello := func(id string) []irisv1.Channel {
		t.Helper()
		d := g.Dial(t, id)
		defer d.Close()
		return d.HelloAck().Channels
	}
	if ch, ok := ackChannel(hello("tablet"), c.ChatID); !ok || ch.Name != "Reports" {
		t.Fatalf("after channel.created: %+v (found %v)", ch, ok)
	}

	a.MustDo("channel.rename", lane, map[string]any{"name": "Weekly"})
	icon := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n a small icon"))
	a.MustDo("channel.icon", lane, map[string]any{"icon": icon})
	ch, ok := ackChannel(hello("laptop"), c.ChatID)
	if !ok || ch.Name != "Weekly" || ch.Icon != icon {
		t.Fatalf("after rename and icon: %+v (found %v), want name Weekly with the icon", ch, ok)
	}
	if cs := hello("laptop"); cs[0].ChatID != "default" {
		t.Fatalf("before the favourite: first %s, want default", cs[0].ChatID)
	}

	a.MustDo("channel.favorite", lane, map[string]any{"on": true})
	if cs := hello("watch"); cs[0].ChatID != c.ChatID || !cs[0].Favorite || cs[0].Icon != icon {
		t.Fatalf("after the favourite: first %+v, want %s, a favourite with its icon", cs[0], c.ChatID)
	}

	a.MustDo("channel.delete", lane, nil)
	cs := hello("browser")
	if _, ok := ackChannel(cs, c.ChatID); ok || len(cs) != 1 {
		t.Fatalf("after the delete: %+v, want the default alone", cs)
	}
	if got := channels(t, a); len(got) != 1 || got[0].ChatID != "default" {
		t.Fatalf("channel.list after the delete: %+v", got)
	}
}

// hello.ack's sync_cursor is the outbox head: read from the store by the
// first hello after a restart (the commit log has committed nothing yet),
// then kept by the commit log, and sync.done says the same head.
func TestHelloSyncCursorIsTheHeadAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	g := testgw.StartIn(t, dir)
	a := g.Dial(t, "phone")
	createChannel(t, a, "One", "")
	createChannel(t, a, "Two", "")
	if got := g.Dial(t, "tablet").HelloAck().SyncCursor; got != 2 {
		t.Fatalf("sync_cursor after two frames: %d, want 2", got)
	}
	g.Close()

	g = testgw.StartIn(t, dir)
	b := g.Dial(t, "phone")
	if got := b.HelloAck().SyncCursor; got != 2 {
		t.Fatalf("sync_cursor after a restart: %d, want the stored head 2", got)
	}
	createChannel(t, b, "Three", "")
	c := g.Dial(t, "tablet")
	if got := c.HelloAck().SyncCursor; got != 3 {
		t.Fatalf("sync_cursor after a third frame: %d, want 3", got)
	}
	done := c.MustDo("sync", client.Lane{}, map[string]any{"cursor": 0})
	var p struct {
		Cursor int64 `json:"cursor"`
	}
	if err := done.Decode(&p); err != nil || done.Type != "sync.done" || p.Cursor != 3 {
		t.Fatalf("sync answered %s (%v), want sync.done at 3", done.Raw, err)
	}
}

// A hello records its device (name, token, last seen) in the group
// commit without waiting for it: hello.ack comes while another writer
// holds SQLite's lock, and the row is there once anything the device
// does next is committed (one log, in order). The ack reports the
// device's last_pushed_cursor, read from its row.
func TestHelloRecordsTheDevice(t *testing.T) {
	g := testgw.Start(t)
	st := g.SQLite(t)
	ctx := context.Background()
	release := holdWrites(t, g)
	a := g.Dial(t, "phone") // named "phone" by testgw; acked with the lock held
	release()
	send(t, a, def, "after the hello") // committed after the device's row
	if name, err := st.DeviceName(ctx, "phone"); err != nil || name != "phone" {
		t.Fatalf("after a commit behind the hello the device's name is %q (%v), want phone", name, err)
	}
	dev, err := st.Device(ctx, "phone")
	if err != nil || dev.TokenID == "" {
		t.Fatalf("device row %+v (%v), want the token it came with", dev, err)
	}
	if got := a.HelloAck().LastPushedCursor; got != 0 {
		t.Fatalf("last_pushed_cursor of a device never woken: %d", got)
	}
	a.Close()
	g.WaitOffline(t, "phone")
	if err := st.SetLastPushed(ctx, "phone", 7); err != nil {
		t.Fatal(err)
	}
	if got := g.Dial(t, "phone").HelloAck().LastPushedCursor; got != 7 {
		t.Fatalf("last_pushed_cursor after a push woke it at 7: %d", got)
	}
}

// A hello that carries a push address waits for its row: the address is
// durable once hello.ack is sent, so a push can wake the device even if
// the gateway stops right after.
func TestHelloPushAddressIsDurableAtAck(t *testing.T) {
	g := testgw.Start(t)
	st := g.SQLite(t)
	release := holdWrites(t, g)
	r := dialRaw(t, g)
	hello := helloFrame(testgw.Token, "phone")
	hello["payload"].(map[string]any)["ntfy_topic"] = "irisgate-phone-topic-1"
	r.writeJSON(hello)
	type answer struct {
		f   client.Frame
		err error
	}
	acked := make(chan answer, 1)
	go func() {
		f, err := r.read()
		acked <- answer{f, err}
	}()
	// While another writer holds SQLite's lock the row cannot commit, so
	// no hello.ack may come. (A short look: a wrong early ack shows at
	// once; a slow machine can only make this pass.)
	select {
	case a := <-acked:
		t.Fatalf("hello with a push address answered %s (%v) before its row could commit", a.f.Raw, a.err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	a := <-acked
	if a.err != nil || a.f.Type != "hello.ack" {
		t.Fatalf("hello answered %s (%v)", a.f.Raw, a.err)
	}
	dev, err := st.Device(context.Background(), "phone")
	if err != nil || dev.NtfyTopic != "irisgate-phone-topic-1" {
		t.Fatalf("at hello.ack the device row is %+v (%v), want its ntfy topic", dev, err)
	}
}
