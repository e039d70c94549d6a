// Package sqlitetest helps tests act on an SQLite file as another process
// would.
package sqlitetest

import (
	"context"
	"database/sql"
	"testing"

	_ "modernc.org/sqlite" // the driver the store uses
)

// HoldWriteLock takes the write lock of the database at path from a
// connection of the test's own, as another writer would: the database's
// own writer waits (busy_timeout) until release, which the test's cleanup
// also calls.
func HoldWriteLock(t testing.TB, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		db.Close()
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}
