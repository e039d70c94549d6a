package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

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

var idle = &core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: "default"}, TS: 100}

func TestOutboxCursorNeverReused(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	c1 := appendEvent(t, s, msgEvent(core.Lane{ChatID: "default"}, "m1"))
	c2 := appendEvent(t, s, msgEvent(core.Lane{ChatID: "default"}, "m2"))
	if err := s.Write(ctx, func(tx Tx) error { return tx.DeleteMessages(core.Lane{ChatID: "default"}, []string{"m2"}) }); err != nil {
		t.Fatal(err)
	}
	c3 := appendEvent(t, s, msgEvent(core.Lane{ChatID: "default"}, "m3"))
	if !(c1 < c2 && c2 < c3) {
		t.Fatalf("cursors %d %d %d: the deleted tail's cursor was reused", c1, c2, c3)
	}
	head, err := s.OutboxHead(ctx)
	if err != nil || head != c3 {
		t.Fatalf("head = %d, %v; want %d", head, err, c3)
	}
	var seen []int64
	s.ScanOutbox(ctx, 0, head, func(r OutboxRow) error { seen = append(seen, r.Cursor); return nil })
	if fmt.Sprint(seen) != fmt.Sprint([]int64{c1, c3}) {
		t.Fatalf("scan = %v", seen)
	}
}

func TestScanOutboxPages(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	s.Write(ctx, func(tx Tx) error {
		for i := 0; i < 2500; i++ {
			if _, _, err := tx.AppendEvent(idle); err != nil {
				return err
			}
		}
		return nil
	})
	n, last := 0, int64(0)
	err := s.ScanOutbox(ctx, 10, 2400, func(r OutboxRow) error {
		if r.Cursor <= last {
			t.Fatalf("out of order: %d after %d", r.Cursor, last)
		}
		last = r.Cursor
		n++
		return nil
	})
	if err != nil || n != 2390 || last != 2400 {
		t.Fatalf("scanned %d up to %d, %v", n, last, err)
	}
}

func TestPruneSetsFloor(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		appendEvent(t, s, idle)
	}
	n, err := s.PruneOutbox(ctx, 3, 0)
	if err != nil || n != 7 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	floor, _ := s.OutboxFloor(ctx)
	if floor != 7 {
		t.Fatalf("floor = %d", floor)
	}
	// Age-based: everything older than ts 200 goes.
	n, _ = s.PruneOutbox(ctx, 1000, 200)
	if n != 3 {
		t.Fatalf("age prune removed %d", n)
	}
	if head, _ := s.OutboxHead(ctx); head != 10 {
		t.Fatalf("head after prune = %d", head)
	}
}

func TestHistoryPaging(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lane := core.Lane{ChatID: "default"}
	s.Write(ctx, func(tx Tx) error {
		for i := 0; i < 7; i++ {
			if err := tx.InsertMessage(core.Message{ID: fmt.Sprintf("m%d", i), Lane: lane, Role: "user", Text: "x", TS: int64(i)}, false); err != nil {
				return err
			}
		}
		return tx.InsertMessage(core.Message{ID: "other", Lane: core.Lane{ChatID: "default", ThreadID: "t1"}, Role: "user"}, false)
	})
	page, more, err := s.History(ctx, lane, "", 3)
	if err != nil || !more || len(page) != 3 || page[0].ID != "m4" || page[2].ID != "m6" {
		t.Fatalf("newest page = %v %v %v", ids(page), more, err)
	}
	page, more, _ = s.History(ctx, lane, "m4", 3)
	if !more || ids(page) != "m1 m2 m3" {
		t.Fatalf("second page = %s %v", ids(page), more)
	}
	page, more, _ = s.History(ctx, lane, "m1", 3)
	if more || ids(page) != "m0" {
		t.Fatalf("last page = %s %v", ids(page), more)
	}
	if _, _, err := s.History(ctx, lane, "other", 3); err != ErrNotFound {
		t.Fatalf("a message of another lane as cursor: %v", err)
	}
}

func ids(ms []core.Message) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += " "
		}
		s += m.ID
	}
	return s
}

func TestDeleteChannelTakesThreadsAndFrames(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	ch := core.Channel{ChatID: "chan_1", Name: "c", Kind: core.KindChannel}
	th := core.Channel{ChatID: "t_1", Name: "t", Kind: core.KindThread, ParentChatID: "chan_1"}
	s.Write(ctx, func(tx Tx) error {
		tx.PutChannel(ch)
		tx.PutChannel(th)
		tx.InsertMessage(core.Message{ID: "m1", Lane: core.Lane{ChatID: "chan_1", ThreadID: "t_1"}, Role: "user"}, false)
		tx.AppendEvent(msgEvent(core.Lane{ChatID: "chan_1", ThreadID: "t_1"}, "m1"))
		tx.AppendEvent(&core.Event{Type: core.EvChannelCreated, Channel: &th})
		tx.AppendEvent(msgEvent(core.Lane{ChatID: "default"}, "keep"))
		return nil
	})
	var gone []core.Channel
	if err := s.Write(ctx, func(tx Tx) error {
		var err error
		gone, err = tx.DeleteChannel("chan_1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(gone) != 2 {
		t.Fatalf("deleted %d entries", len(gone))
	}
	if _, err := s.Channel(ctx, "t_1"); err != ErrNotFound {
		t.Fatalf("thread survives: %v", err)
	}
	if _, err := s.Message(ctx, "m1"); err != ErrNotFound {
		t.Fatalf("message survives: %v", err)
	}
	var left []string
	s.ScanOutbox(ctx, 0, 100, func(r OutboxRow) error { left = append(left, r.MessageID); return nil })
	if fmt.Sprint(left) != "[keep]" {
		t.Fatalf("outbox left = %v", left)
	}
}

func TestStreamingRecovery(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	m := core.Message{ID: "m1", Lane: core.Lane{ChatID: "default"}, Role: "assistant", TS: 1}
	s.Write(ctx, func(tx Tx) error { return tx.InsertMessage(m, true) })
	s.Write(ctx, func(tx Tx) error { return tx.SaveProgress("m1", "partial", "") })
	ms, err := s.Streaming(ctx)
	if err != nil || len(ms) != 1 || ms[0].Text != "partial" {
		t.Fatalf("streaming = %+v, %v", ms, err)
	}
	m.Text, m.Stopped = "partial", true
	if err := s.Write(ctx, func(tx Tx) error { return tx.FinishMessage(m) }); err != nil {
		t.Fatal(err)
	}
	if ms, _ := s.Streaming(ctx); len(ms) != 0 {
		t.Fatalf("still streaming after finish")
	}
	got, _ := s.Message(ctx, "m1")
	if !got.Stopped || got.Text != "partial" {
		t.Fatalf("finished = %+v", got)
	}
}

// The scheduler fires a job only if nobody paused or rescheduled it since
// it was read, and the writers of jobs touch only their own columns.
func TestCronWritersKeepEachOthersChanges(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_800_000_000_000)
	j := CronJob{ID: "cron_1", Name: "daily", Schedule: "every 1h", Prompt: "sum up", ChatID: "default", Enabled: true, NextRun: t0, Created: t0}
	if err := s.PutCronJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseCronJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.FireCronJob(ctx, j.ID, t0, t0, t0.Add(time.Hour), true); ok || err != nil {
		t.Fatalf("fired a paused job: %v, %v", ok, err)
	}
	t1 := t0.Add(2 * time.Hour)
	if err := s.SetCronState(ctx, j.ID, true, t1); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.FireCronJob(ctx, j.ID, t0, t0, t0.Add(time.Hour), true); ok {
		t.Fatal("fired a job rescheduled since it was read")
	}
	if ok, err := s.FireCronJob(ctx, j.ID, t1, t1, t1.Add(time.Hour), true); !ok || err != nil {
		t.Fatalf("a due job did not fire: %v, %v", ok, err)
	}
	if err := s.SetCronErr(ctx, j.ID, "model down"); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseCronJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := s.CronJob(ctx, j.ID)
	if got.Name != "daily" || got.Prompt != "sum up" || got.Enabled || !got.LastRun.Equal(t1) || !got.NextRun.Equal(t1.Add(time.Hour)) || got.LastErr != "model down" {
		t.Fatalf("job after the writers: %+v", got)
	}
	if err := s.PauseCronJob(ctx, "cron_none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pausing an unknown job: %v", err)
	}
}
