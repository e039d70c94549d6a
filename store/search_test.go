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

// corpus is what the search tests look in: tricky words, accents,
// punctuation and emoji, in two lanes.
var corpus = []struct {
	id, chat, thread, text string
}{
	{"m1", "default", "", "We should deploy the service on Friday"},
	{"m2", "default", "", "The café on the corner has great coffee ☕"},
	{"m3", "chan_b", "", "Crème brûlée is my favourite dessert"},
	{"m4", "chan_b", "t_1", `She said "NEAR the river" and left (quickly)`},
	{"m5", "chan_b", "t_1", "AND OR NOT are words too, not only operators"},
	{"m6", "default", "", "deployment failed: see the logs 🚀🔥"},
	{"m7", "chan_b", "", "Résumé attached; don't forget the naïve approach"},
	{"m8", "default", "", "price is 5* stars * and a*b=c"},
}

func fill(t *testing.T, s *Store) {
	t.Helper()
	err := s.Write(context.Background(), func(tx Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: "chan_b", Name: "B", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "t_1", Name: "T", Kind: core.KindThread, ParentChatID: "chan_b"}); err != nil {
			return err
		}
		for i, m := range corpus {
			msg := core.Message{ID: m.id, Lane: core.Lane{ChatID: m.chat, ThreadID: m.thread}, Role: core.RoleUser, Text: m.text, TS: int64(i + 1)}
			if err := tx.InsertMessage(msg, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
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

func TestSearchCorpus(t *testing.T) {
	s := open(t)
	fill(t, s)
	ctx := context.Background()
	b := core.Lane{ChatID: "chan_b"}
	t1 := core.Lane{ChatID: "chan_b", ThreadID: "t_1"}
	for _, c := range []struct {
		query string
		lane  *core.Lane
		want  string
	}{
		{"deploy", nil, "m6,m1"},                    // prefix on the last word, newest first
		{"deploy service", nil, "m1"},               // every word must match
		{"DEPLOY", nil, "m6,m1"},                    // case folded
		{"cafe", nil, "m2"},                         // diacritics folded in the text
		{"café", nil, "m2"},                         // and in the query
		{"creme brulee", nil, "m3"},                 // several folded words
		{"resume", nil, "m7"},                       // é in a word's middle
		{"naive", nil, "m7"},                        // ï
		{"caf", nil, "m2"},                          // a prefix of a folded word
		{`"cafe`, nil, "m2"},                        // an unbalanced quote
		{`"NEAR the river"`, nil, "m4"},             // quotes and an operator
		{"NEAR(river left)", nil, "m4"},             // NEAR syntax is only words
		{"river NEAR left", nil, "m4"},              // an operator between words is dropped
		{"AND", nil, "m8,m5,m4"},                    // only an operator: then it is a word
		{"not only", nil, "m5"},                     // lower-case operators are words
		{"OR NOT", nil, "m5"},                       // all operators: searched as words
		{"(quickly)", nil, "m4"},                    // parentheses
		{"*", nil, ""},                              // nothing searchable
		{"5*", nil, "m8"},                           // a one-character prefix is a whole word
		{"stars*", nil, "m8"},                       // a star is a separator
		{"a*b=c", nil, "m8"},                        // so are operators of other languages
		{"🚀", nil, ""},                              // emoji alone: nothing to search
		{"logs 🚀🔥", nil, "m6"},                      // emoji beside words: ignored
		{"don't", nil, "m7"},                        // an apostrophe inside a word
		{"dont", nil, ""},                           // is not dropped
		{"  ", nil, ""},                             // blank
		{`""""`, nil, ""},                           // quotes only
		{"\x00deploy", nil, "m6,m1"},                // control characters
		{"the", &b, "m7"},                           // scope: one lane, not its threads
		{"the", &t1, "m4"},                          // a thread
		{"deploy", &core.Lane{ChatID: "x"}, ""},     // an unknown lane
		{"coffee", &b, ""},                          // another lane's words
		{strings.Repeat("deploy ", 100), nil, "m1"}, // long input is cut
	} {
		hs, err := s.Search(ctx, c.query, c.lane, 20)
		if err != nil {
			t.Errorf("Search(%q): %v", c.query, err)
			continue
		}
		if got := hitIDs(hs); got != c.want {
			t.Errorf("Search(%q, %v) = %q, want %q (expression %s)", c.query, c.lane, got, c.want, MatchExpr(c.query))
		}
	}
}

// TestSearchNeverFails throws hostile input at the query builder: whatever
// a person types, SQLite must accept the expression.
func TestSearchNeverFails(t *testing.T) {
	s := open(t)
	fill(t, s)
	ctx := context.Background()
	inputs := []string{`"`, `""`, `*`, `**`, `"*"`, `^`, `-`, `+`, `:`, `text:`, `lane_key:x`, `{text}`, `NEAR(`, `NEAR/3`,
		`a OR`, `OR a`, `NOT`, `AND AND`, `(((`, `)))`, `'`, `\`, "\uE000", "\uE001x", `a:b:c`, `a -b`, "x\u0301", "ǅ",
		"ﷺ", "\U0001F600\U0001F600", "日本語のテキスト", "العربية", "a\x00b", string([]byte{0xff, 0xfe}), "%", "_", "a NEAR/2 b"}
	for _, q := range inputs {
		if _, err := s.Search(ctx, q, nil, 5); err != nil {
			t.Errorf("Search(%q) failed: %v (expression %s)", q, err, MatchExpr(q))
		}
		if _, err := s.Search(ctx, q, &core.Lane{ChatID: q, ThreadID: q}, 5); err != nil {
			t.Errorf("Search(%q) in a lane of that name failed: %v", q, err)
		}
	}
}

func TestSearchFollowsDeletesAndStreaming(t *testing.T) {
	s := open(t)
	fill(t, s)
	ctx := context.Background()
	lane := core.Lane{ChatID: "default"}
	// A reply being written is not searchable until it finishes.
	reply := core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, TS: 100}
	write := func(fn func(Tx) error) {
		t.Helper()
		if err := s.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(tx Tx) error { return tx.InsertMessage(reply, true) })
	write(func(tx Tx) error { return tx.SaveProgress("r1", "zebra crossing", "") })
	if hs, _ := s.Search(ctx, "zebra", nil, 20); len(hs) != 0 {
		t.Fatalf("a streaming reply was found: %v", hitIDs(hs))
	}
	reply.Text = "zebra crossing, final"
	write(func(tx Tx) error { return tx.FinishMessage(reply) })
	if hs, _ := s.Search(ctx, "zebra", nil, 20); hitIDs(hs) != "r1" {
		t.Fatalf("the finished reply: %q", hitIDs(hs))
	}
	// Finished again (a crash recovery): indexed once, with the new text.
	reply.Text = "giraffe"
	reply.Stopped = true
	write(func(tx Tx) error { return tx.FinishMessage(reply) })
	if hs, _ := s.Search(ctx, "zebra", nil, 20); len(hs) != 0 {
		t.Fatalf("the old text still matches: %v", hitIDs(hs))
	}
	if hs, _ := s.Search(ctx, "giraffe", nil, 20); hitIDs(hs) != "r1" {
		t.Fatalf("the new text: %q", hitIDs(hs))
	}
	write(func(tx Tx) error { return tx.DeleteMessages(lane, []string{"r1", "m1"}) })
	write(func(tx Tx) error { _, err := tx.DeleteChannel("chan_b"); return err })
	for _, q := range []string{"giraffe", "service", "creme", "river", "resume"} {
		if hs, _ := s.Search(ctx, q, nil, 20); len(hs) != 0 {
			t.Errorf("deleted messages match %q: %v", q, hitIDs(hs))
		}
		// The index itself holds nothing of them either (a join with
		// the messages would hide stale entries).
		var n int
		if err := s.r.QueryRow(`SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?`, MatchExpr(q)).Scan(&n); err != nil || n != 0 {
			t.Errorf("the index still has %d entries for %q (%v)", n, q, err)
		}
	}
	if hs, _ := s.Search(ctx, "deploy", nil, 20); hitIDs(hs) != "m6" {
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
		got := snippet(c.in, SnippetRunes)
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

func TestSearchLimitAndSnippetThroughTheIndex(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lane := core.Lane{ChatID: "default"}
	if err := s.Write(ctx, func(tx Tx) error {
		for i := range 150 {
			text := fmt.Sprintf("%s needle number %d %s", strings.Repeat("hay ", 60), i, strings.Repeat("stack ", 60))
			if err := tx.InsertMessage(core.Message{ID: fmt.Sprint("n", i), Lane: lane, Role: core.RoleUser, Text: text, TS: int64(i)}, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hs, err := s.Search(ctx, "needle", nil, 1000)
	if err != nil || len(hs) != 100 {
		t.Fatalf("%d hits, %v; want the maximum, 100", len(hs), err)
	}
	if hs[0].MessageID != "n149" || hs[99].MessageID != "n50" {
		t.Fatalf("not newest first: %s … %s", hs[0].MessageID, hs[99].MessageID)
	}
	for _, h := range hs {
		if !strings.Contains(h.Snippet, "needle number") || !strings.HasPrefix(h.Snippet, "…") || !strings.HasSuffix(h.Snippet, "…") ||
			utf8.RuneCountInString(h.Snippet) > SnippetRunes {
			t.Fatalf("snippet %q", h.Snippet)
		}
	}
}

func TestImportMessages(t *testing.T) {
	s := open(t)
	fill(t, s)
	ctx := context.Background()
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
	if hs, _ := s.Search(ctx, "deploy", nil, 100); hitIDs(hs) != "m6,m1" {
		t.Fatalf("earlier messages: %q (indexed twice?)", hitIDs(hs))
	}
	// The insert trigger is back.
	if err := s.Write(ctx, func(tx Tx) error {
		return tx.InsertMessage(core.Message{ID: "after", Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: "walrus after", TS: 1000}, false)
	}); err != nil {
		t.Fatal(err)
	}
	if hs, _ := s.Search(ctx, "walrus after", nil, 100); hitIDs(hs) != "after" {
		t.Fatalf("after the import: %q", hitIDs(hs))
	}
	if b, err := s.SearchIndexBytes(ctx); err != nil || b <= 0 {
		t.Fatalf("index size %d, %v", b, err)
	}
}

// A search is paged newest first: each page holds the hits older than the
// last one of the page before, More says whether there are more, and
// Total counts them all, up to MaxSearchTotal.
func TestSearchPages(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lane := core.Lane{ChatID: "default"}
	other := core.Lane{ChatID: "chan_b"}
	if err := s.Write(ctx, func(tx Tx) error {
		for i := range 1200 {
			l := lane
			if i >= 150 {
				l = other
			}
			if err := tx.InsertMessage(core.Message{ID: fmt.Sprint("p", i), Lane: l, Role: core.RoleUser, Text: fmt.Sprint("needle ", i), TS: int64(i)}, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	before := ""
	for page := 0; ; page++ {
		p, err := s.SearchPageBefore(ctx, "needle", &lane, before, 50)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 150, false: 0}[page == 0]; p.Total != want {
			t.Fatalf("page %d: total %d, want %d (counted on the first page)", page, p.Total, want)
		}
		if len(p.Hits) != 50 || p.More != (page < 2) {
			t.Fatalf("page %d: %d hits, more %v", page, len(p.Hits), p.More)
		}
		for _, h := range p.Hits {
			got = append(got, h.MessageID)
		}
		if !p.More {
			break
		}
		before = p.Hits[len(p.Hits)-1].MessageID
	}
	for i, id := range got {
		if want := fmt.Sprint("p", 149-i); id != want {
			t.Fatalf("hit %d is %s, want %s (newest first, each once)", i, id, want)
		}
	}
	// A result that fits one page is counted without a second query.
	if p, err := s.SearchPageBefore(ctx, "needle 7", &lane, "", 50); err != nil || p.Total != len(p.Hits) || p.More || p.Total != 1 {
		t.Fatalf("one hit: %+v, %v", p, err)
	}
	// All lanes: 1200 matches are counted as the cap.
	p, err := s.SearchPageBefore(ctx, "needle", nil, "", 20)
	if err != nil || p.Total != MaxSearchTotal || !p.More || len(p.Hits) != 20 || p.Hits[0].MessageID != "p1199" {
		t.Fatalf("all lanes: total %d, more %v, %d hits (%v)", p.Total, p.More, len(p.Hits), err)
	}
	if _, err := s.SearchPageBefore(ctx, "needle", nil, "m_nothing", 20); err != ErrNotFound {
		t.Fatalf("an unknown before: %v", err)
	}
	if p, err := s.SearchPageBefore(ctx, "!!", nil, "", 20); err != nil || len(p.Hits) != 0 || p.Total != 0 || p.More {
		t.Fatalf("nothing searchable: %+v, %v", p, err)
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
