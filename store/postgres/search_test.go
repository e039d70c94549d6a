package postgres

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// corpus is package store's search corpus: tricky words, accents,
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
	// What PostgreSQL's own parser would keep whole.
	{"m9", "default", "", "mail me@example.com or see https://irisgate.example/docs/v1.2.3 and /usr/lib/x-y"},
	{"m10", "default", "", "Tiếng Việt, Ελληνικά άλφα, йод and straße"},
}

func fillCorpus(t *testing.T, write func(fn func(insert func(core.Message, bool) error) error) error) {
	t.Helper()
	if err := write(func(insert func(core.Message, bool) error) error {
		for i, m := range corpus {
			if err := insert(core.Message{ID: m.id, Lane: core.Lane{ChatID: m.chat, ThreadID: m.thread}, Role: core.RoleUser, Text: m.text, TS: int64(i + 1)}, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func fill(t *testing.T, s *Store) {
	t.Helper()
	fillCorpus(t, func(fn func(func(core.Message, bool) error) error) error {
		return s.Write(bg, func(tx store.Tx) error {
			if err := tx.PutChannel(core.Channel{ChatID: "chan_b", Name: "B", Kind: core.KindChannel}); err != nil {
				return err
			}
			if err := tx.PutChannel(core.Channel{ChatID: "t_1", Name: "T", Kind: core.KindThread, ParentChatID: "chan_b"}); err != nil {
				return err
			}
			return fn(tx.InsertMessage)
		})
	})
}

func hitIDs(hs []store.SearchHit) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.MessageID)
	}
	return strings.Join(out, ",")
}

func TestSearchCorpus(t *testing.T) {
	s := open(t)
	fill(t, s)
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
		{"cafe\u0301", nil, "m2"},                   // and decomposed
		{"creme brulee", nil, "m3"},                 // several folded words
		{"resume", nil, "m7"},                       // é in a word's middle
		{"naive", nil, "m7"},                        // ï
		{"caf", nil, "m2"},                          // a prefix of a folded word
		{`"cafe`, nil, "m2"},                        // an unbalanced quote
		{`"NEAR the river"`, nil, "m4"},             // quotes and an operator
		{"NEAR(river left)", nil, "m4"},             // NEAR syntax is only words
		{"river NEAR left", nil, "m4"},              // an operator between words is dropped
		{"AND", nil, "m10,m9,m8,m5,m4"},             // only an operator: then it is a word
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
		{"example", nil, "m9"},                      // inside an e-mail address
		{"me@example.com", nil, "m9"},               // the address itself
		{"docs v1", nil, "m9"},                      // inside a URL
		{"v1.2.3", nil, "m9"},                       // a version number
		{"lib x", nil, "m9"},                        // a path
		{"tieng viet", nil, "m10"},                  // two diacritics on one letter
		{"ελληνικα", nil, ""},                       // Greek keeps its accents, as in SQLite
		{"иод", nil, ""},                            // й is not и
		{"STRASSE", nil, ""},                        // ß is not ss
		{"the", &b, "m7"},                           // scope: one lane, not its threads
		{"the", &t1, "m4"},                          // a thread
		{"deploy", &core.Lane{ChatID: "x"}, ""},     // an unknown lane
		{"coffee", &b, ""},                          // another lane's words
		{strings.Repeat("deploy ", 100), nil, "m1"}, // long input is cut
	} {
		hs, err := s.Search(bg, c.query, c.lane, 20)
		if err != nil {
			t.Errorf("Search(%q): %v", c.query, err)
			continue
		}
		if got := hitIDs(hs); got != c.want {
			t.Errorf("Search(%q, %v) = %q, want %q (tsquery %s)", c.query, c.lane, got, c.want, parseQuery(c.query).tsquery())
		}
	}
}

// The same messages and the same queries, in this store and SQLite's: the
// same hits in the same order, and the same snippets. Queries are the
// corpus's words cut, recombined and decorated at random.
func TestSearchAnswersAsSQLiteDoes(t *testing.T) {
	pg := open(t)
	lite, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.WithLog(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	rnd := rand.New(rand.NewSource(7))
	var texts []string
	for _, c := range corpus {
		texts = append(texts, c.text)
	}
	// Long texts, so snippets are cut around where the match is.
	for _, w := range []string{"needle", "Crème", "naïve", "deploy"} {
		texts = append(texts,
			strings.Repeat("padding words before ", 30)+"the "+w+" sits here"+strings.Repeat(" and after it more words", 30),
			w+" at the start "+strings.Repeat("filler ", 80),
			strings.Repeat("filler ", 80)+"at the end "+w)
	}
	texts = append(texts, "Ünïcödé ÀÉÎÕÜ àéîõü çÇ ñÑ ÿŸ", "x\u0301y e\u0301te", "日本語のテキスト 検索", "tab\tnew\nline  spaces")
	var msgs []core.Message
	for i := range 300 {
		text := texts[rnd.Intn(len(texts))]
		if rnd.Intn(3) == 0 {
			text += " " + texts[rnd.Intn(len(texts))]
		}
		lane := core.Lane{ChatID: []string{"default", "chan_b"}[rnd.Intn(2)]}
		msgs = append(msgs, core.Message{ID: fmt.Sprint("r", i), Lane: lane, Role: core.RoleUser, Text: text, TS: int64(i)})
	}
	insert := func(ins func(core.Message, bool) error) error {
		for _, m := range msgs {
			if err := ins(m, false); err != nil {
				return err
			}
		}
		return nil
	}
	write(t, pg, func(tx store.Tx) error { return insert(tx.InsertMessage) })
	if err := lite.Write(bg, func(tx store.Tx) error { return insert(tx.InsertMessage) }); err != nil {
		t.Fatal(err)
	}
	// What people type differs from what they wrote: case, accents.
	unaccent := strings.NewReplacer("é", "e", "è", "e", "É", "E", "û", "u", "ü", "u", "Ü", "U", "ï", "i", "ö", "o", "ç", "c", "à", "a", "ê", "e", "ế", "e", "ệ", "e", "e\u0301", "e")
	variants := []func(string) string{
		func(w string) string { return w }, strings.ToLower, strings.ToUpper, unaccent.Replace,
		func(w string) string { return strings.ToUpper(unaccent.Replace(w)) },
	}
	word := func() string {
		ws := strings.Fields(texts[rnd.Intn(len(texts))])
		return variants[rnd.Intn(len(variants))](ws[rnd.Intn(len(ws))])
	}
	decor := []string{"", "\"", "*", "(", ")", "'", "AND ", " OR", "-", ":"}
	for i := range 600 {
		var q []string
		for range 1 + rnd.Intn(3) {
			w := word()
			if r := []rune(w); rnd.Intn(3) == 0 && len(r) > 2 {
				w = string(r[:1+rnd.Intn(len(r)-1)]) // a prefix
			}
			q = append(q, decor[rnd.Intn(len(decor))]+w+decor[rnd.Intn(len(decor))])
		}
		query := strings.Join(q, " ")
		var lane *core.Lane
		if i%4 == 0 {
			lane = &core.Lane{ChatID: "chan_b"}
		}
		want, err := lite.SearchPageBefore(bg, query, lane, "", 30)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pg.SearchPageBefore(bg, query, lane, "", 30)
		if err != nil {
			t.Fatalf("search %q: %v", query, err)
		}
		if hitIDs(got.Hits) != hitIDs(want.Hits) || got.Total != want.Total || got.More != want.More {
			t.Errorf("search %q: PostgreSQL %s (total %d), SQLite %s (total %d); tsquery %s, FTS5 %s", query,
				hitIDs(got.Hits), got.Total, hitIDs(want.Hits), want.Total, parseQuery(query).tsquery(), store.MatchExpr(query))
			continue
		}
		for j := range got.Hits {
			if got.Hits[j].Snippet != want.Hits[j].Snippet {
				t.Errorf("search %q, %s: snippet %q, SQLite's %q", query, got.Hits[j].MessageID, got.Hits[j].Snippet, want.Hits[j].Snippet)
				break
			}
		}
	}
}

// Whatever a person types, PostgreSQL accepts the search.
func TestSearchNeverFails(t *testing.T) {
	s := open(t)
	fill(t, s)
	inputs := []string{`"`, `""`, `*`, `**`, `"*"`, `^`, `-`, `+`, `:`, `text:`, `lane_key:x`, `{text}`, `NEAR(`, `NEAR/3`,
		`a OR`, `OR a`, `NOT`, `AND AND`, `(((`, `)))`, `'`, `\`, "\uE000", "\uE001x", `a:b:c`, `a -b`, "x\u0301", "\u0301", "ǅ",
		"ﷺ", "\U0001F600\U0001F600", "日本語のテキスト", "العربية", "a\x00b", string([]byte{0xff, 0xfe}), "%", "_", "a NEAR/2 b",
		`a & b`, `a | b`, `!a`, `a <-> b`, `a:*`, `'a'`, `\'`, `$$`, `);--`, strings.Repeat("x", 5000), strings.Repeat("é", 3000)}
	for _, q := range inputs {
		if _, err := s.SearchPageBefore(bg, q, nil, "", 5); err != nil {
			t.Errorf("search %q failed: %v (tsquery %s)", q, err, parseQuery(q).tsquery())
		}
		if _, err := s.SearchPageBefore(bg, q, &core.Lane{ChatID: q, ThreadID: q}, "", 5); err != nil {
			t.Errorf("search %q in a lane of that name failed: %v", q, err)
		}
	}
	// Long words are stored and found.
	long := strings.Repeat("é", 3000)
	write(t, s, func(tx store.Tx) error {
		return tx.InsertMessage(core.Message{ID: "long", Lane: core.Lane{ChatID: "default"}, Role: "user", Text: long + " " + strings.Repeat("w ", 20000)}, false)
	})
	if hs, err := s.Search(bg, long, nil, 5); err != nil || hitIDs(hs) != "long" {
		t.Fatalf("a 3000-letter word: %q, %v", hitIDs(hs), err)
	}
}

func TestSearchFollowsDeletesAndStreaming(t *testing.T) {
	s := open(t)
	fill(t, s)
	lane := core.Lane{ChatID: "default"}
	reply := core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, TS: 100}
	write(t, s, func(tx store.Tx) error { return tx.InsertMessage(reply, true) })
	write(t, s, func(tx store.Tx) error { return tx.SaveProgress("r1", "zebra crossing", "") })
	if hs, _ := s.Search(bg, "zebra", nil, 20); len(hs) != 0 {
		t.Fatalf("a streaming reply was found: %v", hitIDs(hs))
	}
	reply.Text = "zebra crossing, final"
	write(t, s, func(tx store.Tx) error { return tx.FinishMessage(reply) })
	if hs, _ := s.Search(bg, "zebra", nil, 20); hitIDs(hs) != "r1" {
		t.Fatalf("the finished reply: %q", hitIDs(hs))
	}
	// Finished again (a crash recovery): indexed once, with the new text.
	reply.Text, reply.Stopped = "giraffe", true
	write(t, s, func(tx store.Tx) error { return tx.FinishMessage(reply) })
	if hs, _ := s.Search(bg, "zebra", nil, 20); len(hs) != 0 {
		t.Fatalf("the old text still matches: %v", hitIDs(hs))
	}
	if hs, _ := s.Search(bg, "giraffe", nil, 20); hitIDs(hs) != "r1" {
		t.Fatalf("the new text: %q", hitIDs(hs))
	}
	write(t, s, func(tx store.Tx) error { return tx.DeleteMessages(lane, []string{"r1", "m1"}) })
	write(t, s, func(tx store.Tx) error { _, err := tx.DeleteChannel("chan_b"); return err })
	for _, q := range []string{"giraffe", "service", "creme", "river", "resume"} {
		if hs, _ := s.Search(bg, q, nil, 20); len(hs) != 0 {
			t.Errorf("deleted messages match %q: %v", q, hitIDs(hs))
		}
		// Nothing of them is left to match: the words live in the row.
		var n int
		if err := s.pool.QueryRow(bg, `SELECT count(*) FROM messages WHERE search @@ $1::text::tsquery`, parseQuery(q).tsquery()).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d rows still match %q (%v)", n, q, err)
		}
	}
	if hs, _ := s.Search(bg, "deploy", nil, 20); hitIDs(hs) != "m6" {
		t.Fatalf("survivors: %q", hitIDs(hs))
	}
}

func TestSearchLimitAndSnippet(t *testing.T) {
	s := open(t)
	lane := core.Lane{ChatID: "default"}
	write(t, s, func(tx store.Tx) error {
		for i := range 150 {
			text := fmt.Sprintf("%s needle number %d %s", strings.Repeat("hay ", 60), i, strings.Repeat("stack ", 60))
			if err := tx.InsertMessage(core.Message{ID: fmt.Sprint("n", i), Lane: lane, Role: core.RoleUser, Text: text, TS: int64(i)}, false); err != nil {
				return err
			}
		}
		// A message cannot move its own snippet with the marks.
		return tx.InsertMessage(core.Message{ID: "marked", Lane: lane, Role: core.RoleUser, Text: "\uE000fake\uE001 " + strings.Repeat("hay ", 60) + "haystack needle", TS: 200}, false)
	})
	hs, err := s.Search(bg, "needle", nil, 1000)
	if err != nil || len(hs) != 100 {
		t.Fatalf("%d hits, %v; want the maximum, 100", len(hs), err)
	}
	if hs[0].MessageID != "marked" || hs[1].MessageID != "n149" || hs[99].MessageID != "n51" {
		t.Fatalf("not newest first: %s, %s … %s", hs[0].MessageID, hs[1].MessageID, hs[99].MessageID)
	}
	if !strings.HasSuffix(hs[0].Snippet, "haystack needle") || strings.Contains(hs[0].Snippet, "fake") {
		t.Fatalf("the marked message's snippet %q", hs[0].Snippet)
	}
	for _, h := range hs[1:] {
		if !strings.Contains(h.Snippet, "needle number") || !strings.HasPrefix(h.Snippet, "…") || !strings.HasSuffix(h.Snippet, "…") ||
			utf8.RuneCountInString(h.Snippet) > store.SnippetRunes {
			t.Fatalf("snippet %q", h.Snippet)
		}
	}
}

func TestImportMessages(t *testing.T) {
	s := open(t)
	fill(t, s)
	i := 0
	n, err := s.ImportMessages(bg, func() (core.Message, bool) {
		i++
		return core.Message{ID: fmt.Sprint("imp", i), Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: fmt.Sprint("imported walrus ", i), TS: int64(100 + i)}, i <= 1234
	})
	if err != nil || n != 1234 {
		t.Fatalf("imported %d, %v", n, err)
	}
	if p, _ := s.SearchPageBefore(bg, "walrus", nil, "", 10); p.Total != 1000 {
		t.Fatalf("total over the imported messages %d", p.Total)
	}
	if hs, _ := s.Search(bg, "deploy", nil, 100); hitIDs(hs) != "m6,m1" {
		t.Fatalf("earlier messages: %q", hitIDs(hs))
	}
	if b, err := s.SearchIndexBytes(bg); err != nil || b <= 0 {
		t.Fatalf("index size %d, %v", b, err)
	}
}
