package store_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/storetest"
)

// TestContract runs the contract every store keeps against SQLite.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		path := filepath.Join(t.TempDir(), "contract.db")
		s, err := store.Open(path, store.WithLog(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return &sqliteHarness{Store: s, path: path}
	})
}

// sqliteHarness looks behind the interface through a connection of its
// own to the file, as another process would.
type sqliteHarness struct {
	*store.Store
	path string
}

// naming is each table's column that names a message.
var naming = map[string]string{"messages": "id", "reads": "message_id", "outbox": "message_id",
	"conversation": "message_id", "turns": "message_id", "media": "message_id"}

func (h *sqliteHarness) Residue(ctx context.Context, messageID string) (map[string]int, error) {
	db, err := sql.Open("sqlite", "file:"+h.path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[string]int{}
	for table, col := range naming {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE `+col+` = ?`, messageID).Scan(&n); err != nil {
			return nil, err
		}
		out[table] = n
	}
	return out, nil
}

// CorruptEvent overwrites the frame's body with bytes that are no record.
func (h *sqliteHarness) CorruptEvent(ctx context.Context, cursor int64) error {
	db, err := sql.Open("sqlite", "file:"+h.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE outbox SET body = ? WHERE cursor = ?`, []byte(`{"v":1,"type":`), cursor)
	return err
}
