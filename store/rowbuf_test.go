package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

// The inserts a transaction holds back (rowbuf.go) must look, to
// everything that runs after them, as if each had run at its call.

func openRowbuf(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "b.db"), withIndexDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func userMessage(id string, ts int64) core.Message {
	return core.Message{ID: id, Lane: core.Lane{ChatID: core.DefaultChatID}, Role: core.RoleUser, Text: "text of " + id, TS: ts}
}

// Rows of every chunk size go in, in the order they were made, and each
// outbox row under the cursor AppendEvent returned for it.
func TestHeldBackRowsGoInInOrder(t *testing.T) {
	s := openRowbuf(t)
	ctx := context.Background()
	const n = 64 + 16 + 4 + 3 // every chunk size, and more than one of the smallest
	cursors := make([]int64, n)
	if err := s.Write(ctx, func(tx Tx) error {
		for i := range n {
			m := userMessage(fmt.Sprintf("m_%03d", i), int64(i+1))
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
			if err := tx.QueueTurn(m.Lane, m.ID); err != nil {
				return err
			}
			c, _, err := tx.AppendEvent(&core.Event{Type: core.EvMessage, Lane: m.Lane, TS: m.TS, Message: &m})
			if err != nil {
				return err
			}
			cursors[i] = c
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []OutboxRow
	if err := s.ScanOutbox(ctx, 0, 1<<62, func(r OutboxRow) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d outbox rows, want %d", len(got), n)
	}
	for i, r := range got {
		if want := fmt.Sprintf("m_%03d", i); r.MessageID != want || r.Cursor != cursors[i] || (i > 0 && r.Cursor != got[i-1].Cursor+1) {
			t.Fatalf("row %d: cursor %d message %s; want cursor %d message %s, one past the last", i, r.Cursor, r.MessageID, cursors[i], want)
		}
	}
	h, _, err := s.History(ctx, core.Lane{ChatID: core.DefaultChatID}, "", n)
	if err != nil || len(h) != n || h[0].ID != "m_000" || h[n-1].ID != fmt.Sprintf("m_%03d", n-1) {
		t.Fatalf("history of %d, %v: want %d in order", len(h), err, n)
	}
	turns, err := s.Turns(ctx)
	if err != nil || len(turns) != n {
		t.Fatalf("%d turns owed, %v; want %d", len(turns), err, n)
	}
}

// A statement run after a held-back insert sees its row.
func TestAStatementSeesTheRowsBeforeIt(t *testing.T) {
	s := openRowbuf(t)
	var count int
	if err := s.write(context.Background(), func(tx *sqliteTx) error {
		if err := tx.InsertMessage(userMessage("m_1", 1), false); err != nil {
			return err
		}
		return tx.queryRow(`SELECT COUNT(*) FROM messages WHERE id = 'm_1'`).Scan(&count)
	}); err != nil || count != 1 {
		t.Fatalf("count %d, %v: the read must see the insert before it", count, err)
	}
}

// An insert that fails when the rows go in fails the transaction: nothing
// of it is committed, and the outbox's head does not move.
func TestALateFailureFailsTheTransaction(t *testing.T) {
	s := openRowbuf(t)
	ctx := context.Background()
	if err := s.Write(ctx, func(tx Tx) error { return tx.InsertMessage(userMessage("m_1", 1), false) }); err != nil {
		t.Fatal(err)
	}
	err := s.Write(ctx, func(tx Tx) error {
		if _, _, err := tx.AppendEvent(&core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: core.DefaultChatID}}); err != nil {
			return err
		}
		return tx.InsertMessage(userMessage("m_1", 2), false) // its error comes at the end
	})
	if err == nil {
		t.Fatal("a second message m_1 was stored")
	}
	if head, err := s.OutboxHead(ctx); err != nil || head != 0 {
		t.Fatalf("outbox head %d, %v: the failed transaction's frame must not stay", head, err)
	}
}

// A savepoint whose insert fails takes its rows and their cursors with it;
// the writes before and after it land, their cursors without a gap.
func TestASavepointTakesItsHeldBackRows(t *testing.T) {
	s := openRowbuf(t)
	ctx := context.Background()
	if err := s.Write(ctx, func(tx Tx) error { return tx.InsertMessage(userMessage("m_dup", 1), false) }); err != nil {
		t.Fatal(err)
	}
	lane := core.Lane{ChatID: core.DefaultChatID}
	var before, after int64
	var spErr error
	if err := s.Write(ctx, func(tx Tx) error {
		var err error
		if before, _, err = tx.AppendEvent(&core.Event{Type: core.EvAgentBusy, Lane: lane}); err != nil {
			return err
		}
		spErr = tx.Savepoint(func(tx Tx) error {
			if _, _, err := tx.AppendEvent(&core.Event{Type: core.EvAgentIdle, Lane: lane}); err != nil {
				return err
			}
			if err := tx.InsertMessage(userMessage("m_new", 2), false); err != nil {
				return err
			}
			return tx.InsertMessage(userMessage("m_dup", 3), false)
		})
		after, _, err = tx.AppendEvent(&core.Event{Type: core.EvAgentIdle, Lane: lane})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if spErr == nil {
		t.Fatal("the savepoint's duplicate message was stored")
	}
	if after != before+1 {
		t.Fatalf("cursors %d then %d: the undone frame must leave no gap", before, after)
	}
	if _, err := s.Message(ctx, "m_new"); err != ErrNotFound {
		t.Fatalf("m_new: %v; the failed savepoint's rows must go with it", err)
	}
	if head, err := s.OutboxHead(ctx); err != nil || head != after {
		t.Fatalf("outbox head %d, %v; want %d", head, err, after)
	}
}

// The inserts do wait: three sends' rows are held until a statement
// needs the tables, then go in together.
func TestInsertsWaitForTheNextStatement(t *testing.T) {
	s := openRowbuf(t)
	if err := s.write(context.Background(), func(tx *sqliteTx) error {
		for i := range 3 {
			m := userMessage(fmt.Sprintf("m_%d", i), int64(i+1))
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
			if err := tx.QueueTurn(m.Lane, m.ID); err != nil {
				return err
			}
		}
		if tx.rows.n != 6 {
			t.Errorf("%d rows held back, want 6", tx.rows.n)
		}
		var n int
		if err := tx.queryRow(`SELECT COUNT(*) FROM messages`).Scan(&n); err != nil || n != 3 || tx.rows.n != 0 {
			t.Errorf("%d messages seen, %d rows still held (%v): the read must put them in first", n, tx.rows.n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
