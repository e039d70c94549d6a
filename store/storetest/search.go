package storetest

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

var searchTests = []test{
	{"SearchQueryRules", testSearchRules},
	{"SearchNeverFails", testSearchNeverFails},
	{"SearchFollowsDeletesAndStreaming", testSearchFollowsWrites},
	{"SearchLimitAndSnippet", testSearchSnippets},
	{"SearchPages", testSearchPages},
}

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

func fillCorpus(t *testing.T, s Store) {
	t.Helper()
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: "chan_b", Name: "B", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "t_1", Name: "T", Kind: core.KindThread, ParentChatID: "chan_b"}); err != nil {
			return err
		}
		for i, m := range corpus {
			if err := tx.InsertMessage(userMsg(core.Lane{ChatID: m.chat, ThreadID: m.thread}, m.id, m.text, int64(i+1)), false); err != nil {
				return err
			}
		}
		return nil
	})
}

// search returns the ids of the newest page's hits, comma-separated.
func search(t *testing.T, s Store, q string, lane *core.Lane) string {
	t.Helper()
	p, err := s.SearchPageBefore(bg, q, lane, "", 20)
	if err != nil {
		t.Errorf("search %q: %v", q, err)
		return ""
	}
	return hitIDs(p.Hits)
}

func hitIDs(hs []store.SearchHit) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.MessageID)
	}
	return strings.Join(out, ",")
}

// What a person types is words, never syntax: every word must match, the
// last one as a prefix (from two letters on), case and diacritics folded
// on both sides, punctuation, quotes, emoji and operators only separate
// words (operators alone are words), hits newest first, scoped to a lane
// without its threads when asked.
func testSearchRules(t *testing.T, s Store) {
	fillCorpus(t, s)
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
		if got := search(t, s, c.query, c.lane); got != c.want {
			t.Errorf("search %q in %v = %q, want %q", c.query, c.lane, got, c.want)
		}
	}
}

// Whatever a person types, the store accepts the search.
func testSearchNeverFails(t *testing.T, s Store) {
	fillCorpus(t, s)
	inputs := []string{`"`, `""`, `*`, `**`, `"*"`, `^`, `-`, `+`, `:`, `text:`, `lane_key:x`, `{text}`, `NEAR(`, `NEAR/3`,
		`a OR`, `OR a`, `NOT`, `AND AND`, `(((`, `)))`, `'`, `\`, "\uE000", "\uE001x", `a:b:c`, `a -b`, "x\u0301", "ǅ",
		"ﷺ", "\U0001F600\U0001F600", "日本語のテキスト", "العربية", "a\x00b", string([]byte{0xff, 0xfe}), "%", "_", "a NEAR/2 b",
		`a & b`, `a | b`, `!a`, `a <-> b`, `a:*`, `'a'`, `\'`, `$$`, `);--`}
	for _, q := range inputs {
		if _, err := s.SearchPageBefore(bg, q, nil, "", 5); err != nil {
			t.Errorf("search %q failed: %v", q, err)
		}
		if _, err := s.SearchPageBefore(bg, q, &core.Lane{ChatID: q, ThreadID: q}, "", 5); err != nil {
			t.Errorf("search %q in a lane of that name failed: %v", q, err)
		}
	}
}

// A reply being written is not found until it finishes, then with its
// final text only (also when finished again, by a crash recovery); a
// deleted message, or one of a deleted channel, never matches.
func testSearchFollowsWrites(t *testing.T, s Store) {
	fillCorpus(t, s)
	lane := core.Lane{ChatID: core.DefaultChatID}
	reply := core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, TS: 100}
	write(t, s, func(tx store.Tx) error { return tx.InsertMessage(reply, true) })
	write(t, s, func(tx store.Tx) error { return tx.SaveProgress("r1", "zebra crossing", "") })
	if got := search(t, s, "zebra", nil); got != "" {
		t.Fatalf("a streaming reply was found: %v", got)
	}
	reply.Text = "zebra crossing, final"
	write(t, s, func(tx store.Tx) error { return tx.FinishMessage(reply) })
	if got := search(t, s, "zebra", nil); got != "r1" {
		t.Fatalf("the finished reply: %q", got)
	}
	reply.Text, reply.Stopped = "giraffe", true
	write(t, s, func(tx store.Tx) error { return tx.FinishMessage(reply) })
	if got := search(t, s, "zebra", nil); got != "" {
		t.Fatalf("the old text still matches: %v", got)
	}
	if got := search(t, s, "giraffe", nil); got != "r1" {
		t.Fatalf("the new text: %q", got)
	}
	write(t, s, func(tx store.Tx) error { return tx.DeleteMessages(lane, []string{"r1", "m1"}) })
	write(t, s, func(tx store.Tx) error { _, err := tx.DeleteChannel("chan_b"); return err })
	for _, q := range []string{"giraffe", "service", "creme", "river", "resume"} {
		if got := search(t, s, q, nil); got != "" {
			t.Errorf("deleted messages match %q: %v", q, got)
		}
	}
	if got := search(t, s, "deploy", nil); got != "m6" {
		t.Fatalf("survivors: %q", got)
	}
}

// A page holds at most 100 hits, newest first, each with a snippet of at
// most store.SnippetRunes runes around its match, "…" where it was cut.
func testSearchSnippets(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	write(t, s, func(tx store.Tx) error {
		for i := range 150 {
			text := fmt.Sprintf("%s needle number %d %s", strings.Repeat("hay ", 60), i, strings.Repeat("stack ", 60))
			if err := tx.InsertMessage(userMsg(lane, fmt.Sprint("n", i), text, int64(i)), false); err != nil {
				return err
			}
		}
		return tx.InsertMessage(userMsg(lane, "short", "a short needle", 200), false)
	})
	p, err := s.SearchPageBefore(bg, "needle", nil, "", 1000)
	if err != nil || len(p.Hits) != 100 {
		t.Fatalf("%d hits, %v; want the maximum, 100", len(p.Hits), err)
	}
	if p.Hits[0].MessageID != "short" || p.Hits[1].MessageID != "n149" || p.Hits[99].MessageID != "n51" {
		t.Fatalf("not newest first: %s, %s … %s", p.Hits[0].MessageID, p.Hits[1].MessageID, p.Hits[99].MessageID)
	}
	if h := p.Hits[0]; h.Snippet != "a short needle" || h.Lane != lane || h.Role != core.RoleUser || h.TS != 200 {
		t.Fatalf("a short message's hit: %+v", h)
	}
	for _, h := range p.Hits[1:] {
		if !strings.Contains(h.Snippet, "needle number") || !strings.HasPrefix(h.Snippet, "…") || !strings.HasSuffix(h.Snippet, "…") ||
			utf8.RuneCountInString(h.Snippet) > store.SnippetRunes || strings.ContainsAny(h.Snippet, "\uE000\uE001") {
			t.Fatalf("snippet %q", h.Snippet)
		}
	}
}

// A search is paged newest first: each page holds the hits older than the
// last one of the page before, More says whether there are more, and
// Total counts them all, up to store.MaxSearchTotal, on the first page.
func testSearchPages(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	other := core.Lane{ChatID: "chan_b"}
	write(t, s, func(tx store.Tx) error {
		for i := range 1200 {
			l := lane
			if i >= 150 {
				l = other
			}
			if err := tx.InsertMessage(userMsg(l, fmt.Sprint("p", i), fmt.Sprint("needle ", i), int64(i)), false); err != nil {
				return err
			}
		}
		return nil
	})
	var got []string
	before := ""
	for page := 0; ; page++ {
		p, err := s.SearchPageBefore(bg, "needle", &lane, before, 50)
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
	if p, err := s.SearchPageBefore(bg, "needle 7", &lane, "", 50); err != nil || p.Total != 1 || len(p.Hits) != 1 || p.More {
		t.Fatalf("one hit: %+v, %v", p, err)
	}
	p, err := s.SearchPageBefore(bg, "needle", nil, "", 20)
	if err != nil || p.Total != store.MaxSearchTotal || !p.More || len(p.Hits) != 20 || p.Hits[0].MessageID != "p1199" {
		t.Fatalf("all lanes: total %d, more %v, %d hits (%v)", p.Total, p.More, len(p.Hits), err)
	}
	if _, err := s.SearchPageBefore(bg, "needle", nil, "m_nothing", 20); !notFound(err) {
		t.Fatalf("an unknown before: %v", err)
	}
	if p, err := s.SearchPageBefore(bg, "!!", nil, "", 20); err != nil || len(p.Hits) != 0 || p.Total != 0 || p.More {
		t.Fatalf("nothing searchable: %+v, %v", p, err)
	}
}
