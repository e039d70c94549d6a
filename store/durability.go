package store

import "fmt"

// Durability is how much of what was committed survives a power loss or a
// crash of the operating system. Either way, in WAL mode, a crash of the
// process loses nothing committed and no crash corrupts the file.
type Durability string

const (
	// DurabilityNormal (the default, synchronous=NORMAL) syncs the WAL to
	// the disk only at checkpoints: a power loss or an OS crash may undo
	// the newest commits, back to a consistent earlier state.
	DurabilityNormal Durability = "normal"
	// DurabilityFull (synchronous=FULL) syncs the WAL at every commit, so
	// a commit that returned survives a power loss too, at the price of
	// an fsync per commit (README: "Durability").
	DurabilityFull Durability = "full"
)

// WithDurability sets how commits reach the disk (DurabilityNormal when
// unset).
func WithDurability(d Durability) Option { return func(s *Store) { s.durability = d } }

// pragma is SQLite's name for the setting.
func (d Durability) pragma() (string, error) {
	switch d {
	case "", DurabilityNormal:
		return "NORMAL", nil
	case DurabilityFull:
		return "FULL", nil
	}
	return "", fmt.Errorf("unknown durability %q: want %q or %q", string(d), DurabilityNormal, DurabilityFull)
}
