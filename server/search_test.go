package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// okAgent answers "ok." to everything, so replies do not repeat the words
// searched for.
type okAgent struct{}

func (okAgent) Name() string { return "ok agent" }

func (okAgent) Run(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
	emit(agent.Event{Kind: agent.Text, Text: "ok."})
	return nil
}

type hit struct {
	MessageID string  `json:"message_id"`
	ChatID    string  `json:"chat_id"`
	ThreadID  *string `json:"thread_id"`
	Role      string  `json:"role"`
	Snippet   string  `json:"snippet"`
	TS        int64   `json:"ts"`
}

func search(t *testing.T, d *testgw.Device, p map[string]any) ([]hit, error) {
	t.Helper()
	f, err := d.Do("search", client.Lane{}, p)
	if err != nil {
		return nil, err
	}
	if f.Type != "search.results" {
		t.Fatalf("search answered with %s", f.Raw)
	}
	var r struct {
		Query string `json:"query"`
		Scope string `json:"scope"`
		Hits  []hit  `json:"hits"`
	}
	if err := f.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Query != p["query"] || r.Hits == nil {
		t.Fatalf("search.results %s", f.Raw)
	}
	return r.Hits, nil
}

func hitIDs(hs []hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.MessageID
	}
	return out
}

func TestSearch(t *testing.T) { testSearch(t) }

func testSearch(t *testing.T, on ...func(*server.AppConfig)) {
	g := testgw.Start(t, with(on, func(c *server.AppConfig) { c.Agent = okAgent{} })...)
	a := g.Dial(t, "phone")
	work := createChannel(t, a, "Work", "")
	th := createChannel(t, a, "Launch", work.ChatID)
	wl := client.Lane{ChatID: work.ChatID}
	tl := client.Lane{ChatID: work.ChatID, ThreadID: th.ChatID}

	long := strings.Repeat("filler words keep going on and on ", 20) + "the needle is here " + strings.Repeat("and then more filler follows it ", 20)
	ids := map[string]string{}
	for _, m := range []struct {
		key  string
		lane client.Lane
		text string
	}{
		{"deploy", def, "We deploy on Friday, after the review"},
		{"cafe", def, "Meet me at the café near the station ☕"},
		{"quotes", wl, `She said "NEAR the river" (twice) and AND OR NOT`},
		{"launch", tl, "Launch checklist: deploy the rockets 🚀"},
		{"long", wl, long},
		{"gone", def, "this secret deploy note will be deleted"},
	} {
		ids[m.key] = send(t, a, m.lane, m.text)
	}
	a.MustDo("message.delete", def, map[string]any{"message_ids": []string{ids["gone"]}})

	for _, c := range []struct {
		name string
		p    map[string]any
		want []string
	}{
		{"prefix, newest first", map[string]any{"query": "depl"}, []string{ids["launch"], ids["deploy"]}},
		{"diacritics folded", map[string]any{"query": "cafe"}, []string{ids["cafe"]}},
		{"diacritics in the query", map[string]any{"query": "CAFÉ"}, []string{ids["cafe"]}},
		{"quotes and operators", map[string]any{"query": `"NEAR the river`}, []string{ids["quotes"]}},
		{"parentheses and a star", map[string]any{"query": "(twice)*"}, []string{ids["quotes"]}},
		{"operators only", map[string]any{"query": "AND OR NOT"}, []string{ids["quotes"]}},
		{"emoji only", map[string]any{"query": "🚀"}, []string{}},
		{"emoji beside a word", map[string]any{"query": "rockets🚀"}, []string{ids["launch"]}},
		{"nothing", map[string]any{"query": ""}, []string{}},
		{"scope chat: a thread", map[string]any{"query": "deploy", "scope": "chat", "chat_id": work.ChatID, "thread_id": th.ChatID}, []string{ids["launch"]}},
		{"scope chat: a flat lane", map[string]any{"query": "deploy", "scope": "chat", "chat_id": "default"}, []string{ids["deploy"]}},
		{"scope chat: thread_id null", map[string]any{"query": "river", "scope": "chat", "chat_id": work.ChatID, "thread_id": nil}, []string{ids["quotes"]}},
		{"limit", map[string]any{"query": "the", "limit": 2}, []string{ids["long"], ids["launch"]}},
	} {
		hs, err := search(t, a, c.p)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := hitIDs(hs); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: hits %v, want %v", c.name, got, c.want)
		}
	}

	hs, _ := search(t, a, map[string]any{"query": "needle"})
	if len(hs) != 1 {
		t.Fatalf("needle: %+v", hs)
	}
	h := hs[0]
	if n := utf8.RuneCountInString(h.Snippet); n > 160 || !strings.HasPrefix(h.Snippet, "…") || !strings.HasSuffix(h.Snippet, "…") ||
		!strings.Contains(h.Snippet, "needle") {
		t.Errorf("snippet (%d runes) %q", n, h.Snippet)
	}
	if h.ChatID != work.ChatID || h.ThreadID != nil || h.Role != "user" || h.TS == 0 {
		t.Errorf("hit %+v: a flat lane's hit has no thread_id", h)
	}
	hs, _ = search(t, a, map[string]any{"query": "checklist"})
	if len(hs) != 1 || hs[0].ThreadID == nil || *hs[0].ThreadID != th.ChatID || hs[0].ChatID != work.ChatID {
		t.Errorf("a thread's hit: %+v", hs)
	}
	if hs, _ := search(t, a, map[string]any{"query": "secret"}); len(hs) != 0 {
		t.Errorf("a deleted message matches: %+v", hs)
	}
	_, err := search(t, a, map[string]any{"query": "x", "scope": "chat", "chat_id": "chan_nope"})
	wantCode(t, err, "not_found")
	_, err = search(t, a, map[string]any{"query": "x", "scope": "lane"})
	wantCode(t, err, "unsupported")
	// The chat may be given on the envelope too.
	f, err := a.Do("search", wl, map[string]any{"query": "river", "scope": "chat"})
	if err != nil || !strings.Contains(string(f.Raw), ids["quotes"]) {
		t.Errorf("scope chat from the envelope: %v %s", err, f.Raw)
	}
}

// TestDeleteChannelLeavesNoTrace deletes a channel with a thread, uploads,
// agent files and a conversation, then looks for it everywhere: history,
// search, pulls, sync of a device that was away, the database's tables and
// the disk. Bytes another channel shares stay until that one lets go too.
func TestDeleteChannelLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	agentFile := blob(9000, 50)
	os.WriteFile(filepath.Join(dir, "plan.txt"), agentFile, 0o600)
	ag := &fileAgent{files: map[string]string{"zanzibar plan please": filepath.Join(dir, "plan.txt")}}
	g := testgw.Start(t, func(c *server.AppConfig) { c.Agent = ag })
	a := g.Dial(t, "phone")
	doomed := createChannel(t, a, "Doomed", "")
	th := createChannel(t, a, "Doomed thread", doomed.ChatID)
	dl := client.Lane{ChatID: doomed.ChatID}
	tl := client.Lane{ChatID: doomed.ChatID, ThreadID: th.ChatID}

	own, shared := blob(7000, 51), blob(8000, 52)
	upload(t, a, "own", own, 1000)
	upload(t, a, "shared", shared, 1000)
	upload(t, a, "shared2", shared, 1000)
	e1, err := sendWith(t, a, dl, "zanzibar photos", "own", "shared")
	if err != nil {
		t.Fatal(err)
	}
	a.Expect("agent.idle", nil)
	e2, err := sendWith(t, a, def, "the same picture elsewhere", "shared2")
	if err != nil {
		t.Fatal(err)
	}
	a.Expect("agent.idle", nil)
	send(t, a, tl, "zanzibar plan please")
	offer := a.Expect("media.offer", nil)
	a.Expect("agent.idle", nil)
	var om mediaItem
	offer.Decode(&om)
	doomedMedia := []string{mediaOf(t, e1)[0].MediaID, mediaOf(t, e1)[1].MediaID, om.MediaID}
	keptMedia := mediaOf(t, e2)[0].MediaID
	if got := stored(t, g); len(got) != 3 {
		t.Fatalf("stored before the delete: %v", got)
	}
	a.MustDo("message.send", tl, map[string]any{"text": "/zanzibar-unknown-command"}) // a slash reply, too
	barrier(t, a)

	del := a.MustDo("channel.delete", dl, nil)
	if del.Type != "channel.deleted" {
		t.Fatalf("channel.delete answered with %s", del.Raw)
	}
	barrier(t, a)

	// History and search.
	_, err = history(t, a, dl, nil)
	wantCode(t, err, "not_found")
	_, err = history(t, a, tl, nil)
	wantCode(t, err, "not_found")
	for _, q := range []string{"zanzibar", "photos", "plan"} {
		if hs, _ := search(t, a, map[string]any{"query": q}); len(hs) != 0 {
			t.Errorf("search %q still finds %+v", q, hs)
		}
	}
	// Pulls: the channel's files are gone; the shared bytes serve the
	// other channel's message still.
	for _, id := range doomedMedia {
		_, _, err := pull(t, a, id)
		wantCode(t, err, "not_found")
	}
	if _, data, err := pull(t, a, keptMedia); err != nil || string(data) != string(shared) {
		t.Fatalf("the other channel's copy: %v", err)
	}
	// Disk: only the shared file.
	if got := stored(t, g); len(got) != 1 || !strings.Contains(got[0], sum(shared)) {
		t.Fatalf("stored after the delete: %v", got)
	}
	// Sync: a device that was away all along hears of the deletion and of
	// nothing else in that channel.
	away := g.Dial(t, "away")
	gone := []string{doomed.ChatID, th.ChatID, "zanzibar", testgw.Str(t, e1, "message_id")}
	gone = append(gone, doomedMedia...)
	deleted := 0
	for _, f := range syncFrom(t, away, 0) {
		if f.Type == "channel.deleted" {
			deleted++
			continue
		}
		for _, s := range gone {
			if strings.Contains(string(f.Raw), s) {
				t.Errorf("sync replays %s of the deleted channel: %s", f.Type, f.Raw)
			}
		}
	}
	if deleted != 1 {
		t.Errorf("sync replayed %d channel.deleted, want 1", deleted)
	}
	// The database: no row of the channel in any table, nothing in the
	// search index, no conversation of the agent.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.Dir, server.DBFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, table := range []string{"messages", "outbox", "conversation", "media", "reads", "lane_settings", "turns"} {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE chat_id = ?`, doomed.ChatID).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows of the deleted channel (%v)", table, n, err)
		}
	}
	for _, q := range []string{`SELECT COUNT(*) FROM conversation WHERE body LIKE '%zanzibar%'`,
		`SELECT COUNT(*) FROM outbox WHERE body LIKE '%zanzibar%'`,
		`SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'zanzibar'`,
		`SELECT COUNT(*) FROM channels WHERE chat_id IN ('` + doomed.ChatID + `', '` + th.ChatID + `')`,
		fmt.Sprintf(`SELECT COUNT(*) FROM blobs WHERE sha256 IN ('%s', '%s')`, sum(own), sum(agentFile)),
		`SELECT COUNT(*) FROM media WHERE id IN ('` + strings.Join(doomedMedia, "','") + `')`,
	} {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d (%v)", q, n, err)
		}
	}
	// Nor in the file's bytes: deleted rows and index entries are
	// overwritten, not just unlinked (once the WAL is checkpointed).
	rw, err := sql.Open("sqlite", "file:"+filepath.Join(g.Dir, server.DBFile)+"?_pragma=busy_timeout(10000)") // a hand edit beside the running gateway waits its turn
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	// The gateway's own checkpointer may hold SQLite's checkpoint lock at
	// this moment, and a checkpoint that meets it reports busy at once
	// (the busy handler is not called for that lock): try again until the
	// deadline.
	var busy, logged, moved int
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := rw.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &moved)
		if err == nil && busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint: busy %d, %v", busy, err)
		}
		time.Sleep(time.Millisecond) // a poll: SQLite has no event to wait on
	}
	for _, f := range []string{server.DBFile, server.DBFile + "-wal"} {
		raw, _ := os.ReadFile(filepath.Join(g.Dir, f))
		// (The channel's id stays, in the channel.deleted that sync replays.)
		for _, word := range append([]string{"zanzibar", "Doomed", testgw.Str(t, e1, "message_id"), sum(own)}, doomedMedia...) {
			if i := bytes.Index(raw, []byte(word)); i >= 0 {
				t.Errorf("%s still holds %q at byte %d: …%q…", f, word, i, raw[max(0, i-40):min(len(raw), i+40)])
			}
		}
	}
	var conv int
	db.QueryRow(`SELECT COUNT(*) FROM conversation`).Scan(&conv)
	if conv == 0 {
		t.Errorf("the other channel's conversation went too") // the check above must not pass by emptiness
	}
	// The last use of the shared bytes goes: so does the file.
	a.MustDo("message.delete", def, map[string]any{"message_ids": []string{testgw.Str(t, e2, "message_id")}})
	barrier(t, a)
	if got := stored(t, g); len(got) != 0 {
		t.Fatalf("stored after the last delete: %v", got)
	}
}
