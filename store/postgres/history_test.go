package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

func ids(ms []core.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return strings.Join(out, " ")
}

func TestHistoryPaging(t *testing.T) {
	s := open(t)
	lane := core.Lane{ChatID: core.DefaultChatID}
	write(t, s, func(tx store.Tx) error {
		for i := range 7 {
			if err := tx.InsertMessage(core.Message{ID: fmt.Sprintf("m%d", i), Lane: lane, Role: "user", Text: "x", TS: int64(i)}, false); err != nil {
				return err
			}
		}
		return tx.InsertMessage(core.Message{ID: "other", Lane: core.Lane{ChatID: core.DefaultChatID, ThreadID: "t1"}, Role: "user"}, false)
	})
	page, more, err := s.History(bg, lane, "", 3)
	if err != nil || !more || ids(page) != "m4 m5 m6" {
		t.Fatalf("newest page = %s %v %v", ids(page), more, err)
	}
	if page, more, _ = s.History(bg, lane, "m4", 3); !more || ids(page) != "m1 m2 m3" {
		t.Fatalf("second page = %s %v", ids(page), more)
	}
	if page, more, _ = s.History(bg, lane, "m1", 3); more || ids(page) != "m0" {
		t.Fatalf("last page = %s %v", ids(page), more)
	}
	if _, _, err := s.History(bg, lane, "other", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a message of another lane as cursor: %v", err)
	}
}

func TestDeleteChannelTakesThreadsAndFrames(t *testing.T) {
	s := open(t)
	ch := core.Channel{ChatID: "chan_1", Name: "c", Kind: core.KindChannel, Icon: "aWNvbg==", Color: "#fff", Favorite: true}
	th := core.Channel{ChatID: "t_1", Name: "t", Kind: core.KindThread, ParentChatID: "chan_1"}
	inThread := core.Lane{ChatID: "chan_1", ThreadID: "t_1"}
	write(t, s, func(tx store.Tx) error {
		for _, f := range []func() error{
			func() error { return tx.PutChannel(ch) },
			func() error { return tx.PutChannel(th) },
			func() error { return tx.InsertMessage(core.Message{ID: "m1", Lane: inThread, Role: "user"}, false) },
			func() error { return tx.MarkRead(inThread, "m1", "phone", 5) },
			func() error { return tx.QueueTurn(inThread, "m1") },
			func() error { _, _, err := tx.AppendEvent(msgEvent(inThread, "m1")); return err },
			func() error {
				_, _, err := tx.AppendEvent(&core.Event{Type: core.EvChannelCreated, Channel: &th})
				return err
			},
			func() error {
				_, _, err := tx.AppendEvent(msgEvent(core.Lane{ChatID: core.DefaultChatID}, "keep"))
				return err
			},
		} {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	if got, err := s.Channel(bg, "chan_1"); err != nil || got != ch {
		t.Fatalf("channel %+v, %v", got, err)
	}
	if cs, err := s.Channels(bg); err != nil || len(cs) != 3 || cs[0].ChatID != "chan_1" {
		t.Fatalf("directory %+v, %v (favourites first)", cs, err)
	}
	var icons int64
	write(t, s, func(tx store.Tx) error {
		var err error
		icons, err = tx.IconBytes("nothing")
		return err
	})
	if icons != int64(len(ch.Icon)) {
		t.Fatalf("icon bytes %d", icons)
	}
	var gone []core.Channel
	write(t, s, func(tx store.Tx) error {
		var err error
		gone, err = tx.DeleteChannel("chan_1")
		return err
	})
	if len(gone) != 2 {
		t.Fatalf("deleted %d entries", len(gone))
	}
	if _, err := s.Channel(bg, "t_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("thread survives: %v", err)
	}
	if _, err := s.Message(bg, "m1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("message survives: %v", err)
	}
	if n := residue(t, s, "m1"); n != "" {
		t.Fatalf("rows left naming m1: %s", n)
	}
	var left []string
	s.ScanOutbox(bg, 0, 100, func(r store.OutboxRow) error { left = append(left, r.MessageID); return nil })
	if fmt.Sprint(left) != "[keep]" {
		t.Fatalf("outbox left = %v", left)
	}
}

// residue lists the tables that still have rows naming a message.
func residue(t *testing.T, s *Store, id string) string {
	t.Helper()
	var out []string
	for _, table := range []string{"messages WHERE id", "reads WHERE message_id", "outbox WHERE message_id", "conversation WHERE message_id", "turns WHERE message_id", "media WHERE message_id"} {
		var n int
		if err := s.pool.QueryRow(bg, `SELECT count(*) FROM `+table+` = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s: %d", strings.Fields(table)[0], n))
		}
	}
	return strings.Join(out, ", ")
}

// A device may delete only in the lane it names: ids of another lane stay.
func TestDeleteMessagesStaysInItsLane(t *testing.T) {
	s := open(t)
	a, b := core.Lane{ChatID: core.DefaultChatID}, core.Lane{ChatID: "chan_b"}
	write(t, s, func(tx store.Tx) error {
		for _, m := range []core.Message{{ID: "a1", Lane: a, Role: "user"}, {ID: "b1", Lane: b, Role: "user"}} {
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
			if _, _, err := tx.AppendEvent(msgEvent(m.Lane, m.ID)); err != nil {
				return err
			}
			if err := tx.MarkRead(m.Lane, m.ID, "phone", 1); err != nil {
				return err
			}
		}
		return nil
	})
	write(t, s, func(tx store.Tx) error { return tx.DeleteMessages(a, []string{"a1", "b1"}) })
	if _, err := s.Message(bg, "b1"); err != nil {
		t.Fatalf("another lane's message went: %v", err)
	}
	if r := residue(t, s, "a1"); r != "" {
		t.Fatalf("left of a1: %q", r)
	}
	if r := residue(t, s, "b1"); r != "messages: 1, reads: 1, outbox: 1" {
		t.Fatalf("left of b1: %q", r)
	}
}

func TestStreamingRecovery(t *testing.T) {
	s := open(t)
	m := core.Message{ID: "m1", Lane: core.Lane{ChatID: core.DefaultChatID}, Role: "assistant", TS: 1}
	write(t, s, func(tx store.Tx) error { return tx.InsertMessage(m, true) })
	write(t, s, func(tx store.Tx) error { return tx.SaveProgress("m1", "partial", "thinking") })
	ms, err := s.Streaming(bg)
	if err != nil || len(ms) != 1 || ms[0].Text != "partial" || ms[0].Reasoning != "thinking" {
		t.Fatalf("streaming = %+v, %v", ms, err)
	}
	m.Text, m.Stopped = "partial", true
	write(t, s, func(tx store.Tx) error { return tx.FinishMessage(m) })
	if ms, _ := s.Streaming(bg); len(ms) != 0 {
		t.Fatalf("still streaming after finish")
	}
	// Progress saved late (the committer is behind) does not touch a
	// finished reply.
	write(t, s, func(tx store.Tx) error { return tx.SaveProgress("m1", "late", "") })
	got, _ := s.Message(bg, "m1")
	if !got.Stopped || got.Text != "partial" {
		t.Fatalf("finished = %+v", got)
	}
	if err := s.Write(bg, func(tx store.Tx) error { return tx.FinishMessage(core.Message{ID: "gone"}) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finishing a deleted reply: %v", err)
	}
}

func TestSetDefaultMovesTheFlag(t *testing.T) {
	s := open(t)
	var lost []string
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: "chan_2", Name: "two", Kind: core.KindChannel}); err != nil {
			return err
		}
		var err error
		lost, err = tx.SetDefault("chan_2")
		return err
	})
	if fmt.Sprint(lost) != "[default]" {
		t.Fatalf("moved from %v", lost)
	}
	cs, _ := s.Channels(bg)
	for _, c := range cs {
		if c.IsDefault != (c.ChatID == "chan_2") {
			t.Fatalf("after the move: %+v", cs)
		}
	}
}

// Two schedulers (two replicas) race to fire the same run: one wins.
func TestCronRunFiresOnceAcrossReplicas(t *testing.T) {
	a := open(t)
	b, err := Open(bg, a.pool.Config().ConnString(), WithLog(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t0 := time.UnixMilli(1_800_000_000_000)
	for i := range 20 {
		id := fmt.Sprint("cron_", i)
		if err := a.PutCronJob(bg, store.CronJob{ID: id, Schedule: "every 1h", Prompt: "p", ChatID: "default", Enabled: true, NextRun: t0, Created: t0}); err != nil {
			t.Fatal(err)
		}
		wins := make(chan bool, 2)
		for _, s := range []*Store{a, b} {
			go func() {
				ok, err := s.FireCronJob(bg, id, t0, t0, t0.Add(time.Hour), true)
				if err != nil {
					t.Error(err)
				}
				wins <- ok
			}()
		}
		if w1, w2 := <-wins, <-wins; w1 == w2 {
			t.Fatalf("job %d: fired by both or neither (%v, %v)", i, w1, w2)
		}
	}
}

// ChannelCount counts channels and threads, the default one included,
// and sees the transaction's own writes.
func TestChannelCount(t *testing.T) {
	s := open(t)
	write(t, s, func(tx store.Tx) error {
		if n, err := tx.ChannelCount(); err != nil || n != 1 {
			t.Errorf("a new store: %d, %v", n, err)
		}
		if err := tx.PutChannel(core.Channel{ChatID: "chan_1", Name: "one", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "t_1", Name: "t", Kind: core.KindThread, ParentChatID: "chan_1"}); err != nil {
			return err
		}
		if n, err := tx.ChannelCount(); err != nil || n != 3 {
			t.Errorf("with a channel and a thread: %d, %v", n, err)
		}
		return nil
	})
}
