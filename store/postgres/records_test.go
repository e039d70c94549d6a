package postgres

import (
	"errors"
	"reflect"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// Every JSON column holds package record's format, so what the SQLite
// store writes and what this one writes are the same bytes.
func TestRecordsRoundTrip(t *testing.T) {
	s := open(t)
	lane := core.Lane{ChatID: "default", ThreadID: "t_1"}
	pct, lat := 40, 1.5
	m := core.Message{ID: "m1", Lane: lane, Role: core.RoleAssistant, Text: "hi", TS: 5, Model: "gpt-5", Tokens: 12, ReplyTo: "m0",
		Media:   []core.Media{{ID: "md_1", Kind: "image", Mime: "image/png", Size: 3, Filename: "a.png", SHA256: "ab"}},
		Runtime: &core.Runtime{Model: "gpt-5", ContextPct: &pct, Latency: &lat}}
	ev := &core.Event{Type: core.EvMessageStop, Lane: lane, TS: 9, Message: &m, ReplyTo: &core.ReplyAddr{ConnID: 1, ReqID: 2}}
	entry := record.ConversationEntry{Role: "assistant", ToolCalls: []record.ToolCall{{ID: "c1", Name: "terminal", Arguments: "{}"}}, MessageID: "m1"}
	yes := true
	settings := record.LaneSettings{Model: "gpt-5", ShowReasoning: &yes, Approvals: "ask"}
	var cursor int64
	var size int
	write(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(m, false); err != nil {
			return err
		}
		var err error
		if cursor, size, err = tx.AppendEvent(ev); err != nil {
			return err
		}
		if err := tx.AppendConversation(lane, "m1", entry); err != nil {
			return err
		}
		return tx.SetLaneSettings(lane, settings)
	})
	var body []byte
	if err := s.pool.QueryRow(bg, `SELECT body FROM outbox WHERE cursor = $1`, cursor).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if want, _ := record.EncodeEvent(ev); string(body) != string(want) || size != len(want) {
		t.Fatalf("stored %s (size %d), the record is %s", body, size, want)
	}
	var got []*core.Event
	if err := s.ScanEvents(bg, 0, cursor, func(e *core.Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := &core.Event{Type: core.EvMessageStop, Lane: lane, TS: 9, Message: &m, Cursor: cursor} // no ReplyTo: a replay answers nothing
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("scanned %+v, want %+v", got, want)
	}
	if gm, err := s.Message(bg, "m1"); err != nil || !reflect.DeepEqual(gm, m) {
		t.Fatalf("message %+v, %v", gm, err)
	}
	entry.V = record.Version
	if conv, err := s.Conversation(bg, lane); err != nil || len(conv) != 1 || !reflect.DeepEqual(conv[0], entry) {
		t.Fatalf("conversation %+v, %v", conv, err)
	}
	if n, err := s.ConversationLen(bg, lane); err != nil || n != 1 {
		t.Fatalf("conversation length %d, %v", n, err)
	}
	settings.V = record.Version
	if ls, err := s.LaneSettings(bg, lane); err != nil || !reflect.DeepEqual(ls, settings) {
		t.Fatalf("settings %+v, %v", ls, err)
	}
	if ls, err := s.LaneSettings(bg, core.Lane{ChatID: "none"}); err != nil || ls.Model != "" || ls.V != record.Version {
		t.Fatalf("a lane without settings: %+v, %v", ls, err)
	}
	sub := record.WebPush{Endpoint: "https://push.example/x", Keys: record.WebPushKeys{P256dh: "p", Auth: "a"}}
	if err := s.SetWebPush(bg, "browser", sub); err != nil {
		t.Fatal(err)
	}
	if err := s.SetWebPush(bg, "browser", record.WebPush{Endpoint: "http://plain"}); err == nil {
		t.Fatal("an unusable subscription was stored")
	}
	sub.V = record.Version
	if d, err := s.Device(bg, "browser"); err != nil || d.WebPush == nil || *d.WebPush != sub {
		t.Fatalf("device %+v, %v", d, err)
	}
	if ds, err := s.PushDevices(bg); err != nil || len(ds) != 1 || *ds[0].WebPush != sub {
		t.Fatalf("push devices %+v, %v", ds, err)
	}
	if d, err := s.Device(bg, "unknown"); err != nil || d.WebPush != nil {
		t.Fatalf("unknown device %+v, %v", d, err)
	}
}

// A stored body that does not decode is an error naming its row, never a
// row silently left out.
func TestUndecodableRowIsAnError(t *testing.T) {
	s := open(t)
	lane := core.Lane{ChatID: "default"}
	c1 := appendEvent(t, s, msgEvent(lane, "m_ok"))
	rawExec(t, s, `UPDATE outbox_head SET head = head + 1`)
	rawExec(t, s, `INSERT INTO outbox (cursor, type, chat_id, body, ts) VALUES (2, 'message', 'default', '{"v":1,"type":', 1)`)
	appendEvent(t, s, msgEvent(lane, "m_after"))
	var seen []int64
	err := s.ScanEvents(bg, 0, 100, func(e *core.Event) error { seen = append(seen, e.Cursor); return nil })
	var ce *store.CorruptError
	if !errors.As(err, &ce) || ce.Table != "outbox" || ce.Key != "2" || len(seen) != 1 || seen[0] != c1 {
		t.Fatalf("scan over a broken frame: %v (seen %v)", err, seen)
	}
	rawExec(t, s, `INSERT INTO messages (id, chat_id, role, media, ts) VALUES ('m_bad', 'default', 'user', '[{"ID":', 1)`)
	if _, err := s.Message(bg, "m_bad"); !errors.As(err, &ce) || ce.Table != "messages" {
		t.Fatalf("message with broken media: %v", err)
	}
	if _, _, err := s.History(bg, lane, "", 10); !errors.As(err, &ce) {
		t.Fatalf("history over a broken message: %v", err)
	}
	rawExec(t, s, `INSERT INTO messages (id, chat_id, role, runtime, ts) VALUES ('m_bad2', 'x', 'user', 'null', 1)`)
	if _, err := s.Message(bg, "m_bad2"); !errors.As(err, &ce) {
		t.Fatalf("message with a null runtime: %v", err)
	}
	rawExec(t, s, `INSERT INTO conversation (chat_id, body) VALUES ('default', '{"v":1,"role":"user"}'), ('default', 'garbage')`)
	if _, err := s.Conversation(bg, lane); !errors.As(err, &ce) || ce.Table != "conversation" {
		t.Fatalf("conversation with a broken entry: %v", err)
	}
	if n, err := s.ConversationLen(bg, lane); err != nil || n != 2 {
		t.Fatalf("its length: %d, %v", n, err)
	}
	rawExec(t, s, `INSERT INTO lane_settings (chat_id, body) VALUES ('default', '{"v":7}')`)
	var ve *record.VersionError
	if _, err := s.LaneSettings(bg, lane); !errors.As(err, &ce) || !errors.As(err, &ve) {
		t.Fatalf("settings of a newer version: %v", err)
	}
	rawExec(t, s, `INSERT INTO devices (device_id, webpush, ntfy_topic) VALUES ('browser', '{"endpoint":""}', 't')`)
	rawExec(t, s, `INSERT INTO devices (device_id, ntfy_topic) VALUES ('phone', 'topic')`)
	if _, err := s.Device(bg, "browser"); !errors.As(err, &ce) || ce.Table != "devices" {
		t.Fatalf("device with a broken subscription: %v", err)
	}
	// Hello reads only what it needs, so such a device still connects;
	// push leaves it out and reaches the others.
	if c, err := s.LastPushed(bg, "browser"); err != nil || c != 0 {
		t.Fatalf("last pushed of it: %d, %v", c, err)
	}
	if ds, err := s.PushDevices(bg); err != nil || len(ds) != 1 || ds[0].ID != "phone" {
		t.Fatalf("push devices over it: %+v, %v", ds, err)
	}
}
