package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// legacyDB makes a database as the irisgate before records left it: the
// migrations up to recordsVersion-1, then rows with the bodies of that
// time (record/testdata/v0) and one unreadable row in each table the
// migration rewrites.
func legacyDB(t testing.TB, path string) {
	t.Helper()
	s, err := openAt(path, recordsVersion-1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.w.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	v0 := func(name string) string {
		b, err := os.ReadFile(filepath.Join("record", "testdata", "v0", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	files, err := filepath.Glob(filepath.Join("record", "testdata", "v0", "event_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatal("no golden events", err)
	}
	for _, f := range files {
		exec(`INSERT INTO outbox (type, body, ts) VALUES ('x', ?, 1)`, v0(filepath.Base(f)))
	}
	exec(`INSERT INTO outbox (type, body, ts) VALUES ('message', '{"Type":"message","Message":{"ID":', 1)`) // cut short
	exec(`INSERT INTO messages (id, chat_id, role, media, runtime, ts) VALUES ('m_old', 'default', 'user', ?, ?, 1)`, v0("media.json"), v0("runtime.json"))
	exec(`INSERT INTO messages (id, chat_id, role, text, media, ts) VALUES ('m_torn', 'default', 'user', 'kept', '[{"ID":7}]', 2)`)
	for _, n := range []string{"conversation_system.json", "conversation_user.json", "conversation_assistant.json", "conversation_tool.json"} {
		exec(`INSERT INTO conversation (chat_id, body) VALUES ('default', ?)`, v0(n))
	}
	exec(`INSERT INTO conversation (chat_id, body) VALUES ('default', '{"Content":"who said this?"}')`)
	exec(`INSERT INTO lane_settings (chat_id, body) VALUES ('default', ?)`, v0("lane_settings.json"))
	exec(`INSERT INTO lane_settings (chat_id, thread_id, body) VALUES ('chan_1', 't_1', 'null')`)
	exec(`INSERT INTO devices (device_id, webpush) VALUES ('browser', ?), ('old', '{"endpoint":"http://plain"}')`, v0("webpush.json"))
}

type logLines struct{ bytes.Buffer }

func captured(buf *logLines) Option {
	return WithLog(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

func TestMigratesLegacyDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "irisgate.db")
	legacyDB(t, path)
	var logs logLines
	s, err := Open(path, captured(&logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Everything decodes, through the readers that take v1 only.
	var evs []*core.Event
	if err := s.ScanEvents(ctx, 0, 1000, func(e *core.Event) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob("record/testdata/v0/event_*.json"); len(evs) != len(files) || evs[0].Type == "" {
		t.Fatalf("%d events after the migration, %d before", len(evs), len(files))
	}
	m, err := s.Message(ctx, "m_old")
	if err != nil || len(m.Media) != 2 || m.Media[0].Filename != "cat.jpg" || m.Runtime == nil || *m.Runtime.ContextPct != 7 {
		t.Fatalf("message: %+v, %v", m, err)
	}
	if torn, err := s.Message(ctx, "m_torn"); err != nil || torn.Text != "kept" || torn.Media != nil {
		t.Fatalf("the message whose media was quarantined: %+v, %v", torn, err)
	}
	conv, err := s.Conversation(ctx, core.Lane{ChatID: "default"})
	if err != nil || len(conv) != 4 || conv[0].Role != "system" || conv[1].Attachments[0].Path == "" || conv[2].ToolCalls[0].ID != "call_1" {
		t.Fatalf("conversation: %+v, %v", conv, err)
	}
	if ls, err := s.LaneSettings(ctx, core.Lane{ChatID: "default"}); err != nil || ls.Model != "gpt-5" || ls.Approvals != "ask" {
		t.Fatalf("settings: %+v, %v", ls, err)
	}
	if ls, err := s.LaneSettings(ctx, core.Lane{ChatID: "chan_1", ThreadID: "t_1"}); err != nil || ls.Model != "" {
		t.Fatalf("the lane whose settings were quarantined: %+v, %v", ls, err)
	}
	if d, err := s.Device(ctx, "browser"); err != nil || d.WebPush == nil || !strings.HasPrefix(d.WebPush.Endpoint, "https://") {
		t.Fatalf("device: %+v, %v", d, err)
	}
	if d, err := s.Device(ctx, "old"); err != nil || d.WebPush != nil {
		t.Fatalf("the device whose subscription was quarantined: %+v, %v", d, err)
	}

	// The unreadable rows are kept, as they were, with why.
	q, err := s.Quarantine()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("record/testdata/v0/event_*.json")
	want := map[string]string{"outbox": strconv.Itoa(len(files) + 1), "messages": "m_torn media", "conversation": "5", "lane_settings": "chan_1/t_1", "devices": "old webpush"}
	got := map[string]string{}
	for _, r := range q {
		got[r.Table] = r.Key
		if len(r.Body) == 0 || r.Err == "" || r.TS == 0 {
			t.Errorf("quarantined row %+v lacks its body or reason", r)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("quarantine %v, want %v", got, want)
	}
	if l := logs.String(); !strings.Contains(l, "quarantined=5") || !strings.Contains(l, "rewritten=") || strings.Count(l, "moved to the quarantine") != 5 ||
		!strings.Contains(l, "rows=5") {
		t.Fatalf("log:\n%s", l)
	}

	// The copy is the database as it was, for the older irisgate.
	copyPath := path + ".pre-v7"
	if fi, err := os.Stat(copyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy: %v %v", fi, err)
	}
	old, err := sql.Open("sqlite", "file:"+copyPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var version int
	var body string
	old.QueryRow(`PRAGMA user_version`).Scan(&version)
	old.QueryRow(`SELECT body FROM conversation ORDER BY seq LIMIT 1`).Scan(&body)
	old.Close()
	if version != recordsVersion-1 || !strings.HasPrefix(body, `{"Role":"system"`) {
		t.Fatalf("copy at version %d holds %q", version, body)
	}
	if _, err := os.Stat(copyPath + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary copy left: %v", err)
	}
	s.Close()

	// A second open does nothing: no copy, no rewrite; it only reminds of
	// the quarantine.
	before, _ := os.Stat(copyPath)
	time.Sleep(10 * time.Millisecond) // mtime granularity, for the check below
	logs.Reset()
	s, err = Open(path, captured(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after, _ := os.Stat(copyPath)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("the second open copied the database again")
	}
	if q2, _ := s.Quarantine(); len(q2) != len(q) {
		t.Fatalf("quarantine has %d rows after a second open, %d before", len(q2), len(q))
	}
	if l := logs.String(); strings.Contains(l, "rewritten") || strings.Contains(l, "copied") || !strings.Contains(l, "rows=5") {
		t.Fatalf("second open logged:\n%s", l)
	}
}

func TestNewDatabaseIsNotCopied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "irisgate.db")
	var logs logLines
	s, err := Open(path, captured(&logs))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path + ".pre-v7"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new database was copied: %v", err)
	}
	if logs.Len() != 0 {
		t.Fatalf("a new database logged:\n%s", logs.String())
	}
}

// A copy left by an attempt that failed is replaced by a fresh one.
func TestMigrationReplacesAStaleCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "irisgate.db")
	legacyDB(t, path)
	if err := os.WriteFile(path+".pre-v7", []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".pre-v7.tmp", []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, WithLog(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if b, _ := os.ReadFile(path + ".pre-v7"); !bytes.HasPrefix(b, []byte("SQLite format 3")) {
		t.Fatalf("the copy is %q", b[:min(len(b), 16)])
	}
}

// After the migration, a row in the old format (an older irisgate run on
// the migrated file) is an error, not read as if it were a record.
func TestV0RowAfterMigrationIsAnError(t *testing.T) {
	s := open(t)
	b, err := os.ReadFile(filepath.Join("record", "testdata", "v0", "event_agent_idle.json"))
	if err != nil {
		t.Fatal(err)
	}
	rawExec(t, s, `INSERT INTO outbox (type, body, ts) VALUES ('agent.idle', ?, 1)`, b)
	err = s.ScanEvents(context.Background(), 0, 10, func(*core.Event) error { return nil })
	var ce *CorruptError
	var ve *record.VersionError
	if !errors.As(err, &ce) || !errors.As(err, &ve) || ve.Got != 0 {
		t.Fatalf("a v0 frame after the migration: %v", err)
	}
}

func TestRefusesANewerDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "irisgate.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rawExec(t, s, `PRAGMA user_version = 99`)
	s.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "newer irisgate") {
		t.Fatalf("opening a newer database: %v", err)
	}
}

// The migration on a big outbox, for the README and the upgrade note:
// go test -run x -bench MigrateOutbox -benchtime 3x ./store
func BenchmarkMigrateOutbox200k(b *testing.B) {
	const rows = 200_000
	dir := b.TempDir()
	tmpl := filepath.Join(dir, "template.db")
	s, err := openAt(tmpl, recordsVersion-1)
	if err != nil {
		b.Fatal(err)
	}
	bodies := map[string][]byte{}
	for _, n := range []string{"event_message.json", "event_message_stop.json", "event_agent_busy.json", "event_agent_idle.json"} {
		bodies[n], _ = os.ReadFile(filepath.Join("record", "testdata", "v0", n))
	}
	tx, _ := s.w.Begin()
	st, _ := tx.Prepare(`INSERT INTO outbox (type, body, ts) VALUES ('x', ?, 1)`)
	i := 0
	for range rows / len(bodies) {
		for _, body := range bodies {
			st.Exec(body)
			i++
		}
	}
	st.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	s.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	s.Close()
	tmplBytes, err := os.ReadFile(tmpl)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		path := filepath.Join(dir, "run.db")
		os.Remove(path + ".pre-v7")
		if err := os.WriteFile(path, tmplBytes, 0o600); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s, err := Open(path, WithLog(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		os.Remove(path)
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		b.StartTimer()
	}
	b.ReportMetric(float64(i), "rows")
	b.ReportMetric(float64(len(tmplBytes))/(1<<20), "MiB")
}
