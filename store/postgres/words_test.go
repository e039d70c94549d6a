package postgres

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		"Deploy": "deploy", "CAFÉ": "cafe", "crème": "creme", "brûlée": "brulee", "naïve": "naive",
		"e\u0301te": "ete", "Tiếng": "tieng", "Việt": "viet", "ÀÉÎÕÜ": "aeiou", "ÿŸ": "yy",
		"straße": "straße", "йод": "йод", "άλφα": "άλφα", "ø": "ø", "日本語": "日本語", "ǅ": "ǆ", "İ": "i",
		"\u0301": "",
	} {
		if got := fold(in); got != want {
			t.Errorf("fold(%q) = %q, want %q", in, got, want)
		}
	}
	if got := fold(strings.Repeat("é", 1000)); len(got) > maxLexeme || !utf8.ValidString(got) {
		t.Errorf("a long word folds to %d bytes", len(got))
	}
}

func TestTSVectorAndQuery(t *testing.T) {
	if got := tsvector("The café, the CAFE! don't"); got != "'cafe':2,4 'don':5 't':6 'the':1,3" {
		t.Errorf("tsvector = %s", got)
	}
	if got := tsvector(""); got != "" {
		t.Errorf("an empty text: %q", got)
	}
	for in, want := range map[string]string{
		"deploy":            "'deploy':*",
		"deploy service":    "'deploy' & 'service':*",
		"don't x":           "('don' <-> 't') & 'x'",
		"x don't":           "'x' & ('don' <-> 't')",
		`'a' & b | !c <->`:  "'a' & 'b' & 'c'",
		"AND":               "'and':*",
		"\u0301 café":       "'cafe':*",
		"NEAR the river":    "'the' & 'river':*",
		"logs 🚀🔥":           "'logs':*",
		"*":                 "",
		"a\x00b":            "('a' <-> 'b')",
		"\xff\xfe deploy\\": "'deploy':*",
	} {
		if got := parseQuery(in).tsquery(); got != want {
			t.Errorf("tsquery(%q) = %s, want %s", in, got, want)
		}
	}
	// Positions stop where PostgreSQL's do.
	long := strings.Repeat("w ", maxPosition+10) + "end"
	if v := tsvector(long); !strings.HasPrefix(v, "'end':16383 'w':1,2,") {
		t.Errorf("a long text: %s…", v[:40])
	}
}

func TestMark(t *testing.T) {
	for _, c := range []struct{ query, text, want string }{
		{"cafe", "The Café is open", "The \uE000Café\uE001 is open"},
		{"don't", "I don't know", "I \uE000don't\uE001 know"},
		{"river left", "left the river", "\uE000left\uE001 the river"}, // the earliest match of any word
		{"dep", "a deployment", "a \uE000deployment\uE001"},
		{"x", "y \uE000z\uE001 x", "y z \uE000x\uE001"},
		{"absent", "nothing here", "nothing here"},
	} {
		if got := parseQuery(c.query).mark(c.text); got != c.want {
			t.Errorf("mark(%q, %q) = %q, want %q", c.query, c.text, got, c.want)
		}
	}
}

// FuzzWords: whatever the text, its tsvector and a query made of it are
// literals PostgreSQL takes (no quote, backslash or space inside a
// lexeme, positions in range), and a word of the text is found in it.
func FuzzWords(f *testing.F) {
	for _, s := range []string{"The café", "don't", "a\x00b", "\xff", "x\u0301", "me@example.com", "'\\", "日本語 テキスト"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v := tsvector(text)
		for _, lex := range strings.Split(v, " '") {
			word, _, _ := strings.Cut(strings.TrimPrefix(lex, "'"), "':")
			if strings.ContainsAny(word, "'\\ \x00") || len(word) > maxLexeme || !utf8.ValidString(word) {
				t.Fatalf("lexeme %q of %q", word, text)
			}
		}
		first := ""
		tokens(text, func(tok string, start, end int) {
			if first == "" {
				first = text[start:end]
			}
		})
		if first == "" {
			return
		}
		q := parseQuery(first)
		if len(q.words) == 0 {
			return // an operator word alone, lower-cased to something else
		}
		if m := q.mark(text); !strings.Contains(m, "\uE000") && !strings.ContainsAny(text, "\uE000\uE001") {
			t.Fatalf("%q: its first word %q not marked: %q", text, first, m)
		}
	})
}
