package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

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
