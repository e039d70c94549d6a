package postgres

import (
	"context"
	"github.com/irisgate/irisgate/store"
	"log/slog"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

var quiet = slog.New(slog.DiscardHandler)

// open opens a store on a fresh database of the tests' server.
func open(t testing.TB) *Store {
	t.Helper()
	s, err := Open(bg, pgtest.DB(t), WithLog(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// write runs fn in one transaction and fails the test when it fails.
func write(t testing.TB, s *Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Write(bg, fn); err != nil {
		t.Fatal(err)
	}
}

func appendEvent(t testing.TB, s *Store, ev *core.Event) int64 {
	t.Helper()
	var c int64
	write(t, s, func(tx store.Tx) error {
		var err error
		c, _, err = tx.AppendEvent(ev)
		return err
	})
	return c
}

// rawExec writes behind the store's back, as a damaged or foreign writer
// would have.
func rawExec(t testing.TB, s *Store, q string, args ...any) {
	t.Helper()
	if _, err := s.pool.Exec(bg, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func msgEvent(lane core.Lane, id string) *core.Event {
	return &core.Event{Type: core.EvMessage, Lane: lane, TS: 1, Message: &core.Message{ID: id, Lane: lane, Role: core.RoleUser, TS: 1}}
}

func idle(ts int64) *core.Event {
	return &core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: core.DefaultChatID}, TS: ts}
}

func TestOpenMigrates(t *testing.T) {
	s := open(t)
	v, err := s.SchemaVersion(bg)
	if err != nil || v != int64(len(latestSources(t))) {
		t.Fatalf("schema version %d, %v", v, err)
	}
	c, err := s.Channel(bg, core.DefaultChatID)
	if err != nil || !c.IsDefault {
		t.Fatalf("default channel %+v, %v", c, err)
	}
	if c := appendEvent(t, s, idle(1)); c != 1 {
		t.Fatalf("first cursor %d", c)
	}
}
