package store

import (
	"context"
	"sync"
)

// knownDevices is every device id the devices table may hold, so that a
// hello of a device never seen answers without a read of the table: that
// read was 8 % of a handshake's CPU (a point query whose read transaction
// follows every commit's change of the WAL), and the first hello of every
// device pays it. The set may hold ids the table lost (a transaction that
// rolled back); it never lacks one the table has: each statement that
// may insert a row adds its id before it runs, and again after, so a
// pruning that dropped it meanwhile (one writer connection: statements do
// not overlap, but their callers do) does not leave the row unknown.
type knownDevices struct {
	mu  sync.Mutex
	ids map[string]struct{}
	// off: too many to hold, or a store that is not the table's one
	// writer (WithoutMigration): every question goes to the table.
	off bool
}

// maxKnownDevices bounds the set: past it (about 7 MiB of ids) it turns
// off and the table answers, as it did before.
const maxKnownDevices = 100_000

// load fills the set from the table (at open).
func (k *knownDevices) load(ctx context.Context, s *Store) error {
	rows, err := s.r.QueryContext(ctx, `SELECT device_id FROM devices`)
	if err != nil {
		return err
	}
	defer rows.Close()
	ids := map[string]struct{}{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids[id] = struct{}{}
		if len(ids) > maxKnownDevices {
			k.turnOff()
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	k.mu.Lock()
	k.ids = ids
	k.mu.Unlock()
	return nil
}

func (k *knownDevices) turnOff() {
	k.mu.Lock()
	k.off, k.ids = true, nil
	k.mu.Unlock()
}

// add notes that id may have a row.
func (k *knownDevices) add(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.off {
		return
	}
	if k.ids == nil {
		k.ids = map[string]struct{}{}
	}
	if _, ok := k.ids[id]; !ok && len(k.ids) >= maxKnownDevices {
		k.off, k.ids = true, nil
		return
	}
	k.ids[id] = struct{}{}
}

// drop forgets ids whose rows were deleted.
func (k *knownDevices) drop(ids []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		delete(k.ids, id)
	}
}

// absent reports whether id surely has no row.
func (k *knownDevices) absent(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.off || k.ids == nil {
		return false
	}
	_, ok := k.ids[id]
	return !ok
}

// inserting brackets a statement that may insert id's row (see
// knownDevices): it adds id now and returns what adds it again.
func (s *Store) inserting(id string) func() {
	s.devs.add(id)
	return func() { s.devs.add(id) }
}
