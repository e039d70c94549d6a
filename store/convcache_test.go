package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

func convContents(t *testing.T, s *Store, lane core.Lane) []string {
	t.Helper()
	es, err := s.Conversation(context.Background(), lane)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Content)
	}
	return out
}

func appendEntry(lane core.Lane, id, content string) func(Tx) error {
	return func(tx Tx) error {
		return tx.AppendConversation(lane, id, record.ConversationEntry{Role: "user", Content: content})
	}
}

// A conversation read once grows in memory with what commits after, and
// what is undone (a failed transaction, a failed savepoint) never reaches
// it; what deletes from it (/undo, /new, deleting a message) is read again.
func TestConversationCacheFollowsTheTable(t *testing.T) {
	s := openRowbuf(t)
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	write := func(fn func(Tx) error) {
		t.Helper()
		if err := s.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	want := func(w ...string) {
		t.Helper()
		if got := convContents(t, s, lane); !slices.Equal(got, w) {
			t.Fatalf("conversation %q, want %q", got, w)
		}
	}
	write(appendEntry(lane, "m1", "one"))
	want("one")
	write(appendEntry(lane, "m2", "two"))
	s.conv.mu.Lock()
	held := s.conv.lanes[lane]
	s.conv.mu.Unlock()
	if held == nil || len(held.entries) != 2 {
		t.Fatalf("the cache holds %+v after an append to a lane read: want both entries", held)
	}
	want("one", "two")

	boom := errors.New("boom")
	if err := s.Write(ctx, func(tx Tx) error {
		if err := appendEntry(lane, "m3", "rolled back")(tx); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	want("one", "two")
	write(func(tx Tx) error {
		tx.Savepoint(func(tx Tx) error {
			if err := appendEntry(lane, "m3", "undone")(tx); err != nil {
				return err
			}
			return boom
		})
		return appendEntry(lane, "m4", "four")(tx)
	})
	want("one", "two", "four")

	write(func(tx Tx) error { return tx.TruncateConversation(lane, "m4") })
	want("one", "two")
	write(func(tx Tx) error { return tx.DeleteMessages(lane, []string{"m1"}) })
	want("two")
	write(func(tx Tx) error { return tx.ClearConversation(lane) })
	want()
}

// A lane read from SQLite between a commit and the cache's update already
// holds the transaction's entries: it is dropped, not given them twice.
func TestConversationReadDuringACommitIsNotAppendedTo(t *testing.T) {
	var c convCache
	lane := core.Lane{ChatID: "c"}
	one := record.ConversationEntry{Role: "user", Content: "one"}
	two := record.ConversationEntry{Role: "user", Content: "two"}
	c.put(c.begin(), lane, []record.ConversationEntry{one}, []int{10})

	touch := &convTouch{appended: []convAppend{{lane: lane, entry: two, size: 10}}}
	mark := c.committing(touch)
	// A reader that missed (its lane dropped meanwhile) reads after the
	// commit and puts both entries before end runs.
	c.mu.Lock()
	c.drop(lane)
	c.mu.Unlock()
	c.put(c.begin(), lane, []record.ConversationEntry{one, two}, []int{10, 10})
	c.end(touch, true, mark)
	if es, ok := c.get(lane); ok && len(es) != 2 {
		t.Fatalf("the lane holds %d entries, want it dropped or both once", len(es))
	}
}

// A lane over convMaxLane is not held; the cache as a whole stays under
// convMaxBytes.
func TestConversationCacheIsBounded(t *testing.T) {
	var c convCache
	big := record.ConversationEntry{Role: "tool", Content: strings.Repeat("x", 10)}
	c.put(c.begin(), core.Lane{ChatID: "huge"}, []record.ConversationEntry{big}, []int{convMaxLane + 1})
	if _, ok := c.get(core.Lane{ChatID: "huge"}); ok {
		t.Fatal("a lane over convMaxLane is held")
	}
	for i := range 20 {
		c.put(c.begin(), core.Lane{ChatID: string(rune('a' + i))}, []record.ConversationEntry{big}, []int{convMaxLane})
		if c.bytes > convMaxBytes {
			t.Fatalf("the cache holds %d bytes, over %d", c.bytes, convMaxBytes)
		}
	}
}
