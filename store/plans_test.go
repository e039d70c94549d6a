package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"

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
	s := open(t, withIndexDelay(time.Hour))
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

// Deleting a channel or thread finds the outbox's frames by its lane
// (outbox_chat), not by a scan of the outbox.
func TestDeleteChannelReadsNoWholeOutbox(t *testing.T) {
	s := open(t, withIndexDelay(time.Hour))
	for _, c := range []struct {
		lane string
		args []any
	}{{`chat_id = ?`, []any{"c"}}, {`chat_id = ? AND thread_id = ?`, []any{"c", "t"}}} {
		for _, q := range deleteLaneQueries(c.lane) {
			for _, line := range plan(t, s.w, q, c.args...) {
				if strings.HasPrefix(line, "SCAN outbox") || strings.HasPrefix(line, "SCAN messages") ||
					strings.HasPrefix(line, "SCAN conversation") || strings.HasPrefix(line, "SCAN reads") {
					t.Errorf("%s\n  plans %q", q, line)
				}
			}
		}
	}
}

// An empty id names no message: deleting it leaves the lane's frames that
// belong to no message (agent.busy, a thread's channel.created) alone.
func TestDeleteMessagesEmptyIDKeepsFrames(t *testing.T) {
	s := open(t, withIndexDelay(time.Hour))
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

// pagesRead is how many pages the writer's connection fetched (from its
// cache or the file) to run q: a count that does not depend on timing.
func pagesRead(t *testing.T, s *Store, q string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	c, err := s.w.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fetched := func(reset bool) (n int) {
		if err := c.Raw(func(dc any) error {
			for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
				cur, _, err := dc.(sqlite.DBStatus).Status(op, reset)
				if err != nil {
					return err
				}
				n += cur
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fetched(true)
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	return fetched(false)
}

// Retention's cut reads the frames that go and a few more, not the
// outbox: with nothing due it reads a handful of pages of an outbox of
// hundreds. (Its plan cannot tell: a MAX() that walks from the head down
// to the first match is "SEARCH outbox" too.)
func TestPruneCutReadsOnlyWhatGoes(t *testing.T) {
	s := open(t, withIndexDelay(time.Hour))
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	const frames = 3000
	if err := s.Write(ctx, func(tx Tx) error {
		for i := range frames {
			m := &core.Message{ID: fmt.Sprint("m_", i), Lane: lane, Role: core.RoleUser, Text: "a message of a few words", TS: int64(1000 + i)}
			if _, _, err := tx.AppendEvent(&core.Event{Type: core.EvMessage, Lane: lane, TS: int64(1000 + i), Message: m}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var table int
	if err := s.w.QueryRow(`SELECT COUNT(*) FROM dbstat WHERE name = 'outbox'`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	if table < 50 {
		t.Fatalf("the outbox is %d pages: too few for the test to tell", table)
	}
	for _, c := range []struct {
		what        string
		keep, minTS int64
		want        int64 // the cut
	}{
		{"nothing due", frames, 0, 0},
		{"by count", frames - 10, 0, 10},
		{"by age", frames, 1010, 10},
	} {
		var cut sql.NullInt64
		if err := s.w.QueryRow(pruneCut, c.keep, c.minTS).Scan(&cut); err != nil {
			t.Fatal(err)
		}
		if cut.Int64 != c.want {
			t.Errorf("%s: cut %d, want %d", c.what, cut.Int64, c.want)
		}
		if n := pagesRead(t, s, pruneCut, c.keep, c.minTS); n > 12 {
			t.Errorf("%s: the cut read %d pages of an outbox of %d", c.what, n, table)
		}
	}
}

// Waking devices reads only the devices with a push registration
// (devices_push), not every device row, at every event that wakes one.
func TestPushDevicesReadsNoWholeTable(t *testing.T) {
	s := open(t)
	used := false
	for _, detail := range plan(t, s.r, pushDevices) {
		if strings.HasPrefix(detail, "SCAN devices") && !strings.Contains(detail, "devices_push") {
			t.Errorf("PushDevices plans %q", detail)
		}
		used = used || strings.Contains(detail, "devices_push")
	}
	if !used {
		t.Error("PushDevices does not use devices_push")
	}
}
