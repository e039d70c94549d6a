package postgres

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/irisgate/irisgate/store"
	"golang.org/x/text/unicode/norm"
)

// How text becomes searchable words, the same for what is stored and what
// is searched: tokens are the runs that store.IsSeparator does not split
// (the rule SQLite's index follows), folded by fold. PostgreSQL only
// stores and matches the result (a tsvector; a tsquery), with its GIN
// index; its own parser is not used, because it keeps e-mail addresses,
// URLs, paths and version numbers whole (example would not find
// me@example.com, as it does in SQLite), so the two stores would answer
// the same query differently.

// Limits of PostgreSQL's tsvector, kept on both sides so that a long word
// or a long message still matches what it matched: a lexeme is at most
// 2046 bytes (longer words are cut, here, at a rune boundary), positions
// go up to 16383 and a lexeme keeps 256 of them (PostgreSQL drops the
// rest quietly; then a phrase far into a very long message may not match).
const (
	maxLexeme   = 512
	maxPosition = 16383
	maxPerWord  = 256
)

// tokens calls fn with each token of text, folded, and its byte offsets in
// text; a token that folds to nothing (only marks) is skipped.
func tokens(text string, fn func(tok string, start, end int)) {
	start := -1
	for i, r := range text {
		if store.IsSeparator(r) {
			if start >= 0 {
				if t := fold(text[start:i]); t != "" {
					fn(t, start, i)
				}
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		if t := fold(text[start:]); t != "" {
			fn(t, start, len(text))
		}
	}
}

// fold lower-cases a token and removes the diacritics of Latin letters,
// as SQLite's unicode61 tokenizer (remove_diacritics 2) does: é, ï, ø̃ and
// a decomposed e + U+0301 all lose their marks; letters of other scripts
// keep theirs (й is not и).
func fold(tok string) string {
	ascii := true
	for i := 0; i < len(tok); i++ {
		if tok[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	var b strings.Builder
	b.Grow(len(tok))
	if ascii {
		for i := 0; i < len(tok) && b.Len() < maxLexeme; i++ {
			c := tok[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	for _, r := range tok {
		r = unicode.ToLower(r)
		if isDiacritic(r) {
			continue
		}
		if base, ok := latinBase()[r]; ok {
			r = base
		}
		if b.Len()+utf8.RuneLen(r) > maxLexeme {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isDiacritic is the block of combining diacritical marks, which unicode61
// drops wherever they stand.
func isDiacritic(r rune) bool { return 0x300 <= r && r <= 0x36f }

// latinBase maps each lower-case Latin letter that decomposes into a
// letter and diacritics to that letter.
var latinBase = sync.OnceValue(func() map[rune]rune {
	m := map[rune]rune{}
	for _, block := range [][2]rune{{0xc0, 0x24f}, {0x1e00, 0x1eff}} {
		for r := block[0]; r <= block[1]; r++ {
			d := []rune(norm.NFD.String(string(r)))
			if len(d) < 2 || d[0] >= utf8.RuneSelf {
				continue
			}
			all := true
			for _, c := range d[1:] {
				all = all && isDiacritic(c)
			}
			if all {
				m[r] = unicode.ToLower(d[0])
			}
		}
	}
	return m
})

// tsvector is text's words as a tsvector literal ('word':1,4 'other':2…).
// A lexeme holds no quote or backslash: both are separators.
func tsvector(text string) string {
	pos := map[string][]int{}
	n := 0
	tokens(text, func(tok string, _, _ int) {
		n++
		if p := pos[tok]; len(p) < maxPerWord {
			pos[tok] = append(p, min(n, maxPosition))
		}
	})
	words := make([]string, 0, len(pos))
	for w := range pos {
		words = append(words, w)
	}
	sort.Strings(words)
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('\'')
		b.WriteString(w)
		b.WriteString("':")
		last := 0
		for j, p := range pos[w] {
			if p == last {
				continue // clamped to maxPosition
			}
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p))
			last = p
		}
	}
	return b.String()
}

// searchQuery is a search's words, folded: each word a phrase of its tokens,
// the last one a prefix when prefix is set.
type searchQuery struct {
	words  [][]string
	prefix bool
}

// parseQuery applies the store's query rules (store.QueryWords) and folds
// the tokens as the text was folded. A word that folds to nothing is
// dropped; none left means nothing to search.
func parseQuery(q string) searchQuery {
	var out searchQuery
	for _, w := range store.QueryWords(q) {
		var toks []string
		for _, t := range w {
			tokens(t, func(tok string, _, _ int) { toks = append(toks, tok) })
		}
		if len(toks) > 0 {
			out.words = append(out.words, toks)
			out.prefix = store.Prefix(w)
		}
	}
	return out
}

// tsquery is the query as a tsquery literal: 'a' <-> 'b' & 'c':*.
func (q searchQuery) tsquery() string {
	var b strings.Builder
	for i, w := range q.words {
		if i > 0 {
			b.WriteString(" & ")
		}
		if len(w) > 1 {
			b.WriteByte('(')
		}
		for j, t := range w {
			if j > 0 {
				b.WriteString(" <-> ")
			}
			b.WriteByte('\'')
			b.WriteString(t)
			b.WriteByte('\'')
			if q.prefix && i == len(q.words)-1 && j == len(w)-1 {
				b.WriteString(":*")
			}
		}
		if len(w) > 1 {
			b.WriteByte(')')
		}
	}
	return b.String()
}

// mark puts U+E000 and U+E001 around the first match of q in text (any
// word's phrase, the earliest in the text), as SQLite's highlight() marks
// it, for store.Snippet. Marks already in the text are taken out first, so
// a message cannot move its own snippet.
func (q searchQuery) mark(text string) string {
	text = strings.NewReplacer("\uE000", "", "\uE001", "").Replace(text)
	type tok struct {
		t          string
		start, end int
	}
	var ts []tok
	tokens(text, func(t string, start, end int) { ts = append(ts, tok{t, start, end}) })
	for i := range ts {
		for wi, w := range q.words {
			if i+len(w) > len(ts) {
				continue
			}
			ok := true
			for j, want := range w {
				got := ts[i+j].t
				if q.prefix && wi == len(q.words)-1 && j == len(w)-1 {
					ok = ok && strings.HasPrefix(got, want)
				} else {
					ok = ok && got == want
				}
			}
			if ok {
				s, e := ts[i].start, ts[i+len(w)-1].end
				return text[:s] + "\uE000" + text[s:e] + "\uE001" + text[e:]
			}
		}
	}
	return text
}
