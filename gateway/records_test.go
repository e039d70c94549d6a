package gateway_test

import (
	"bytes"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// A row the store cannot decode is never skipped. These tests damage a
// row of a stopped gateway's database, as a bad disk or a hand edit would,
// and start it again.

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }

func (l *logBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func damage(t *testing.T, dir, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, server.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("%s changed nothing", q)
	}
}

func restart(t *testing.T, g *testgw.GW) (*testgw.GW, *logBuf) {
	t.Helper()
	g.Close()
	logs := new(logBuf)
	return testgw.StartIn(t, g.Dir, func(c *server.AppConfig) {
		c.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}), logs
}

func TestSyncRefusesAnUndecodableFrame(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	d.MustDo("message.send", client.Lane{ChatID: "default"}, map[string]any{"text": "hello there"})
	d.Expect("agent.idle", nil)
	d.Close()
	// The person's message frame, cut short.
	damage(t, g.Dir, `UPDATE outbox SET body = substr(body, 1, 20) WHERE cursor = (SELECT MIN(cursor) FROM outbox WHERE type = 'message')`)
	g, logs := restart(t, g)
	// Another device: the phone proved it got the frames (it answered the
	// gateway's ping), so its sync would not read them again.
	d = g.Dial(t, "tablet")
	_, err := d.Do("sync", client.Lane{}, map[string]any{"cursor": 0})
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != "internal" {
		t.Fatalf("sync over a damaged frame answered %v, want an internal error", err)
	}
	if l := logs.String(); !strings.Contains(l, "sync failed") || !strings.Contains(l, "outbox row 1 does not decode") {
		t.Fatalf("the log does not name the frame:\n%s", l)
	}
	// The frames after it are not lost: a sync from past it works.
	done := d.MustDo("sync", client.Lane{}, map[string]any{"cursor": 1})
	if done.Type != "sync.done" {
		t.Fatalf("sync past the damaged frame: %s", done.Raw)
	}
}

func TestTurnOnAnUndecodableConversationFails(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "phone")
	def := client.Lane{ChatID: "default"}
	d.MustDo("message.send", def, map[string]any{"text": "first"})
	d.Expect("agent.idle", nil)
	d.Close()
	damage(t, g.Dir, `INSERT INTO conversation (chat_id, body) VALUES ('default', '{"v":1,"role":"user","content":"ok"}'), ('default', '{"role": ')`)
	g, _ = restart(t, g)
	d = g.Dial(t, "phone")
	d.MustDo("message.send", def, map[string]any{"text": "second"})
	failed := d.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "role") == "system" })
	if text := testgw.Str(t, failed, "text"); !strings.HasPrefix(text, "The agent failed: this lane's stored state cannot be read") ||
		!strings.Contains(text, "conversation row 2") || !strings.Contains(text, "/new") {
		t.Fatalf("the failure says %q", text)
	}
	d.Expect("agent.idle", nil)
	// /new still works on it (it counts the entries, it does not read
	// them), and the lane answers again afterwards.
	d.MustDo("message.send", def, map[string]any{"text": "/new"})
	pk := d.Expect("picker.confirm", nil)
	d.MustDo("picker.select", client.Lane{}, map[string]any{"picker_id": testgw.Str(t, pk, "picker_id"), "value": "once"})
	d.Expect("message", func(f client.Frame) bool { return strings.Contains(testgw.Str(t, f, "text"), "New session") })
	d.MustDo("message.send", def, map[string]any{"text": "third"})
	stop := d.Expect("message.stop", nil)
	if !strings.Contains(testgw.Str(t, stop, "final_text"), "third") {
		t.Fatalf("after /new the lane answered %s", stop.Raw)
	}
}
