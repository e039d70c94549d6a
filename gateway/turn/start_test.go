package turn_test

import (
	"context"
	"errors"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/commit"
	"github.com/irisgate/irisgate/internal/sqlitetest"
	"github.com/irisgate/irisgate/store"
)

// failStart fails the write of a reply's streaming row, as a database
// that went away for a moment would; every other write goes through.
type failStart struct{ st *store.Store }

func (f failStart) Write(ctx context.Context, fn func(store.Tx) error) error {
	return f.st.Write(ctx, func(tx store.Tx) error { return fn(startFails{tx}) })
}

type startFails struct{ store.Tx }

func (s startFails) InsertMessage(m core.Message, streaming bool) error {
	if streaming {
		return errors.New("connection lost")
	}
	return s.Tx.InsertMessage(m, streaming)
}

func (s startFails) Savepoint(fn func(store.Tx) error) error {
	return s.Tx.Savepoint(func(tx store.Tx) error { return fn(startFails{tx}) })
}

// A reply whose streaming row could not be stored is not lost: the devices
// watched it stream, and its end stores it whole.
func TestReplyWhoseRowFailedIsSavedWhole(t *testing.T) {
	rg := newRigOn(t, &agent.Echo{}, func(cs commit.Store) commit.Store { return failStart{cs.(*store.Store)} })
	d := rg.join("phone")
	rg.send("still here", d)
	start := d.next(is(core.EvMessageStart))
	stop := d.next(is(core.EvMessageStop))
	if stop.Message.ID != start.StreamID || stop.Message.Text != "still here" {
		t.Fatalf("message.stop %+v, want %s \"still here\"", stop.Message, start.StreamID)
	}
	m, err := rg.st.Message(context.Background(), start.StreamID)
	if err != nil || m.Text != "still here" || m.Role != core.RoleAssistant {
		t.Fatalf("stored reply %+v (%v), want the assistant's \"still here\"", m, err)
	}
	d.next(is(core.EvAgentIdle))
	if q := rg.owed(); len(q) != 0 {
		t.Fatalf("turns still owed: %+v", q)
	}
}

// A reply that streams text and then a file waits for its row twice (the
// file's offer, then the end): both get the row's outcome.
func TestReplyWithTextThenAFileEnds(t *testing.T) {
	a := &script{fn: func(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
		emit(agent.Event{Kind: agent.Text, Text: "here is the chart"})
		emit(agent.Event{Kind: agent.File, Path: "/nonexistent/chart.png"})
		return nil
	}}
	rg := newRig(t, a)
	d := rg.join("phone")
	rg.send("chart please", d)
	if stop := d.next(is(core.EvMessageStop)); stop.Message.Text != "here is the chart" {
		t.Fatalf("message.stop %+v", stop.Message)
	}
}

// A reply's message.start and its first update reach the devices while
// the database is still busy with an earlier writer: they do not wait
// for the reply's row to be committed (issue 17: first token → device).
// The row is committed behind them, and the reply ends saved whole.
func TestReplyStreamsBeforeItsRowIsCommitted(t *testing.T) {
	first, rest := make(chan struct{}), make(chan struct{})
	a := &script{fn: func(ctx context.Context, t agent.Turn, emit func(agent.Event)) error {
		<-first
		emit(agent.Event{Kind: agent.Text, Text: "hello"})
		<-rest
		emit(agent.Event{Kind: agent.Text, Text: " world"})
		return nil
	}}
	rg := newRig(t, a)
	d := rg.join("phone")
	rg.send("hi", d)
	d.next(is(core.EvAgentBusy))

	release := holdSQLite(t, rg)
	close(first)
	start := d.next(is(core.EvMessageStart))
	if up := d.next(is(core.EvMessageUpdate)); up.Text != "hello" || up.StreamID != start.StreamID {
		t.Fatalf("first update %q of stream %s, want \"hello\" of %s", up.Text, up.StreamID, start.StreamID)
	}
	release()
	close(rest)
	stop := d.next(is(core.EvMessageStop))
	if stop.Message.ID != start.StreamID || stop.Message.Text != "hello world" || stop.Message.Stopped {
		t.Fatalf("message.stop %+v, want %s \"hello world\" finished", stop.Message, start.StreamID)
	}
	m, err := rg.st.Message(context.Background(), start.StreamID)
	if err != nil || m.Text != "hello world" {
		t.Fatalf("stored reply %q (%v), want \"hello world\"", m.Text, err)
	}
}

// holdSQLite takes SQLite's write lock on the rig's database, as another
// writer would; release lets the commit log go on.
func holdSQLite(t *testing.T, rg *rig) (release func()) {
	return sqlitetest.HoldWriteLock(t, rg.path)
}
