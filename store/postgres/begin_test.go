package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/store"
)

// Every pooled connection dies while idle (its backend ended, as a
// PostgreSQL restart ends them all) and was used within the second, so
// pgx hands it out unchecked: the next write still commits, its BEGIN
// tried on one connection after another until a new one is made.
func TestWriteAfterTheServerEndedEveryConnection(t *testing.T) {
	url := pgtest.DB(t)
	s, err := Open(bg, url, WithLog(quiet), WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Four connections, all used just now.
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.pool.Acquire(bg)
			if err != nil {
				t.Error(err)
				return
			}
			<-hold
			c.Release()
		}()
	}
	waitConns(t, s, 4)
	close(hold)
	wg.Wait()
	// Another client ends them.
	other, err := Open(bg, url, WithLog(quiet), WithMaxConns(1), WithoutMigration())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.pool.Exec(bg, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	lk := core.Lane{ChatID: core.DefaultChatID}
	m := core.Message{ID: "m_after", Lane: lk, Role: core.RoleUser, Text: "after the restart", TS: 1}
	if err := s.Write(bg, func(tx store.Tx) error { return tx.InsertMessage(m, false) }); err != nil {
		t.Fatalf("the write after every connection died: %v", err)
	}
	if got, err := s.Message(bg, m.ID); err != nil || got.Text != m.Text {
		t.Fatalf("stored %q (%v)", got.Text, err)
	}
}

func waitConns(t *testing.T, s *Store, n int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	for s.pool.Stat().AcquiredConns() < n {
		if ctx.Err() != nil {
			t.Fatalf("%d connections acquired, want %d", s.pool.Stat().AcquiredConns(), n)
		}
		<-time.After(time.Millisecond) // the pool's counters: no event to wait on
	}
}
