package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

// plan returns the lines of SQLite's plan for q on db.
func plan(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Deleting messages (message.delete, /undo, /retry) finds each table's
// rows by the ids: never a scan, never a walk of the lane's rows (an index
// searched on the lane's columns alone), which grow with its history.
func TestDeleteMessagesReadsNoWholeLane(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "p.db"), withIndexDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, args := inList([]string{"m_1", "m_2"})
	args = append(args, core.DefaultChatID, "")
	type stmt struct {
		sql  string
		args []any
	}
	var stmts []stmt
	for _, q := range deleteMessagesQueries(in) {
		stmts = append(stmts, stmt{q, args})
	}
	stmts = append(stmts, stmt{truncateConversation, []any{core.DefaultChatID, "", "m_1", core.DefaultChatID, ""}})
	for _, c := range stmts {
		for _, line := range plan(t, s.w, c.sql, c.args...) {
			if strings.HasPrefix(line, "SCAN") || strings.HasSuffix(line, "(chat_id=?)") || strings.HasSuffix(line, "(chat_id=? AND thread_id=?)") {
				t.Errorf("%s\n  plans %q", c.sql, line)
			}
		}
	}
}

// An empty id names no message: deleting it leaves the lane's frames that
// belong to no message (agent.busy, a thread's channel.created) alone.
func TestDeleteMessagesEmptyIDKeepsFrames(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "e.db"), withIndexDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	if err := s.Write(ctx, func(tx Tx) error {
		_, _, err := tx.AppendEvent(&core.Event{Type: core.EvAgentBusy, Lane: lane, TS: 1, Reason: "processing"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, func(tx Tx) error { return tx.DeleteMessages(lane, []string{""}) }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.OutboxLen(ctx); err != nil || n != 1 {
		t.Fatalf("outbox holds %d frames (%v) after deleting the id \"\"; want the 1 it had", n, err)
	}
}
