package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// The store's contract (cursors, records, cascades, search rules, cron,
// push queue, tokens, media rows) is store/storetest's, run against SQLite
// by TestContract; the tests in this package are SQLite's own: corrupt
// rows behind the store's back, migrations, the full-text index, bulk
// import.

// open opens a store in a temporary directory, closed when the test ends.
func open(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "t.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func appendEvent(t *testing.T, s *Store, ev *core.Event) int64 {
	t.Helper()
	var c int64
	if err := s.Write(context.Background(), func(tx Tx) error {
		var err error
		c, _, err = tx.AppendEvent(ev)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

func msgEvent(lane core.Lane, id string) *core.Event {
	return &core.Event{Type: core.EvMessage, Lane: lane, Message: &core.Message{ID: id, Lane: lane, Role: core.RoleUser}}
}

// Durability is SQLite's synchronous setting on the writer: NORMAL unless
// FULL is asked for; anything else is refused before the file is opened.
func TestDurability(t *testing.T) {
	for d, want := range map[Durability]int{"": 1, DurabilityNormal: 1, DurabilityFull: 2} {
		s, err := Open(filepath.Join(t.TempDir(), "t.db"), WithDurability(d))
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := s.w.QueryRow(`PRAGMA synchronous`).Scan(&got); err != nil || got != want {
			t.Errorf("durability %q: synchronous = %d (%v), want %d", d, got, err, want)
		}
		s.Close()
	}
	path := filepath.Join(t.TempDir(), "t.db")
	if _, err := Open(path, WithDurability("paranoid")); err == nil || !strings.Contains(err.Error(), `"paranoid"`) {
		t.Fatalf("an unknown durability: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused open made the file: %v", err)
	}
}

// A keyed read runs under a context that cannot end (pointRow), but one
// whose context has ended already still fails with its error, and one
// running under a live context still reads.
func TestPointReadsHonourAnEndedContext(t *testing.T) {
	s := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Write(ctx, func(tx Tx) error { _, err := tx.SeeDevice(Device{ID: "phone"}); return err }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.HelloState(ctx, "phone"); err != nil {
		t.Fatalf("a keyed read under a live context: %v", err)
	}
	cancel()
	if _, _, err := s.HelloState(ctx, "phone"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a keyed read under an ended context returned %v, want context.Canceled", err)
	}
}
