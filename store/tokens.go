package store

import (
	"context"
	"time"
)

// Token is a stored device token. Only its hash is kept.
type Token struct {
	ID       string
	Hash     []byte
	Name     string
	DeviceID string // when set, the token only admits this device
	Created  time.Time
	LastUsed time.Time
}

// AddToken stores a token's hash.
func (s *Store) AddToken(ctx context.Context, t Token) error {
	_, err := s.exec(ctx, `INSERT INTO tokens (id, hash, name, device_id, created) VALUES (?,?,?,?,?)`,
		t.ID, t.Hash, t.Name, t.DeviceID, t.Created.UnixMilli())
	s.tokens.Add(1) // after the write: a list read before it is stale
	return err
}

// TokensVersion changes whenever this store has added or revoked a token
// (it does not count last-use records, nor other processes' writes): a
// list of tokens read after it returned v is current while it still
// returns v, as far as this process knows.
func (s *Store) TokensVersion() uint64 { return s.tokens.Load() }

// Tokens lists all tokens, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.query(ctx, `SELECT id, hash, name, device_id, created, last_used FROM tokens ORDER BY created, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var created, used int64
		if err := rows.Scan(&t.ID, &t.Hash, &t.Name, &t.DeviceID, &created, &used); err != nil {
			return nil, err
		}
		t.Created = time.UnixMilli(created)
		if used > 0 {
			t.LastUsed = time.UnixMilli(used)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken deletes a token by id, and with it the push registrations
// of the devices that last said hello with it (DropPushOfRevoked), in one
// transaction; ErrNotFound when there is none.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	defer s.tokens.Add(1)
	return s.write(ctx, func(tx *sqliteTx) error {
		res, err := tx.exec(`DELETE FROM tokens WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		_, err = dropPushOf(tx, id)
		return err
	})
}

// TouchToken records a token's use.
func (s *Store) TouchToken(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `UPDATE tokens SET last_used = ? WHERE id = ?`, now(), id)
	return err
}
