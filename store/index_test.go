package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

// The search index is kept off the commit path (index.go): these tests
// hold it to what a commit-time index gave — everything committed is
// found, nothing deleted or replaced is — whatever the order of commits,
// indexing batches, deletes and edits.

// indexed returns the seqs the index holds for token, read from the index
// itself (no catch-up, no join with the messages).
func indexed(t *testing.T, s *Store, token string) []int64 {
	t.Helper()
	rows, err := s.r.Query(`SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid`, `text : "`+token+`"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		out = append(out, seq)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// integrity runs FTS5's check of its own structure and, with content,
// that it matches the messages exactly (valid only when none streams:
// streaming replies stay out of the index on purpose).
func integrity(t *testing.T, s *Store, content bool) {
	t.Helper()
	if _, err := s.w.Exec(`INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', ?)`, b2i(content)); err != nil {
		t.Fatalf("integrity-check (against the messages: %v): %v", content, err)
	}
}

func seqOf(t *testing.T, s *Store, id string) int64 {
	t.Helper()
	var seq int64
	if err := s.r.QueryRow(`SELECT seq FROM messages WHERE id = ?`, id).Scan(&seq); err != nil {
		t.Fatalf("seq of %s: %v", id, err)
	}
	return seq
}

// modelMsg is what the model test expects of one message.
type modelMsg struct {
	id        string
	text      string // its current text: one token naming it and its version
	streaming bool
	deleted   bool
}

// A random mix of sends, streaming replies, progress, finishes (also of
// finished messages), deletes, failed transactions and indexing batches of
// 1–3 messages, checked against a model: at any moment the index holds no
// entry of a deleted message or of a replaced text, and once caught up it
// holds exactly every message that does not stream, with its current text.
func TestIndexFollowsEveryChange(t *testing.T) {
	s := open(t, withIndexDelay(time.Hour))
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	rnd := rand.New(rand.NewSource(17))
	var ms []*modelMsg
	version := 0
	token := func(m *modelMsg) string {
		version++
		return fmt.Sprintf("k%sv%dq", strings.TrimPrefix(m.id, "m"), version)
	}
	// Deletes and edits pick among the messages touched last half the
	// time: most of those are not indexed yet, the case to get right.
	var recent []*modelMsg
	touch := func(m *modelMsg) { recent = append(recent[max(0, len(recent)-4):], m) }
	live := func(streaming bool) *modelMsg {
		pool := ms
		if rnd.Intn(2) == 0 {
			pool = recent
		}
		var c []*modelMsg
		for _, m := range pool {
			if !m.deleted && m.streaming == streaming {
				c = append(c, m)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rnd.Intn(len(c))]
	}
	errRollback := errors.New("rolled back")
	for step := range 600 {
		// Some transactions fail: what they did must leave no trace, in
		// the model or the index.
		fail := rnd.Intn(10) == 0
		var undo []func()
		err := s.Write(ctx, func(tx Tx) error {
			for range 1 + rnd.Intn(3) {
				switch op := rnd.Intn(10); {
				case op < 4: // a send, or a reply beginning
					m := &modelMsg{id: fmt.Sprint("m", len(ms)), streaming: op == 3}
					if !m.streaming {
						m.text = token(m)
					}
					if err := tx.InsertMessage(core.Message{ID: m.id, Lane: lane, Role: core.RoleUser, Text: m.text, TS: int64(step)}, m.streaming); err != nil {
						return err
					}
					ms = append(ms, m)
					touch(m)
					undo = append(undo, func() {
						ms = slices.DeleteFunc(ms, func(x *modelMsg) bool { return x == m })
						m.deleted = true // never was: out of recent's picks too
					})
				case op < 5: // progress of a reply
					if m := live(true); m != nil {
						if err := tx.SaveProgress(m.id, token(m)+" partial", ""); err != nil {
							return err
						}
					}
				case op < 7: // a reply finishing, or a finished message replaced
					m := live(rnd.Intn(2) == 0)
					if m == nil {
						continue
					}
					was, streaming := m.text, m.streaming
					m.text, m.streaming = token(m), false
					if err := tx.FinishMessage(core.Message{ID: m.id, Lane: lane, Role: core.RoleAssistant, Text: m.text, Stopped: rnd.Intn(3) == 0}); err != nil {
						return err
					}
					touch(m)
					undo = append(undo, func() { m.text, m.streaming = was, streaming })
				case op < 8: // a delete
					m := live(rnd.Intn(4) == 0)
					if m == nil {
						continue
					}
					if err := tx.DeleteMessages(lane, []string{m.id}); err != nil {
						return err
					}
					m.deleted = true
					undo = append(undo, func() { m.deleted = false })
				default: // an indexing batch, inside a commit like the others
					if _, _, err := indexSome(tx.(*sqliteTx), 1+rnd.Intn(3)); err != nil {
						return err
					}
				}
			}
			if fail {
				return errRollback
			}
			return nil
		})
		if fail {
			if !errors.Is(err, errRollback) {
				t.Fatalf("step %d: %v", step, err)
			}
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		} else if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%50 == 49 {
			checkModel(t, s, ms, false)
			integrity(t, s, false)
			// Every reply finished and caught up, the index must match
			// the messages exactly.
			for _, m := range ms {
				if !m.deleted && m.streaming {
					m.text, m.streaming = token(m), false
					if err := s.Write(ctx, func(tx Tx) error {
						return tx.FinishMessage(core.Message{ID: m.id, Lane: lane, Role: core.RoleAssistant, Text: m.text})
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := s.catchUp(ctx); err != nil {
				t.Fatal(err)
			}
			checkModel(t, s, ms, true)
			integrity(t, s, true)
		}
	}
}

// checkModel holds the index to the model: every entry it has of the
// model's tokens is a current text of a message still there and not
// streaming (nothing deleted, replaced or streaming, nothing twice), and
// once caught up it has every one of those.
func checkModel(t *testing.T, s *Store, ms []*modelMsg, caughtUp bool) {
	t.Helper()
	seqs := map[string]int64{}
	rows, err := s.r.Query(`SELECT id, seq FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		seqs[id] = seq
	}
	rows.Close()
	want := map[string]int64{} // token → seq
	for _, m := range ms {
		if !m.deleted && !m.streaming {
			want[strings.ToLower(m.text)] = seqs[m.id]
		}
	}
	// Every (term, message) pair in the index, read through fts5vocab
	// on the writer's one connection (its temp schema is writable).
	if _, err := s.w.Exec(`CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, messages_fts, instance)`); err != nil {
		t.Fatal(err)
	}
	rows, err = s.w.Query(`SELECT term, doc FROM temp.fts_terms WHERE col = 'text' AND term GLOB 'k*q'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var term string
		var seq int64
		if err := rows.Scan(&term, &seq); err != nil {
			t.Fatal(err)
		}
		if _, twice := got[term]; twice {
			t.Fatalf("%q is in the index twice", term)
		}
		got[term] = seq
		if w, ok := want[term]; !ok || w != seq {
			t.Fatalf("the index has %q for message seq %d: deleted, replaced or streaming (want %v, %v)", term, seq, w, ok)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if caughtUp && len(got) != len(want) {
		for term, seq := range want {
			if _, ok := got[term]; !ok {
				t.Fatalf("caught up, the index lacks %q (message seq %d)", term, seq)
			}
		}
	}
}

// A search finds what was committed before it, whatever the indexer is
// doing: writers and searchers race, and each writer's message must be
// found by the search it makes right after its commit.
func TestSearchFindsWhatWasJustCommitted(t *testing.T) {
	s := open(t, withIndexDelay(time.Millisecond))
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			for i := range 40 {
				word := fmt.Sprintf("w%dn%dz", w, i)
				if err := s.Write(ctx, func(tx Tx) error {
					return tx.InsertMessage(core.Message{ID: "m_" + word, Lane: lane, Role: core.RoleUser, Text: "hello " + word, TS: 1}, false)
				}); err != nil {
					errs <- err
					return
				}
				p, err := s.SearchPageBefore(ctx, word, nil, "", 5)
				if err != nil || len(p.Hits) != 1 || p.Hits[0].MessageID != "m_"+word {
					errs <- fmt.Errorf("search %s right after its commit: %+v, %v", word, p.Hits, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Without a search, the indexer takes commits in by itself soon after.
func TestIndexerRunsAfterCommits(t *testing.T) {
	ran := make(chan error, 16)
	s := open(t, withIndexDelay(time.Millisecond), withIndexRuns(func(err error) { ran <- err }))
	insertAll(t, s, core.Message{ID: "m1", Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: "quokka", TS: 1})
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the indexer did not run after a commit")
	}
	if got := indexed(t, s, "quokka"); len(got) != 1 {
		t.Fatalf("after the indexer's run: %v", got)
	}
}

// Closing the store indexes what the indexer had not reached, so a clean
// stop leaves nothing for the next start.
func TestCloseIndexesTheRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s, err := Open(path, withIndexDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	insertAll(t, s, core.Message{ID: "m1", Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: "wombat", TS: 1})
	if got := indexed(t, s, "wombat"); len(got) != 0 {
		t.Fatalf("indexed in the commit: %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = rawOpen(t, path)
	var upto, max int64
	if err := s.r.QueryRow(`SELECT upto, (SELECT MAX(seq) FROM messages) FROM fts_state`).Scan(&upto, &max); err != nil || upto != max {
		t.Fatalf("after Close the watermark is %d, the newest message %d (%v)", upto, max, err)
	}
	if got := indexed(t, s, "wombat"); len(got) != 1 {
		t.Fatalf("after Close: %v", got)
	}
}

// rawOpen opens the file without the store's start-up (no migration, no
// catch-up), to look at what another run left.
func rawOpen(t *testing.T, path string) *Store {
	t.Helper()
	s, err := openAt(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A database whose index the commits kept (schema 8) moves to the
// watermark with nothing to re-index: what it had indexed stays found,
// its streaming reply is indexed once it finishes, its messages can be
// deleted and replaced.
func TestIndexUpgradeFromCommitTimeIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	old, err := openAt(path, lazyIndexVersion-1)
	if err != nil {
		t.Fatal(err)
	}
	lane := core.Lane{ChatID: core.DefaultChatID}
	insertAll(t, old, core.Message{ID: "m1", Lane: lane, Role: core.RoleUser, Text: "pangolin one", TS: 1},
		core.Message{ID: "m2", Lane: lane, Role: core.RoleUser, Text: "pangolin two", TS: 2})
	ctx := context.Background()
	if err := old.Write(ctx, func(tx Tx) error {
		return tx.InsertMessage(core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, TS: 3}, true)
	}); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s, err := Open(path, withIndexDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var upto, pending int64
	if err := s.r.QueryRow(`SELECT upto, (SELECT COUNT(*) FROM fts_pending) FROM fts_state`).Scan(&upto, &pending); err != nil || upto != 3 || pending != 0 {
		t.Fatalf("after the upgrade: watermark %d, %d queued (%v); want 3, 0", upto, pending, err)
	}
	if hs, err := s.Search(ctx, "pangolin", nil, 10); err != nil || hitIDs(hs) != "m2,m1" {
		t.Fatalf("what the old index had: %q, %v", hitIDs(hs), err)
	}
	for _, fn := range []func(Tx) error{
		func(tx Tx) error {
			return tx.FinishMessage(core.Message{ID: "r1", Lane: lane, Role: core.RoleAssistant, Text: "pangolin reply", TS: 3})
		},
		func(tx Tx) error { return tx.DeleteMessages(lane, []string{"m1"}) },
		func(tx Tx) error {
			return tx.FinishMessage(core.Message{ID: "m2", Lane: lane, Role: core.RoleUser, Text: "armadillo", TS: 2})
		},
	} {
		if err := s.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string]string{"pangolin": "r1", "armadillo": "m2", "one": ""} {
		if hs, err := s.Search(ctx, q, nil, 10); err != nil || hitIDs(hs) != want {
			t.Errorf("search %q: %q, %v; want %q", q, hitIDs(hs), err, want)
		}
	}
	integrity(t, s, true)
}

// No statement of an indexing batch walks the history: each reads only
// the range it indexes and the queue. A batch once joined the queue with
// messages, and SQLite's planner (without statistics) scanned every
// message for it: 2.5 ms a batch at 20,000 messages, and a million-message
// store took 479 live inserts a second instead of 19,862 (`irisgate bench
// --scenarios search`, "one by one").
func TestIndexBatchReadsNoWholeTable(t *testing.T) {
	s := open(t, withIndexDelay(time.Hour))
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	if err := s.Write(ctx, func(tx Tx) error {
		for i := range 200 {
			if err := tx.InsertMessage(core.Message{ID: fmt.Sprint("m_", i), Lane: lane, Role: core.RoleUser, Text: "words", TS: 1}, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	q := indexQueries
	for _, c := range []struct {
		sql  string
		args []any
	}{
		{q.watermark, nil}, {q.nth, []any{1, 63}}, {q.newest, []any{1}}, {q.indexRange, []any{1, 64}},
		{q.setWatermark, []any{64}}, {q.indexQueue, nil}, {q.emptyQueue, nil},
	} {
		for _, detail := range plan(t, s.w, c.sql, c.args...) {
			if strings.HasPrefix(detail, "SCAN messages") || strings.HasPrefix(detail, "SCAN m ") || detail == "SCAN m" {
				t.Errorf("%s\n  plans %q", c.sql, detail)
			}
		}
	}
}

// The indexer leaves a busy writer alone: while commits keep coming (here
// the writer is never quiet long enough), it runs only once maxIndexLag
// has passed since a commit woke it. A search meanwhile finds what was
// committed all the same.
func TestIndexerWaitsForAQuietWriter(t *testing.T) {
	const lag = 150 * time.Millisecond
	ran := make(chan error, 16)
	s := open(t, withIndexDelay(time.Millisecond), withIndexQuiet(time.Hour, lag), withIndexRuns(func(err error) { ran <- err }))
	start := time.Now()
	insertAll(t, s, core.Message{ID: "m1", Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: "wombat", TS: 1})
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < lag {
			t.Fatalf("the indexer took the writer %v after a commit, within the %v it leaves a busy writer alone", waited, lag)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the indexer did not run after its longest wait")
	}

	s2 := open(t, withIndexDelay(time.Millisecond), withIndexQuiet(time.Hour, time.Hour))
	insertAll(t, s2, core.Message{ID: "m2", Lane: core.Lane{ChatID: "default"}, Role: core.RoleUser, Text: "numbat", TS: 1})
	p, err := s2.SearchPageBefore(context.Background(), "numbat", nil, "", 5)
	if err != nil || len(p.Hits) != 1 || p.Hits[0].MessageID != "m2" {
		t.Fatalf("a search while the indexer waits: %+v, %v", p.Hits, err)
	}
}
