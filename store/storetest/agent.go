package storetest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/fill"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

var agentTests = []test{
	{"ConversationRoundTripAndTruncate", testConversation},
	{"LaneSettingsRoundTrip", testLaneSettings},
	{"TurnsQueue", testTurns},
	{"Approvals", testApprovals},
}

// A lane's conversation comes back in order, every field of an entry
// kept; /undo cuts it at a message (that entry and all later ones), /new
// clears it; lanes never see each other's.
func testConversation(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID, ThreadID: "t_c"}
	other := core.Lane{ChatID: core.DefaultChatID}
	var full record.ConversationEntry
	if err := fill.Fill(&full); err != nil {
		t.Fatal(err)
	}
	full.V = record.Version
	entries := []record.ConversationEntry{
		{V: record.Version, Role: "user", Content: "one", MessageID: "m1"},
		full,
		{V: record.Version, Role: "user", Content: "two", MessageID: "m2"},
		{V: record.Version, Role: "assistant", Content: "reply to two"},
	}
	write(t, s, func(tx store.Tx) error {
		for _, e := range entries {
			if err := tx.AppendConversation(lane, e.MessageID, e); err != nil {
				return err
			}
		}
		return tx.AppendConversation(other, "", record.ConversationEntry{Role: "user", Content: "elsewhere"})
	})
	got, err := s.Conversation(bg, lane)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("conversation\n got %+v, %v\nwant %+v", got, err, entries)
	}
	if n, err := s.ConversationLen(bg, lane); err != nil || n != 4 {
		t.Fatalf("length %d, %v", n, err)
	}
	write(t, s, func(tx store.Tx) error { return tx.TruncateConversation(lane, "m2") })
	if got, _ := s.Conversation(bg, lane); !reflect.DeepEqual(got, entries[:2]) {
		t.Fatalf("cut at m2: %+v", got)
	}
	write(t, s, func(tx store.Tx) error { return tx.TruncateConversation(lane, "m_none") })
	if n, _ := s.ConversationLen(bg, lane); n != 2 {
		t.Fatalf("cut at an unknown message: %d entries left, want 2", n)
	}
	write(t, s, func(tx store.Tx) error { return tx.ClearConversation(lane) })
	if got, err := s.Conversation(bg, lane); err != nil || len(got) != 0 {
		t.Fatalf("after /new: %+v, %v", got, err)
	}
	if got, _ := s.Conversation(bg, other); len(got) != 1 || got[0].Content != "elsewhere" {
		t.Fatalf("another lane's: %+v", got)
	}
}

func testLaneSettings(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID, ThreadID: "t_s"}
	if ls, err := s.LaneSettings(bg, lane); err != nil || !reflect.DeepEqual(ls, record.LaneSettings{V: record.Version}) {
		t.Fatalf("a lane without settings: %+v, %v", ls, err)
	}
	var full record.LaneSettings
	if err := fill.Fill(&full); err != nil {
		t.Fatal(err)
	}
	full.V = record.Version
	write(t, s, func(tx store.Tx) error { return tx.SetLaneSettings(lane, full) })
	if ls, err := s.LaneSettings(bg, lane); err != nil || !reflect.DeepEqual(ls, full) {
		t.Fatalf("settings\n got %+v, %v\nwant %+v", ls, err, full)
	}
	changed := record.LaneSettings{V: record.Version, Model: "other"}
	write(t, s, func(tx store.Tx) error { return tx.SetLaneSettings(lane, changed) })
	if ls, _ := s.LaneSettings(bg, lane); !reflect.DeepEqual(ls, changed) {
		t.Fatalf("replaced: %+v", ls)
	}
	if ls, _ := s.LaneSettings(bg, core.Lane{ChatID: core.DefaultChatID}); ls.Model != "" {
		t.Fatalf("the channel took its thread's settings: %+v", ls)
	}
	// A store may answer from memory (SQLite's settingscache.go): what a
	// rolled-back write set is not what it answers, nor what a caller
	// changed in a value it was given.
	failed := errors.New("rolled back")
	if err := s.Write(bg, func(tx store.Tx) error {
		if err := tx.SetLaneSettings(lane, record.LaneSettings{V: record.Version, Model: "never"}); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("a failing write: %v", err)
	}
	if ls, _ := s.LaneSettings(bg, lane); !reflect.DeepEqual(ls, changed) {
		t.Fatalf("after a rolled-back change: %+v", ls)
	}
	on := true
	write(t, s, func(tx store.Tx) error {
		return tx.SetLaneSettings(lane, record.LaneSettings{V: record.Version, ShowReasoning: &on})
	})
	ls, _ := s.LaneSettings(bg, lane)
	*ls.ShowReasoning = false
	if ls, _ := s.LaneSettings(bg, lane); ls.ShowReasoning == nil || !*ls.ShowReasoning {
		t.Fatalf("a caller's change reached the store: %+v", ls)
	}
	// A deleted channel's settings go with it, its threads' too.
	ch := core.Channel{ChatID: "chan_settings", Name: "S", Kind: core.KindChannel}
	inCh := core.Lane{ChatID: ch.ChatID}
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(ch); err != nil {
			return err
		}
		return tx.SetLaneSettings(inCh, changed)
	})
	if ls, _ := s.LaneSettings(bg, inCh); ls.Model != changed.Model {
		t.Fatalf("a channel's settings: %+v", ls)
	}
	write(t, s, func(tx store.Tx) error { _, err := tx.DeleteChannel(ch.ChatID); return err })
	if ls, _ := s.LaneSettings(bg, inCh); ls.Model != "" {
		t.Fatalf("a deleted channel's settings: %+v", ls)
	}
}

// Turns owed survive in order; a start marks one running, an end forgets
// it. A cron turn that never started is the scheduler's to settle
// (OwedCronRuns), one that was running is the gateway's (Turns).
func testTurns(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	cronQueued, cronRunning := store.CronTurnID("cron_a"), store.CronTurnID("cron_b")
	write(t, s, func(tx store.Tx) error {
		for _, id := range []string{"m1", cronQueued, "m2", cronRunning, "m3"} {
			if err := tx.QueueTurn(lane, id); err != nil {
				return err
			}
		}
		if err := tx.QueueTurn(lane, "m1"); err != nil { // queued twice: one turn
			return err
		}
		if err := tx.StartTurn("m1", "m_r1"); err != nil {
			return err
		}
		if err := tx.StartTurn(cronRunning, ""); err != nil {
			return err
		}
		return tx.EndTurn("m3")
	})
	ts, err := s.Turns(bg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range ts {
		got = append(got, q.MessageID+map[bool]string{true: "(running " + q.ReplyID + ")"}[q.Running]+"@"+q.Lane.ChatID+"/"+q.CronJob)
	}
	// A running turn keeps the id its reply streams under; a cron turn
	// streams none.
	if want := "m1(running m_r1)@default/ m2@default/ " + cronRunning + "(running )@default/cron_b"; strings.Join(got, " ") != want {
		t.Fatalf("turns %v, want %s", got, want)
	}
	owed, err := s.OwedCronRuns(bg)
	if err != nil || len(owed) != 1 || owed[0].MessageID != cronQueued || owed[0].CronJob != "cron_a" || owed[0].Running {
		t.Fatalf("owed cron runs %+v, %v", owed, err)
	}
	if err := s.ForgetTurn(bg, cronQueued); err != nil {
		t.Fatal(err)
	}
	if owed, _ := s.OwedCronRuns(bg); len(owed) != 0 {
		t.Fatalf("forgotten but owed: %+v", owed)
	}
}

func testApprovals(t *testing.T, s Store) {
	if ok, err := s.Approved(bg, "rm -rf /tmp/x"); ok || err != nil {
		t.Fatalf("approved before asking: %v, %v", ok, err)
	}
	for range 2 { // approving twice is no error
		if err := s.Approve(bg, "rm -rf /tmp/x"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Approved(bg, "rm -rf /tmp/x"); !ok || err != nil {
		t.Fatalf("not approved after approving: %v, %v", ok, err)
	}
	if ok, _ := s.Approved(bg, "rm -rf /tmp"); ok {
		t.Fatal("a prefix of an approved command is approved")
	}
}
