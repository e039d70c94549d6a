package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

// The WAL is copied into the database by the checkpointer beside the
// writer (checkpoint.go), not by the commit that crosses SQLite's
// threshold: the writer's own automatic checkpoint sits far above what
// the test writes, and still the database file takes the data in.
func TestCheckpointsRunBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var pages int
	if err := s.w.QueryRow("PRAGMA wal_autocheckpoint").Scan(&pages); err != nil || pages != autoCheckpointPages {
		t.Fatalf("the writer's wal_autocheckpoint is %d (%v), want %d", pages, err, autoCheckpointPages)
	}
	before := fileSize(path)
	// 12 MiB of text in 600 commits: three times SQLite's default
	// threshold (1000 pages), a fifth of the writer's.
	writeMessages(t, s, 600)
	deadline := time.Now().Add(10 * time.Second)
	for fileSize(path)-before < 10<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the database file grew by %d bytes and the WAL is %d: the checkpointer did not copy the commits", fileSize(path)-before, fileSize(path+"-wal"))
		}
		time.Sleep(20 * time.Millisecond) // the checkpointer runs on its own clock: polled
	}
}

// Under steady commits a checkpoint beside the writer never copies the
// whole WAL, and SQLite starts the WAL over only once all of it was
// copied: once the WAL is long the writer copies the rest before its next
// transaction, which then starts the WAL over.
func TestLongWALIsStartedOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	// The search indexer is held off: a reader in the WAL keeps it from
	// being copied whole (the next long-WAL checkpoint tries again then).
	s, err := Open(path, withIndexDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.stopCheckpointLoop() // the test runs its steps itself
	writeMessages(t, s, 200)
	s.checkpoint() // beside the writer: it finds the WAL long
	writeMessages(t, s, 1)
	var busy, logged, copied int
	if err := s.w.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &copied); err != nil {
		t.Fatal(err)
	}
	if logged > 50 {
		t.Fatalf("the WAL holds %d frames after the writer finished the checkpoint and committed once: it was not started over", logged)
	}
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// writeMessages commits n messages of 22 KB, one a transaction.
func writeMessages(t *testing.T, s *Store, n int) {
	t.Helper()
	text := strings.Repeat("checkpoint ", 2000)
	lk := core.Lane{ChatID: core.DefaultChatID}
	for range n {
		m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleUser, Text: text, TS: time.Now().UnixMilli()}
		if err := s.Write(context.Background(), func(tx Tx) error { return tx.InsertMessage(m, false) }); err != nil {
			t.Fatal(err)
		}
	}
}
