package postgres

import (
	"context"
	"errors"
	"math"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/jackc/pgx/v5"
)

// Search, by package store's rules (words.go has how words are made):
// every word of the query must be in the text, the last one as a prefix;
// hits come newest first; deleted messages are gone with their row and
// streaming ones have no words yet, so neither can match.

// Search finds the messages whose text has every word of query, in all
// lanes or, when lane is set, in that one, newest first.
func (s *Store) Search(ctx context.Context, query string, lane *core.Lane, limit int) ([]store.SearchHit, error) {
	q := parseQuery(query)
	if len(q.words) == 0 {
		return nil, nil
	}
	return s.searchBelow(ctx, q, lane, math.MaxInt64, max(1, min(limit, 100)))
}

// SearchPageBefore is Search one page at a time: the hits older than the
// message before (none: the newest page), whether there are more, and on
// the first page the total, counted up to store.MaxSearchTotal. An unknown
// before is store.ErrNotFound.
func (s *Store) SearchPageBefore(ctx context.Context, query string, lane *core.Lane, before string, limit int) (store.SearchPage, error) {
	q := parseQuery(query)
	if len(q.words) == 0 {
		return store.SearchPage{}, nil
	}
	below := int64(math.MaxInt64)
	if before != "" {
		err := s.queryRow(ctx, `SELECT seq FROM messages WHERE id = $1`, before).Scan(&below)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.SearchPage{}, store.ErrNotFound
		}
		if err != nil {
			return store.SearchPage{}, err
		}
	}
	limit = max(1, min(limit, 100))
	hits, err := s.searchBelow(ctx, q, lane, below, limit+1)
	if err != nil {
		return store.SearchPage{}, err
	}
	p := store.SearchPage{Hits: hits, More: len(hits) > limit}
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
	where, args := matchWhere(q, lane, math.MaxInt64)
	err = s.queryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM messages WHERE `+where+` LIMIT `+itoa(store.MaxSearchTotal)+`) m`, args...).Scan(&p.Total)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	return p, err
}

// matchWhere is the condition of q's matches older than below, with its
// arguments.
func matchWhere(q searchQuery, lane *core.Lane, below int64) (string, []any) {
	where := `search @@ $1::text::tsquery AND seq < $2`
	args := []any{q.tsquery(), below}
	if lane != nil {
		where += ` AND chat_id = $3 AND thread_id = $4`
		args = append(args, lane.ChatID, lane.ThreadID)
	}
	return where, args
}

// searchBelow returns up to limit hits of q older than the message
// numbered below. The planner chooses between the GIN index (a rare word)
// and walking the messages newest first until limit match (a common one).
func (s *Store) searchBelow(ctx context.Context, q searchQuery, lane *core.Lane, below int64, limit int) ([]store.SearchHit, error) {
	where, args := matchWhere(q, lane, below)
	rows, err := s.query(ctx, `SELECT id, chat_id, thread_id, role, ts, text FROM messages WHERE `+where+`
		ORDER BY seq DESC LIMIT `+itoa(limit), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.SearchHit
	for rows.Next() {
		var h store.SearchHit
		var text string
		if err := rows.Scan(&h.MessageID, &h.Lane.ChatID, &h.Lane.ThreadID, &h.Role, &h.TS, &text); err != nil {
			return nil, err
		}
		h.Snippet = store.Snippet(q.mark(text), store.SnippetRunes)
		out = append(out, h)
	}
	return out, rows.Err()
}

// SearchIndexBytes is the size of the search index: the GIN index and the
// words stored beside each message.
func (s *Store) SearchIndexBytes(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT pg_total_relation_size('messages_search') + COALESCE((SELECT SUM(pg_column_size(search)) FROM messages), 0)`).Scan(&n)
	return n, err
}

// ImportMessages adds finished messages in bulk (imports, benchmarks), in
// one transaction: next is called until it returns false. Rows go in
// batches of statements sent together, not one round trip each.
func (s *Store) ImportMessages(ctx context.Context, next func() (core.Message, bool)) (int, error) {
	n := 0
	err := s.write(ctx, func(tx *Tx) error {
		const chunk = 500
		for done := false; !done; {
			b := &pgx.Batch{}
			for b.Len() < chunk {
				m, ok := next()
				if !ok {
					done = true
					break
				}
				if !storable([]any{m.ID, m.Lane.ChatID, m.Lane.ThreadID, m.Role, m.Text}) {
					return ErrNotText.New()
				}
				b.Queue(`INSERT INTO messages (id, chat_id, thread_id, role, text, ts, search) VALUES ($1,$2,$3,$4,$5,$6,$7::text::tsvector)`,
					m.ID, m.Lane.ChatID, m.Lane.ThreadID, m.Role, m.Text, m.TS, tsvector(m.Text))
			}
			if b.Len() == 0 {
				break
			}
			if err := tx.tx.SendBatch(tx.ctx, b).Close(); err != nil {
				return err
			}
			n += b.Len()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
