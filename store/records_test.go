package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

func TestRecordsRoundTrip(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lane := core.Lane{ChatID: "default", ThreadID: "t_1"}
	pct, lat := 40, 1.5
	m := core.Message{ID: "m1", Lane: lane, Role: core.RoleAssistant, Text: "hi", TS: 5,
		Media:   []core.Media{{ID: "md_1", Kind: "image", Mime: "image/png", Size: 3, Filename: "a.png", SHA256: "ab"}},
		Runtime: &core.Runtime{Model: "gpt-5", ContextPct: &pct, Latency: &lat}}
	ev := &core.Event{Type: core.EvMessageStop, Lane: lane, TS: 9, Message: &m, ReplyTo: &core.ReplyAddr{ConnID: 1, ReqID: 2}}
	entry := record.ConversationEntry{Role: "assistant", ToolCalls: []record.ToolCall{{ID: "c1", Name: "terminal", Arguments: "{}"}}, MessageID: "m1"}
	yes := true
	settings := record.LaneSettings{Model: "gpt-5", ShowReasoning: &yes, Approvals: "ask"}
	var cursor int64
	err := s.Write(ctx, func(tx Tx) error {
		if err := tx.InsertMessage(m, false); err != nil {
			return err
		}
		var err error
		if cursor, _, err = tx.AppendEvent(ev); err != nil {
			return err
		}
		if err := tx.AppendConversation(lane, "m1", entry); err != nil {
			return err
		}
		return tx.SetLaneSettings(lane, settings)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []*core.Event
	if err := s.ScanEvents(ctx, 0, cursor, func(e *core.Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := &core.Event{Type: core.EvMessageStop, Lane: lane, TS: 9, Message: &m, Cursor: cursor} // no ReplyTo: a replay answers nothing
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("scanned %+v, want %+v", got, want)
	}
	if gm, err := s.Message(ctx, "m1"); err != nil || !reflect.DeepEqual(gm, m) {
		t.Fatalf("message %+v, %v", gm, err)
	}
	entry.V = record.Version
	if conv, err := s.Conversation(ctx, lane); err != nil || len(conv) != 1 || !reflect.DeepEqual(conv[0], entry) {
		t.Fatalf("conversation %+v, %v", conv, err)
	}
	if n, err := s.ConversationLen(ctx, lane); err != nil || n != 1 {
		t.Fatalf("conversation length %d, %v", n, err)
	}
	settings.V = record.Version
	if ls, err := s.LaneSettings(ctx, lane); err != nil || !reflect.DeepEqual(ls, settings) {
		t.Fatalf("settings %+v, %v", ls, err)
	}
	if ls, err := s.LaneSettings(ctx, core.Lane{ChatID: "none"}); err != nil || ls.Model != "" {
		t.Fatalf("a lane without settings: %+v, %v", ls, err)
	}
	sub := record.WebPush{Endpoint: "https://push.example/x", Keys: record.WebPushKeys{P256dh: "p", Auth: "a"}}
	if err := s.SetWebPush(ctx, "browser", sub); err != nil {
		t.Fatal(err)
	}
	if err := s.SetWebPush(ctx, "browser", record.WebPush{Endpoint: "http://plain"}); err == nil {
		t.Fatal("an unusable subscription was stored")
	}
	sub.V = record.Version
	if d, err := s.Device(ctx, "browser"); err != nil || d.WebPush == nil || *d.WebPush != sub {
		t.Fatalf("device %+v, %v", d, err)
	}
	if ds, err := s.PushDevices(ctx); err != nil || len(ds) != 1 || *ds[0].WebPush != sub {
		t.Fatalf("push devices %+v, %v", ds, err)
	}
	if d, err := s.Device(ctx, "unknown"); err != nil || d.WebPush != nil {
		t.Fatalf("unknown device %+v, %v", d, err)
	}
}

// rawExec writes to the file behind the store's back, as an older
// irisgate (or a damaged disk) would have.
func rawExec(t *testing.T, s *Store, q string, args ...any) {
	t.Helper()
	if _, err := s.w.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

func TestUndecodableRowIsAnError(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lane := core.Lane{ChatID: "default"}
	c1 := appendEvent(t, s, msgEvent(lane, "m_ok"))
	rawExec(t, s, `INSERT INTO outbox (type, chat_id, body, ts) VALUES ('message', 'default', '{"v":1,"type":', 1)`)
	appendEvent(t, s, msgEvent(lane, "m_after"))
	var seen []int64
	err := s.ScanEvents(ctx, 0, 100, func(e *core.Event) error { seen = append(seen, e.Cursor); return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Table != "outbox" || ce.Key != "2" || len(seen) != 1 || seen[0] != c1 {
		t.Fatalf("scan over a broken frame: %v (seen %v)", err, seen)
	}
	rawExec(t, s, `INSERT INTO messages (id, chat_id, role, media, ts) VALUES ('m_bad', 'default', 'user', '[{"ID":', 1)`)
	if _, err := s.Message(ctx, "m_bad"); !errors.As(err, &ce) || ce.Table != "messages" {
		t.Fatalf("message with broken media: %v", err)
	}
	if _, _, err := s.History(ctx, lane, "", 10); !errors.As(err, &ce) {
		t.Fatalf("history over a broken message: %v", err)
	}
	rawExec(t, s, `INSERT INTO messages (id, chat_id, role, runtime, ts) VALUES ('m_bad2', 'x', 'user', 'null', 1)`)
	if _, err := s.Message(ctx, "m_bad2"); !errors.As(err, &ce) {
		t.Fatalf("message with a null runtime: %v", err)
	}
	rawExec(t, s, `INSERT INTO conversation (chat_id, body) VALUES ('default', '{"v":1,"role":"user"}'), ('default', 'garbage')`)
	if _, err := s.Conversation(ctx, lane); !errors.As(err, &ce) || ce.Table != "conversation" {
		t.Fatalf("conversation with a broken entry: %v", err)
	}
	if n, err := s.ConversationLen(ctx, lane); err != nil || n != 2 {
		t.Fatalf("its length: %d, %v", n, err)
	}
	rawExec(t, s, `INSERT INTO lane_settings (chat_id, body) VALUES ('default', '{"v":7}')`)
	var ve *record.VersionError
	if _, err := s.LaneSettings(ctx, lane); !errors.As(err, &ce) || !errors.As(err, &ve) {
		t.Fatalf("settings of a newer version: %v", err)
	}
	rawExec(t, s, `INSERT INTO devices (device_id, name, webpush, last_pushed_cursor) VALUES ('browser', 'Firefox', '{"endpoint":""}', 7)`)
	if _, err := s.Device(ctx, "browser"); !errors.As(err, &ce) || ce.Table != "devices" {
		t.Fatalf("device with a broken subscription: %v", err)
	}
}

// A push registration that does not decode keeps its device out of
// nothing but push: hello's reads skip the column, and the push list
// leaves that device out, says so once, and lists the others.
func TestUndecodableRegistrationStopsOnlyItsPush(t *testing.T) {
	var logs bytes.Buffer
	s, err := Open(filepath.Join(t.TempDir(), "t.db"), WithLog(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.SeeDevice(ctx, Device{ID: "phone", NtfyTopic: "phone-topic"}); err != nil {
		t.Fatal(err)
	}
	rawExec(t, s, `INSERT INTO devices (device_id, name, webpush, last_pushed_cursor) VALUES ('browser', 'Firefox', '{"endpoint":""}', 7)`)
	if c, err := s.LastPushed(ctx, "browser"); err != nil || c != 7 {
		t.Fatalf("hello's cursor: %d, %v", c, err)
	}
	if n, err := s.DeviceName(ctx, "browser"); err != nil || n != "Firefox" {
		t.Fatalf("its name: %q, %v", n, err)
	}
	for range 2 {
		if ds, err := s.PushDevices(ctx); err != nil || len(ds) != 1 || ds[0].ID != "phone" {
			t.Fatalf("push devices over it: %+v, %v", ds, err)
		}
	}
	if n := strings.Count(logs.String(), "device=browser"); n != 1 {
		t.Fatalf("said %d times, want once:\n%s", n, logs.String())
	}
	// Registering again mends it.
	sub := record.WebPush{Endpoint: "https://push.example/x", Keys: record.WebPushKeys{P256dh: "p", Auth: "a"}}
	if err := s.SetWebPush(ctx, "browser", sub); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.PushDevices(ctx); err != nil || len(ds) != 2 {
		t.Fatalf("after registering again: %+v, %v", ds, err)
	}
}
