package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// seed puts n alternating user/assistant messages into a lane's history
// directly, ids h000… oldest first.
func seed(t *testing.T, g *testgw.GW, lane core.Lane, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	ts := time.Now().UnixMilli()
	err := g.App.Store.Write(context.Background(), func(tx store.Tx) error {
		for i := range n {
			ids[i] = fmt.Sprintf("m_%s%03d", prefix, i)
			role := core.RoleUser
			if i%2 == 1 {
				role = core.RoleAssistant
			}
			if err := tx.InsertMessage(core.Message{ID: ids[i], Lane: lane, Role: role, Text: fmt.Sprint("text ", i), TS: ts + int64(i)}, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func pageIDs(h histPage) []string {
	ids := make([]string, len(h.Messages))
	for i, m := range h.Messages {
		ids[i] = m.MessageID
	}
	return ids
}

func TestHistoryPaging(t *testing.T) { testHistoryPaging(t) }

func testHistoryPaging(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, on...)
	ids := seed(t, g, core.Lane{ChatID: "default"}, "h", 250)
	// History in a lane without a directory entry is not reachable.
	seed(t, g, core.Lane{ChatID: "default", ThreadID: "t_side"}, "t", 3)
	a := g.Dial(t, "phone")
	for _, tc := range []struct {
		name    string
		payload map[string]any
		want    []string
		more    bool
	}{
		{"newest page, default limit", nil, ids[200:], true},
		{"limit", map[string]any{"limit": 10}, ids[240:], true},
		{"zero limit is the default", map[string]any{"limit": 0}, ids[200:], true},
		{"limit above the maximum", map[string]any{"limit": 1000}, ids[50:], true},
		{"older page", map[string]any{"before_message_id": ids[200], "limit": 100}, ids[100:200], true},
		{"oldest page", map[string]any{"before_message_id": ids[50], "limit": 100}, ids[:50], false},
		{"exactly the rest", map[string]any{"before_message_id": ids[50], "limit": 50}, ids[:50], false},
		{"before the first", map[string]any{"before_message_id": ids[0]}, []string{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := a.In(t)
			h, err := history(t, a, def, tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			if got := pageIDs(h); !slices.Equal(got, tc.want) {
				t.Fatalf("page of %d from %v, want %d from %v", len(got), first(got), len(tc.want), first(tc.want))
			}
			if h.HasMore != tc.more {
				t.Errorf("has_more = %v, want %v", h.HasMore, tc.more)
			}
			if len(tc.want) > 0 && h.OldestMessageID != tc.want[0] {
				t.Errorf("oldest_message_id = %q, want %q", h.OldestMessageID, tc.want[0])
			}
			for _, m := range h.Messages {
				i := slices.Index(ids, m.MessageID)
				if m.Text != fmt.Sprint("text ", i) || m.TS == 0 || m.Role != []string{"user", "assistant"}[i%2] {
					t.Errorf("message %+v", m)
				}
			}
		})
	}
	t.Run("walk every page", func(t *testing.T) {
		a := a.In(t)
		var all []string
		before := ""
		for {
			p := map[string]any{"limit": 64}
			if before != "" {
				p["before_message_id"] = before
			}
			h, err := history(t, a, def, p)
			if err != nil {
				t.Fatal(err)
			}
			all = append(pageIDs(h), all...)
			if !h.HasMore {
				break
			}
			before = h.OldestMessageID
		}
		if !slices.Equal(all, ids) {
			t.Fatalf("walked %d messages, want %d in order", len(all), len(ids))
		}
	})
	t.Run("thread lane", func(t *testing.T) {
		a := a.In(t)
		th := createChannel(t, a, "Side", "default")
		tl := client.Lane{ChatID: "default", ThreadID: th.ChatID}
		h, err := history(t, a, tl, nil)
		if err != nil || len(h.Messages) != 0 || h.HasMore || h.OldestMessageID != "" {
			t.Fatalf("new thread history %+v, %v", h, err)
		}
		msg := send(t, a, tl, "in the thread")
		a.Expect("agent.idle", nil)
		h, err = history(t, a, tl, nil)
		if err != nil || len(h.Messages) != 2 || h.Messages[0].MessageID != msg || h.OldestMessageID != msg {
			t.Fatalf("thread history %+v, %v", h, err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		a := a.In(t)
		_, err := history(t, a, client.Lane{ChatID: "chan_nope"}, nil)
		wantCode(t, err, "not_found")
		_, err = history(t, a, client.Lane{ChatID: "default", ThreadID: "t_side"}, nil)
		wantCode(t, err, "not_found")
		_, err = history(t, a, def, map[string]any{"before_message_id": "m_nope"})
		wantCode(t, err, "not_found")
		// An id of another lane is unknown in this one.
		c := createChannel(t, a, "Other", "")
		_, err = history(t, a, client.Lane{ChatID: c.ChatID}, map[string]any{"before_message_id": ids[10]})
		wantCode(t, err, "not_found")
	})
}

func first(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return ids[0]
}

func TestMessageDelete(t *testing.T) {
	g := testgw.Start(t)
	// away connects once, to learn where the outbox stands, and leaves.
	away := g.Dial(t, "away")
	from := away.HelloAck().SyncCursor
	away.Close()
	<-away.Done()

	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	keep := send(t, a, def, "keep me")
	a.Expect("agent.idle", nil)
	gone := send(t, a, def, "delete me")
	stop := a.Expect("message.stop", nil)
	answer := testgw.Str(t, stop, "message_id")
	a.Expect("agent.idle", nil)

	ids := []string{gone, answer, "m_never_existed"}
	f := a.MustDo("message.delete", def, map[string]any{"message_ids": ids})
	if f.Type != "message.deleted" || f.ChatID != "default" {
		t.Fatalf("message.delete answered with %s", f.Raw)
	}
	var p struct {
		IDs []string `json:"message_ids"`
	}
	f.Decode(&p)
	if !slices.Equal(p.IDs, ids) {
		t.Errorf("message_ids = %v, want %v", p.IDs, ids)
	}
	broadcast(t, f, b)

	h, err := history(t, a, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pageIDs(h); len(got) != 2 || got[0] != keep {
		t.Fatalf("history after delete = %v, want %s and its reply", got, keep)
	}

	// A device that was away learns of the deletion and never sees the
	// deleted messages.
	away = g.Dial(t, "away")
	got := syncFrom(t, away, from)
	var deleted bool
	for _, f := range got {
		id := testgw.Str(t, f, "message_id")
		if (f.Type == "message" || f.Type == "message.stop") && (id == gone || id == answer) {
			t.Errorf("sync replayed a deleted message: %s", f.Raw)
		}
		deleted = deleted || f.Type == "message.deleted"
	}
	if !deleted {
		t.Errorf("sync did not replay message.deleted: %s", typesOf(got))
	}

	// Idempotent: deleting again is answered and broadcast all the same.
	f = a.MustDo("message.delete", def, map[string]any{"message_ids": []string{gone}})
	if f.Type != "message.deleted" {
		t.Fatalf("second delete answered with %s", f.Raw)
	}
	broadcast(t, f, b)

	_, err = a.Do("message.delete", def, map[string]any{"message_ids": []string{}})
	wantCode(t, err, "unsupported")
	_, err = a.Do("message.delete", client.Lane{ChatID: "chan_nope"}, map[string]any{"message_ids": []string{keep}})
	wantCode(t, err, "not_found")
	// Another lane's id is not deleted by naming it here.
	c := createChannel(t, a, "Other", "")
	a.MustDo("message.delete", client.Lane{ChatID: c.ChatID}, map[string]any{"message_ids": []string{keep}})
	if h, _ := history(t, a, def, nil); pageIDs(h)[0] != keep {
		t.Errorf("a delete in another lane removed %s", keep)
	}
}

func TestReadReceiptFromDevice(t *testing.T) {
	g := testgw.Start(t)
	away := g.Dial(t, "away")
	from := away.HelloAck().SyncCursor
	away.Close()
	<-away.Done()

	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	c := g.Dial(t, "laptop")
	msg := send(t, a, def, "read me")
	a.Expect("agent.idle", nil)

	// The chat may come in the envelope or in the payload.
	if err := b.Send(context.Background(), "read.receipt", client.Lane{}, map[string]any{"chat_id": "default", "message_id": msg}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*testgw.Device{a, c} {
		f := d.Expect("read.receipt", is(t, "read.receipt", "message_id", msg))
		if f.ChatID != "default" || f.ID != 0 {
			t.Errorf("%s: %s", d.ID, f.Raw)
		}
	}
	none(t, "tablet", barrier(t, b), func(f client.Frame) bool { return f.Type == "read.receipt" })

	if err := b.Send(context.Background(), "read.receipt", def, map[string]any{"message_id": msg}); err != nil {
		t.Fatal(err)
	}
	a.Expect("read.receipt", is(t, "read.receipt", "message_id", msg))
	none(t, "tablet", barrier(t, b), func(f client.Frame) bool { return f.Type == "read.receipt" })

	_, err := b.Do("read.receipt", def, map[string]any{})
	wantCode(t, err, "unsupported")
	_, err = b.Do("read.receipt", client.Lane{ChatID: "chan_nope"}, map[string]any{"message_id": msg})
	wantCode(t, err, "not_found")

	// Stored: one row per device and message…
	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.Dir, server.DBFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var dev string
	var n int
	if err := db.QueryRow(`SELECT device_id, COUNT(*) FROM reads WHERE message_id = ?`, msg).Scan(&dev, &n); err != nil {
		t.Fatal(err)
	}
	if dev != "tablet" || n != 1 {
		t.Errorf("reads: %d rows, device %q", n, dev)
	}
	// …and outboxed for the devices that were away, not for its author.
	got := syncFrom(t, g.Dial(t, "away"), from)
	if n := count(got, "read.receipt"); n != 2 {
		t.Errorf("away replayed %d read receipts, want 2: %s", n, typesOf(got))
	}
	b.Close()
	<-b.Done()
	got = syncFrom(t, g.Dial(t, "tablet"), from)
	if n := count(got, "read.receipt"); n != 0 {
		t.Errorf("its author replayed %d read receipts", n)
	}
}

func count(fs []client.Frame, typ string) int {
	n := 0
	for _, f := range fs {
		if f.Type == typ {
			n++
		}
	}
	return n
}
