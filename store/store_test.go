package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// The store's contract (cursors, records, cascades, search rules, cron,
// push queue, tokens, media rows) is store/storetest's, run against SQLite
// by TestContract; the tests in this package are SQLite's own: corrupt
// rows behind the store's back, migrations, the full-text index, bulk
// import.

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "t.db"))
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
