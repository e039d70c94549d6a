package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
)

// FleetKeySize is the fleet key's length in bytes.
const FleetKeySize = 32

// FleetKey returns the key the replicas of this database sign their NATS
// messages with (package fleet), making it on the first call. The
// database is the trust root the replicas already share: whoever can read
// it can read every message and token, so it adds no one who could not
// already speak for the fleet. Replicas starting together end with one
// key: each offers its own random key, the first insert wins (the primary
// key admits one row), and each then reads the row that won, in a
// statement of its own so that it sees a row another transaction just
// committed.
func (s *Store) FleetKey(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, FleetKeySize)
	rand.Read(fresh) // never fails (crypto/rand)
	if _, err := s.exec(ctx, `INSERT INTO fleet_key (key) VALUES ($1) ON CONFLICT DO NOTHING`, fresh); err != nil {
		return nil, fmt.Errorf("the fleet key: %w", err)
	}
	var key []byte
	if err := s.queryRow(ctx, `SELECT key FROM fleet_key`).Scan(&key); err != nil {
		return nil, fmt.Errorf("the fleet key: %w", err)
	}
	if len(key) != FleetKeySize { // the column's check says so: a damaged row
		return nil, fmt.Errorf("the fleet key is %d bytes, not %d", len(key), FleetKeySize)
	}
	return key, nil
}
