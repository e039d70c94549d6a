package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/fill"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

var historyTests = []test{
	{"ChannelsRoundTrip", testChannels},
	{"MessagesRoundTrip", testMessagesRoundTrip},
	{"HistoryPaging", testHistoryPaging},
	{"StreamingRecovery", testStreamingRecovery},
	{"DeleteMessageCascades", testDeleteMessageCascades},
	{"DeleteChannelCascades", testDeleteChannelCascades},
}

// residue fails the test when a row of any table still names id.
func residue(t *testing.T, s Store, id string) {
	t.Helper()
	r, ok := s.(Residue)
	if !ok {
		t.Logf("the store's harness has no Residue: rows no method reads back (read receipts) are not checked")
		return
	}
	left, err := r.Residue(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	for table, n := range left {
		if n != 0 {
			t.Errorf("%d rows of %s still name %s", n, table, id)
		}
	}
}

func testChannels(t *testing.T, s Store) {
	chs, err := s.Channels(bg)
	if err != nil || len(chs) != 1 || chs[0].ChatID != core.DefaultChatID || !chs[0].IsDefault {
		t.Fatalf("a new store's directory: %+v, %v; want the default channel alone", chs, err)
	}
	var full core.Channel
	if err := fill.Fill(&full); err != nil {
		t.Fatal(err)
	}
	full.Kind, full.IsDefault = core.KindChannel, false
	th := core.Channel{ChatID: "t_1", Name: "T", Kind: core.KindThread, ParentChatID: full.ChatID, Icon: "aWNvbg=="}
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(full); err != nil {
			return err
		}
		if err := tx.PutChannel(th); err != nil {
			return err
		}
		got, err := tx.Channel(full.ChatID) // read inside the transaction that wrote it
		if err != nil || got != full {
			return fmt.Errorf("inside the write: %+v, %v", got, err)
		}
		if _, err := tx.Channel("chan_none"); !notFound(err) {
			return fmt.Errorf("an unknown channel inside a write: %v", err)
		}
		n, err := tx.IconBytes(th.ChatID)
		if err != nil || n != int64(len(full.Icon)) {
			return fmt.Errorf("icon bytes but the thread's: %d, %v; want %d", n, err, len(full.Icon))
		}
		return nil
	})
	if got, err := s.Channel(bg, full.ChatID); err != nil || got != full {
		t.Fatalf("channel %+v, %v; want %+v", got, err, full)
	}
	if _, err := s.Channel(bg, "chan_none"); !notFound(err) {
		t.Fatalf("an unknown channel: %v", err)
	}
	renamed := full
	renamed.Name, renamed.Favorite, renamed.Icon = "renamed", false, ""
	var lost []string
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(renamed); err != nil {
			return err
		}
		var err error
		lost, err = tx.SetDefault(full.ChatID)
		return err
	})
	if !slices.Equal(lost, []string{core.DefaultChatID}) {
		t.Fatalf("SetDefault took the flag from %v, want [default]", lost)
	}
	chs, _ = s.Channels(bg)
	byID := map[string]core.Channel{}
	for _, c := range chs {
		byID[c.ChatID] = c
	}
	renamed.IsDefault = true
	if len(chs) != 3 || byID[full.ChatID] != renamed || byID[core.DefaultChatID].IsDefault || byID[th.ChatID] != th {
		t.Fatalf("directory after a rename and a new default: %+v", chs)
	}
}

// A message comes back as it went in, every field (its files' paths on
// this machine aside), whichever way it is read.
func testMessagesRoundTrip(t *testing.T, s Store) {
	var m core.Message
	if err := fill.Fill(&m, "Media.Path"); err != nil {
		t.Fatal(err)
	}
	write(t, s, func(tx store.Tx) error { return tx.InsertMessage(m, false) })
	if got, err := s.Message(bg, m.ID); err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("message\n got %+v, %v\nwant %+v", got, err, m)
	}
	page, more, err := s.History(bg, m.Lane, "", 10)
	if err != nil || more || len(page) != 1 || !reflect.DeepEqual(page[0], m) {
		t.Fatalf("history %+v, %v, %v", page, more, err)
	}
	plain := userMsg(core.Lane{ChatID: core.DefaultChatID}, "m_plain", "hi", 1)
	write(t, s, func(tx store.Tx) error { return tx.InsertMessage(plain, false) })
	if got, err := s.Message(bg, plain.ID); err != nil || !reflect.DeepEqual(got, plain) {
		t.Fatalf("a message with nothing optional: %+v, %v", got, err)
	}
	if _, err := s.Message(bg, "m_none"); !notFound(err) {
		t.Fatalf("an unknown message: %v", err)
	}
}

func ids(ms []core.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return strings.Join(out, " ")
}

// History pages go back from the newest, oldest first within a page, in
// the order messages were added (not by timestamp: two may share one).
func testHistoryPaging(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	write(t, s, func(tx store.Tx) error {
		for i := range 7 {
			if err := tx.InsertMessage(userMsg(lane, fmt.Sprintf("m%d", i), "x", int64(10-i%2)), false); err != nil {
				return err
			}
		}
		return tx.InsertMessage(userMsg(core.Lane{ChatID: core.DefaultChatID, ThreadID: "t1"}, "other", "", 1), false)
	})
	page, more, err := s.History(bg, lane, "", 3)
	if err != nil || !more || ids(page) != "m4 m5 m6" {
		t.Fatalf("newest page = %q %v %v", ids(page), more, err)
	}
	if page, more, _ = s.History(bg, lane, "m4", 3); !more || ids(page) != "m1 m2 m3" {
		t.Fatalf("second page = %q %v", ids(page), more)
	}
	if page, more, _ = s.History(bg, lane, "m1", 3); more || ids(page) != "m0" {
		t.Fatalf("last page = %q %v", ids(page), more)
	}
	if page, more, _ = s.History(bg, lane, "m0", 3); more || len(page) != 0 {
		t.Fatalf("before the first: %q %v", ids(page), more)
	}
	if _, _, err := s.History(bg, lane, "other", 3); !notFound(err) {
		t.Fatalf("a message of another lane as cursor: %v", err)
	}
	if page, _, _ := s.History(bg, core.Lane{ChatID: "chan_none"}, "", 3); len(page) != 0 {
		t.Fatalf("an empty lane: %q", ids(page))
	}
}

// A reply being written is saved as it goes; a crash leaves it listed by
// Streaming, and finishing it (stopped) takes it off the list.
func testStreamingRecovery(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	m := core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, TS: 1}
	write(t, s, func(tx store.Tx) error { return tx.InsertMessage(m, true) })
	write(t, s, func(tx store.Tx) error { return tx.SaveProgress("r1", "partial", "thinking") })
	ms, err := s.Streaming(bg)
	if err != nil || len(ms) != 1 || ms[0].Text != "partial" || ms[0].Reasoning != "thinking" {
		t.Fatalf("streaming = %+v, %v", ms, err)
	}
	m.Text, m.Stopped = "partial", true
	write(t, s, func(tx store.Tx) error { return tx.FinishMessage(m) })
	if ms, _ := s.Streaming(bg); len(ms) != 0 {
		t.Fatalf("still streaming after finish: %+v", ms)
	}
	// Progress reaches only a reply still being written.
	write(t, s, func(tx store.Tx) error { return tx.SaveProgress("r1", "late", "") })
	if got, _ := s.Message(bg, "r1"); !got.Stopped || got.Text != "partial" {
		t.Fatalf("finished = %+v", got)
	}
	err = s.Write(bg, func(tx store.Tx) error { return tx.FinishMessage(core.Message{ID: "r_deleted", Lane: lane}) })
	if !notFound(err) {
		t.Fatalf("finishing a reply deleted while it streamed: %v", err)
	}
}

// Deleting a message takes every row that names it: its read receipts,
// its frames (but the message.deleted that tells devices), its entries in
// the agent's conversation, its queued turn and its files' uses. Only
// that lane's ids are deleted.
func testDeleteMessageCascades(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	other := core.Lane{ChatID: "chan_o"}
	md := core.Media{Kind: "image", Mime: "image/png", Size: 3, Filename: "a.png", SHA256: "aaaa"}
	var offered core.Media
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: other.ChatID, Name: "O", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutBlob(md.SHA256, md.Size); err != nil {
			return err
		}
		if err := tx.PutUpload("phone", "ref1", md); err != nil {
			return err
		}
		for _, m := range []core.Message{userMsg(lane, "m1", "doomed words", 1), userMsg(lane, "m2", "kept", 2), userMsg(other, "m3", "elsewhere", 3)} {
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
		}
		var err error
		if offered, err = tx.AttachUpload("phone", "ref1", lane, "m1"); err != nil {
			return err
		}
		if err := tx.MarkRead(lane, "m1", "phone", 5); err != nil {
			return err
		}
		for _, e := range []record.ConversationEntry{{Role: "user", Content: "doomed"}, {Role: "assistant", Content: "reply"}} {
			if err := tx.AppendConversation(lane, "m1", e); err != nil {
				return err
			}
		}
		if err := tx.AppendConversation(lane, "m2", record.ConversationEntry{Role: "user", Content: "kept"}); err != nil {
			return err
		}
		if err := tx.QueueTurn(lane, "m1"); err != nil {
			return err
		}
		for _, ev := range []*core.Event{msgEvent(lane, "m1"),
			{Type: core.EvReadReceipt, Lane: lane, TS: 1, MessageIDs: []string{"m1"}},
			{Type: core.EvCommentary, Lane: lane, TS: 1, StreamID: "m1", Text: "looking"},
			{Type: core.EvMediaOffer, Lane: lane, TS: 1, Media: &core.Media{ID: "md_x", MessageID: "m1"}},
			msgEvent(lane, "m2"),
		} {
			if _, _, err := tx.AppendEvent(ev); err != nil {
				return err
			}
		}
		return nil
	})
	offered.MessageID = "m1"
	// Another lane's ids are not this lane's to delete.
	write(t, s, func(tx store.Tx) error { return tx.DeleteMessages(other, []string{"m1"}) })
	if _, err := s.Message(bg, "m1"); err != nil {
		t.Fatalf("deleted by naming it in another lane: %v", err)
	}
	var deleted int64
	write(t, s, func(tx store.Tx) error {
		if err := tx.DeleteMessages(lane, []string{"m1", "m3"}); err != nil {
			return err
		}
		var err error
		deleted, _, err = tx.AppendEvent(&core.Event{Type: core.EvMessageDeleted, Lane: lane, TS: 2, MessageIDs: []string{"m1"}})
		return err
	})
	if _, err := s.Message(bg, "m1"); !notFound(err) {
		t.Fatalf("the message survives: %v", err)
	}
	if _, err := s.Message(bg, "m3"); err != nil {
		t.Fatalf("another lane's message went: %v", err)
	}
	var left []string
	s.ScanEvents(bg, 0, deleted, func(ev *core.Event) error {
		left = append(left, string(ev.Type))
		return nil
	})
	if strings.Join(left, " ") != "message message.deleted" {
		t.Fatalf("frames left: %v, want m2's message and the message.deleted", left)
	}
	conv, err := s.Conversation(bg, lane)
	if err != nil || len(conv) != 1 || conv[0].Content != "kept" {
		t.Fatalf("conversation left: %+v, %v", conv, err)
	}
	if ts, _ := s.Turns(bg); len(ts) != 0 {
		t.Fatalf("turns left: %+v", ts)
	}
	if _, err := s.Media(bg, offered.ID); !notFound(err) {
		t.Fatalf("the file's row survives: %v", err)
	}
	if u, _ := s.UnusedBlobs(bg, 10); !slices.Equal(u, []string{"aaaa"}) {
		t.Fatalf("unused blobs %v: the deleted message's file is still counted", u)
	}
	if hs, _ := s.SearchPageBefore(bg, "doomed", nil, "", 10); len(hs.Hits) != 0 {
		t.Fatalf("a deleted message matches: %+v", hs.Hits)
	}
	residue(t, s, "m1")
}

// Deleting a channel takes its threads, their history, frames, reads,
// conversations, settings and turns; the rest of the directory stays.
func testDeleteChannelCascades(t *testing.T, s Store) {
	ch := core.Channel{ChatID: "chan_1", Name: "c", Kind: core.KindChannel}
	th := core.Channel{ChatID: "t_1", Name: "t", Kind: core.KindThread, ParentChatID: "chan_1"}
	inThread := core.Lane{ChatID: "chan_1", ThreadID: "t_1"}
	keep := core.Lane{ChatID: core.DefaultChatID}
	write(t, s, func(tx store.Tx) error {
		for _, c := range []core.Channel{ch, th} {
			if err := tx.PutChannel(c); err != nil {
				return err
			}
		}
		for _, m := range []core.Message{userMsg(inThread, "m1", "thread words", 1), userMsg(core.Lane{ChatID: "chan_1"}, "m2", "channel words", 2), userMsg(keep, "keep", "kept words", 3)} {
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
			if err := tx.MarkRead(m.Lane, m.ID, "phone", 4); err != nil {
				return err
			}
			if err := tx.AppendConversation(m.Lane, m.ID, record.ConversationEntry{Role: "user", Content: m.Text}); err != nil {
				return err
			}
			if err := tx.SetLaneSettings(m.Lane, record.LaneSettings{Model: "m-" + m.ID}); err != nil {
				return err
			}
			if err := tx.QueueTurn(m.Lane, m.ID); err != nil {
				return err
			}
			if _, _, err := tx.AppendEvent(msgEvent(m.Lane, m.ID)); err != nil {
				return err
			}
		}
		_, _, err := tx.AppendEvent(&core.Event{Type: core.EvChannelCreated, TS: 1, Channel: &th})
		return err
	})
	var gone []core.Channel
	write(t, s, func(tx store.Tx) error {
		var err error
		gone, err = tx.DeleteChannel("chan_1")
		return err
	})
	if len(gone) != 2 {
		t.Fatalf("deleted %+v, want the channel and its thread", gone)
	}
	for _, id := range []string{"chan_1", "t_1"} {
		if _, err := s.Channel(bg, id); !notFound(err) {
			t.Fatalf("%s survives: %v", id, err)
		}
	}
	for _, id := range []string{"m1", "m2"} {
		if _, err := s.Message(bg, id); !notFound(err) {
			t.Fatalf("message %s survives: %v", id, err)
		}
		residue(t, s, id)
	}
	var left []string
	head, _ := s.OutboxHead(bg)
	s.ScanEvents(bg, 0, head, func(ev *core.Event) error {
		if ev.Message == nil {
			left = append(left, string(ev.Type))
		} else {
			left = append(left, ev.Message.ID)
		}
		return nil
	})
	if !slices.Equal(left, []string{"keep"}) {
		t.Fatalf("frames left: %v", left)
	}
	for _, l := range []core.Lane{inThread, {ChatID: "chan_1"}} {
		if n, _ := s.ConversationLen(bg, l); n != 0 {
			t.Errorf("%v keeps %d conversation entries", l, n)
		}
		if ls, _ := s.LaneSettings(bg, l); ls.Model != "" {
			t.Errorf("%v keeps its settings %+v", l, ls)
		}
	}
	if ts, _ := s.Turns(bg); len(ts) != 1 || ts[0].MessageID != "keep" {
		t.Fatalf("turns left: %+v", ts)
	}
	if n, _ := s.ConversationLen(bg, keep); n != 1 {
		t.Fatalf("the default channel's conversation: %d entries", n)
	}
	if hs, _ := s.SearchPageBefore(bg, "words", nil, "", 10); len(hs.Hits) != 1 || hs.Hits[0].MessageID != "keep" {
		t.Fatalf("search after the delete: %+v", hs.Hits)
	}
}
