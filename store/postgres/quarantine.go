package postgres

import (
	"context"
	"strconv"

	"github.com/irisgate/irisgate/store"
)

// Quarantine lists the rows a migration could not read, oldest first (the
// table package store's migration fills; none of PostgreSQL's migrations
// has had to yet).
func (s *Store) Quarantine() ([]store.Quarantined, error) {
	ctx := context.Background()
	rows, err := s.query(ctx, `SELECT tbl, key, body, err, ts FROM quarantine ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Quarantined
	for rows.Next() {
		var q store.Quarantined
		if err := rows.Scan(&q.Table, &q.Key, &q.Body, &q.Err, &q.TS); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// warnQuarantine reminds the owner at every start of what is in the
// quarantine: nothing there is lost, but nothing there is used either.
func (s *Store) warnQuarantine(ctx context.Context) {
	var n int
	var tables string
	if err := s.queryRow(ctx, `SELECT COUNT(*), COALESCE(string_agg(DISTINCT tbl, ','), '') FROM quarantine`).Scan(&n, &tables); err != nil || n == 0 {
		return
	}
	s.log.Warn("postgres: rows that did not decode are kept in the quarantine table, unused; see the README (Upgrading)",
		"rows", n, "tables", tables)
}

func itoa(n int) string { return strconv.Itoa(n) }
