package store

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
)

// The search rules are the contract's (storetest); these are SQLite's
// index itself and its bulk import.

func insertAll(t *testing.T, s *Store, ms ...core.Message) {
	t.Helper()
	if err := s.Write(context.Background(), func(tx Tx) error {
		for _, m := range ms {
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func hitIDs(hs []SearchHit) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.MessageID)
	}
	return strings.Join(out, ",")
}

// A deleted message leaves nothing in the index (a join with the messages
// would hide stale entries from a search, not from the file), and the
// index stays consistent through finishes and deletes.
func TestSearchIndexForgetsDeleted(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lane := core.Lane{ChatID: "default"}
	insertAll(t, s, core.Message{ID: "m1", Lane: lane, Role: core.RoleUser, Text: "giraffe service", TS: 1},
		core.Message{ID: "m2", Lane: lane, Role: core.RoleUser, Text: "deploy", TS: 2})
	reply := core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, TS: 3}
	for _, fn := range []func(tx Tx) error{
		func(tx Tx) error { return tx.InsertMessage(reply, true) },
		func(tx Tx) error { return tx.SaveProgress("r1", "zebra", "") },
		func(tx Tx) error { reply.Text = "zebra final"; return tx.FinishMessage(reply) },
		func(tx Tx) error { reply.Text = "okapi"; return tx.FinishMessage(reply) },
		func(tx Tx) error { return tx.DeleteMessages(lane, []string{"r1", "m1"}) },
	} {
		if err := s.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"giraffe", "service", "zebra", "okapi"} {
		var n int
		if err := s.r.QueryRow(`SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?`, MatchExpr(q)).Scan(&n); err != nil || n != 0 {
			t.Errorf("the index still has %d entries for %q (%v)", n, q, err)
		}
	}
	if hs, _ := s.Search(ctx, "deploy", nil, 20); hitIDs(hs) != "m2" {
		t.Fatalf("survivors: %q", hitIDs(hs))
	}
	var bad string
	if err := s.w.QueryRow(`INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check') RETURNING 'x'`).Scan(&bad); err != nil && !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("integrity-check: %v", err)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("lorem ipsum dolor sit amet ", 20)
	for _, c := range []struct {
		name, in   string
		lead, tail bool
		has        string
	}{
		{"short", "a \uE000b\uE001 c", false, false, "a b c"},
		{"match at the start", "\uE000deploy\uE001 " + long, false, true, "deploy"},
		{"match at the end", long + "\uE000deploy\uE001", true, false, "deploy"},
		{"match in the middle", long + "\uE000deploy\uE001 " + long, true, true, "deploy"},
		{"no marker", long, false, true, "lorem"},
		{"whitespace collapsed", "a\n\n\tb   \uE000c\uE001", false, false, "a b c"},
		{"one long word", strings.Repeat("x", 400) + "\uE000y\uE001" + strings.Repeat("z", 400), true, true, "y"},
		{"wide runes", strings.Repeat("日本語 ", 100) + "\uE000検索\uE001" + strings.Repeat(" 日本語", 100), true, true, "検索"},
	} {
		got := Snippet(c.in, SnippetRunes)
		if n := utf8.RuneCountInString(got); n > SnippetRunes {
			t.Errorf("%s: %d runes: %q", c.name, n, got)
		}
		if strings.HasPrefix(got, "…") != c.lead || strings.HasSuffix(got, "…") != c.tail {
			t.Errorf("%s: ellipses wrong: %q", c.name, got)
		}
		if !strings.Contains(got, c.has) {
			t.Errorf("%s: %q lacks %q", c.name, got, c.has)
		}
		if strings.ContainsAny(got, "\uE000\uE001") {
			t.Errorf("%s: markers left in %q", c.name, got)
		}
	}
}

func TestImportMessages(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	insertAll(t, s, core.Message{ID: "m1", Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: "deploy on Friday", TS: 1})
	i := 0
	n, err := s.ImportMessages(ctx, func() (core.Message, bool) {
		i++
		return core.Message{ID: fmt.Sprint("imp", i), Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: fmt.Sprint("imported walrus ", i), TS: int64(100 + i)}, i <= 50
	})
	if err != nil || n != 50 {
		t.Fatalf("imported %d, %v", n, err)
	}
	if hs, _ := s.Search(ctx, "walrus", nil, 100); len(hs) != 50 {
		t.Fatalf("%d imported messages found, want 50", len(hs))
	}
	if hs, _ := s.Search(ctx, "deploy", nil, 100); hitIDs(hs) != "m1" {
		t.Fatalf("earlier messages: %q (indexed twice?)", hitIDs(hs))
	}
	// The insert trigger is back.
	insertAll(t, s, core.Message{ID: "after", Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: "walrus after", TS: 1000})
	if hs, _ := s.Search(ctx, "walrus after", nil, 100); hitIDs(hs) != "after" {
		t.Fatalf("after the import: %q", hitIDs(hs))
	}
	if b, err := s.SearchIndexBytes(ctx); err != nil || b <= 0 {
		t.Fatalf("index size %d, %v", b, err)
	}
}

// BenchmarkSearchTotal measures what a page's total costs: the newest page
// alone (Search) against the page with its count up to MaxSearchTotal
// (SearchPageBefore), over 200,000 messages, for words in every second
// message, every twentieth and every thousandth.
//
//	go test -run '^$' -bench SearchTotal ./store/
func BenchmarkSearchTotal(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rnd := rand.New(rand.NewSource(1))
	i := 0
	if _, err := s.ImportMessages(ctx, func() (core.Message, bool) {
		i++
		w := []string{fmt.Sprintf("filler%d", rnd.Intn(5000)), fmt.Sprintf("filler%d", rnd.Intn(5000))}
		if i%2 == 0 {
			w = append(w, "common")
		}
		if i%20 == 0 {
			w = append(w, "medium")
		}
		if i%1000 == 0 {
			w = append(w, "rare")
		}
		return core.Message{ID: fmt.Sprint("b", i), Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: strings.Join(w, " "), TS: int64(i)}, i <= 200_000
	}); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{"common", "medium", "rare"} {
		b.Run(q+"/page", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Search(ctx, q, nil, 20); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(q+"/page+total", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.SearchPageBefore(ctx, q, nil, "", 20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
