package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
)

// SearchHit is one message that matches a search.
type SearchHit struct {
	MessageID string
	Lane      core.Lane
	Role      string
	Snippet   string
	TS        int64
}

// Search limits.
const (
	SnippetRunes = 160 // the longest snippet, ellipses included
	maxWords     = 16  // words of a query that are searched
)

// Search finds the messages whose text has every word of query (the last
// one as a prefix), in all lanes or, when lane is set, in that one. Hits
// come newest first. A query with nothing searchable in it (only
// punctuation, say) finds nothing.
func (s *Store) Search(ctx context.Context, query string, lane *core.Lane, limit int) ([]SearchHit, error) {
	expr := searchExpr(query, lane)
	if expr == "" {
		return nil, nil
	}
	if _, err := s.catchUp(ctx); err != nil {
		return nil, err
	}
	return s.searchBelow(ctx, expr, math.MaxInt64, max(1, min(limit, 100)))
}

// SearchPage is one page of a search's hits, newest first.
type SearchPage struct {
	Hits []SearchHit
	// More says older hits exist: the next page is the one before the
	// last hit.
	More bool
	// Total is how many messages match, counted up to MaxSearchTotal (a
	// total of MaxSearchTotal means that many or more), on the first page
	// only: counting costs about what finding the page does.
	Total int
}

// MaxSearchTotal bounds the count of a search's matches. Counting walks
// the index's lists to their end, so a common word would cost what the
// newest-first walk saves; a count that stops here stays cheap.
const MaxSearchTotal = 1000

// SearchPageBefore is Search one page at a time: the hits older than the
// message before (none: the newest page), whether there are more, and the
// total. An unknown before is ErrNotFound.
func (s *Store) SearchPageBefore(ctx context.Context, query string, lane *core.Lane, before string, limit int) (SearchPage, error) {
	expr := searchExpr(query, lane)
	if expr == "" {
		return SearchPage{}, nil
	}
	// Everything committed before the search is found: the index is
	// brought up to it first (index.go).
	if _, err := s.catchUp(ctx); err != nil {
		return SearchPage{}, err
	}
	below := int64(math.MaxInt64)
	if before != "" {
		err := s.pointRow(ctx, `SELECT seq FROM messages WHERE id = ?`, before).Scan(&below)
		if errors.Is(err, sql.ErrNoRows) {
			return SearchPage{}, ErrNotFound
		}
		if err != nil {
			return SearchPage{}, err
		}
	}
	limit = max(1, min(limit, 100))
	hits, err := s.searchBelow(ctx, expr, below, limit+1)
	if err != nil {
		return SearchPage{}, err
	}
	p := SearchPage{Hits: hits, More: len(hits) > limit}
	if p.More {
		p.Hits = hits[:limit]
	}
	switch {
	case before != "":
		return p, nil // the total came with the first page
	case !p.More:
		p.Total = len(p.Hits) // the whole result is here
		return p, nil
	}
	err = s.queryRow(ctx, `SELECT count(*) FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?)`,
		expr, MaxSearchTotal).Scan(&p.Total)
	return p, err
}

func searchExpr(query string, lane *core.Lane) string {
	expr := MatchExpr(query)
	if expr != "" && lane != nil {
		expr = fmt.Sprintf(`lane_key : "%s" AND %s`, laneKey(*lane), expr)
	}
	return expr
}

// searchBelow returns up to limit hits of expr older than the message
// numbered below.
func (s *Store) searchBelow(ctx context.Context, expr string, below int64, limit int) ([]SearchHit, error) {
	// Newest first is what the index gives cheaply: FTS5 walks its lists
	// backwards by rowid, from below, and stops at the limit, so a common
	// word costs no more than a rare one. Ranking by bm25 would score
	// every match first.
	rows, err := s.query(ctx, `SELECT m.id, m.chat_id, m.thread_id, m.role, m.ts,
		highlight(messages_fts, 0, char(57344), char(57345))
		FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid
		WHERE messages_fts MATCH ? AND messages_fts.rowid < ? ORDER BY messages_fts.rowid DESC LIMIT ?`, expr, below, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SearchHit
	for rows.Next() {
		var h SearchHit
		var marked string
		if err := rows.Scan(&h.MessageID, &h.Lane.ChatID, &h.Lane.ThreadID, &h.Role, &h.TS, &marked); err != nil {
			return nil, err
		}
		h.Snippet = Snippet(marked, SnippetRunes)
		out = append(out, h)
	}
	return out, rows.Err()
}

// laneKey is the lane's token in the index; it must match the lane_key
// column's expression: hex() of the UTF-8 bytes, upper case.
func laneKey(l core.Lane) string {
	return fmt.Sprintf("l%Xx%X", l.ChatID, l.ThreadID)
}

// MatchExpr turns what a person typed into an FTS5 query, or "" when
// nothing in it can be searched: QueryWords' words, each a quoted phrase
// of its tokens, the last one a prefix (Prefix). Whatever the input, the
// result is a valid query.
func MatchExpr(query string) string {
	words := QueryWords(query)
	if len(words) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("text : (")
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		b.WriteString(strings.Join(w, " "))
		b.WriteByte('"')
		if i == len(words)-1 && Prefix(w) {
			b.WriteByte('*')
		}
	}
	b.WriteByte(')')
	return b.String()
}

// QueryWords is the search rule every store keeps (PostgreSQL's too):
// user input is words, never syntax. Each word (split at white space)
// becomes its tokens, the runs of letters, digits, marks and private-use
// characters in it (IsSeparator: quotes, *, parentheses, emoji and other
// symbols only separate); the FTS operators written in capitals (AND, OR,
// NOT, NEAR) are dropped, unless the input is nothing else: then they
// were meant as words. At most maxWords words are kept; none means
// nothing to search.
func QueryWords(query string) [][]string {
	var words [][]string
	ops := 0
	for _, f := range strings.Fields(query) {
		var w []string
		for _, t := range strings.FieldsFunc(f, IsSeparator) {
			switch t {
			case "AND", "OR", "NOT", "NEAR":
				ops++
				continue
			}
			w = append(w, t)
		}
		if len(w) > 0 {
			words = append(words, w)
		}
		if len(words) == maxWords {
			break
		}
	}
	if len(words) == 0 && ops > 0 {
		return QueryWords(strings.ToLower(query))
	}
	return words
}

// Prefix reports whether the last word of a query, w, matches as a prefix:
// from two letters on. A prefix of one letter would merge the lists of
// every word that starts with it.
func Prefix(w []string) bool {
	return utf8.RuneCountInString(w[len(w)-1]) >= 2
}

// IsSeparator follows the index's tokenizer (unicode61): letters, numbers,
// marks and private-use characters make words, everything else separates
// them. The quote, the only character with a meaning inside a phrase, is a
// separator, so no input can end a phrase early; so are U+E000 and U+E001,
// the marks of a match (Snippet).
func IsSeparator(r rune) bool {
	return !(unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || unicode.Is(unicode.Co, r)) ||
		r == '\uE000' || r == '\uE001'
}

// Snippet cuts the text around its first highlighted match (between
// U+E000 and U+E001, as highlight() marks it) to at most n runes, with "…"
// where it was cut, whitespace collapsed and cuts made between words when
// one is near.
func Snippet(marked string, n int) string {
	var text []rune
	match := -1
	space := false
	for _, r := range marked {
		switch {
		case r == '\uE000':
			if match < 0 {
				match = len(text)
			}
			continue
		case r == '\uE001':
			continue
		case unicode.IsSpace(r):
			space = len(text) > 0
			continue
		}
		if space {
			text = append(text, ' ')
			space = false
		}
		text = append(text, r)
	}
	if len(text) <= n {
		return string(text)
	}
	match = max(match, 0)
	const before = 40 // context kept ahead of the match
	const slack = 15  // how far a cut may move to fall between words
	start := max(0, match-before)
	var end int
	switch {
	case start+n >= len(text):
		start, end = len(text)-(n-1), len(text)
	case start == 0:
		end = n - 1
	default:
		end = start + n - 2
	}
	if start > 0 {
		for i := start; i < min(start+slack, match, end); i++ {
			if text[i] == ' ' {
				start = i + 1
				break
			}
		}
	}
	if end < len(text) {
		for i := end; i > max(end-slack, start+1, match+1); i-- {
			if text[i] == ' ' {
				end = i
				break
			}
		}
	}
	out := strings.TrimSpace(string(text[start:end]))
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}

// SearchIndexBytes is the size of the search index on disk, once it holds
// everything committed.
func (s *Store) SearchIndexBytes(ctx context.Context) (int64, error) {
	if _, err := s.catchUp(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := s.queryRow(ctx, `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'messages_fts%'`).Scan(&n)
	return n, err
}

// ImportMessages adds finished messages in bulk (imports, benchmarks), in
// one transaction: next is called until it returns false. The new rows
// are indexed for search in the same transaction, in one statement at the
// end, which is about twice as fast for many rows as indexing them in
// batches.
func (s *Store) ImportMessages(ctx context.Context, next func() (core.Message, bool)) (int, error) {
	n := 0
	err := s.write(ctx, func(tx *sqliteTx) error {
		tx.hist.everything()
		st, err := tx.tx.Prepare(`INSERT INTO messages (id, chat_id, thread_id, role, text, ts) VALUES (?,?,?,?,?,?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for {
			m, ok := next()
			if !ok {
				break
			}
			if _, err := st.Exec(m.ID, m.Lane.ChatID, m.Lane.ThreadID, m.Role, m.Text, m.TS); err != nil {
				return err
			}
			n++
		}
		if !s.idx.on {
			return nil // an old schema: its trigger indexed each row
		}
		_, _, err = indexSome(tx, -1)
		return err
	})
	return n, err
}
