package commit

import (
	"context"
	"errors"
	"testing"

	"github.com/irisgate/irisgate/store"
)

// Head is unknown until a durable event commits or the store's head is
// noted; then it follows the commits, a failed write moves it not, and a
// store head read before a commit (noted late) does not lower it.
func TestHeadFollowsCommits(t *testing.T) {
	st := openStore(t)
	l := New(st, newWatch(st), quiet, Config{})
	defer run(l)()
	if _, ok := l.Head(); ok {
		t.Fatal("head known before any commit")
	}
	ctx := context.Background()
	if err := l.Commit(ctx, putChannel("a"), nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Head(); ok {
		t.Fatal("head known after a commit without an event")
	}
	if err := l.Commit(ctx, putChannel("b"), idle("b")); err != nil {
		t.Fatal(err)
	}
	stored, err := st.OutboxHead(ctx)
	if h, ok := l.Head(); err != nil || !ok || h != stored || h == 0 {
		t.Fatalf("head %d (known %v), store's %d (%v)", h, ok, stored, err)
	}
	boom := errors.New("boom")
	if err := l.Commit(ctx, func(store.Tx) error { return boom }, idle("c")); !errors.Is(err, boom) {
		t.Fatalf("failing write: %v", err)
	}
	if h, _ := l.Head(); h != stored {
		t.Fatalf("head after a failed write: %d, want %d", h, stored)
	}
	l.NoteHead(stored - 1) // read before the last commit
	if h, _ := l.Head(); h != stored {
		t.Fatalf("a stale note lowered the head to %d", h)
	}
}

// NoteHead makes the head known from the store's before the log commits
// anything (a restart).
func TestHeadNotedFromTheStore(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	before := New(st, newWatch(st), quiet, Config{})
	stop := run(before)
	if err := before.Commit(ctx, putChannel("a"), idle("a")); err != nil {
		t.Fatal(err)
	}
	stop()
	l := New(st, newWatch(st), quiet, Config{})
	defer run(l)()
	stored, _ := st.OutboxHead(ctx)
	l.NoteHead(stored)
	if h, ok := l.Head(); !ok || h != stored {
		t.Fatalf("head %d (known %v), want the store's %d", h, ok, stored)
	}
	if err := l.Commit(ctx, putChannel("b"), idle("b")); err != nil {
		t.Fatal(err)
	}
	if h, _ := l.Head(); h != stored+1 {
		t.Fatalf("head %d after a commit, want %d", h, stored+1)
	}
}
