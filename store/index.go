package store

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"
)

// lazyIndexVersion is the schema version from which the search index is
// kept off the commit path.
const lazyIndexVersion = 9

// lazyIndexSchema takes search indexing out of the writer's transaction.
// Before it, a trigger indexed every message inside the commit that
// stored it: FTS5's upkeep was a tenth of a send's commit (issue 17). Now
// a commit only stores the message; the indexer (below) takes what was
// committed into the index in batches, a transaction each, soon after.
//
// What is indexed is told by two things the indexer keeps in the same
// transactions as the index itself, so a crash can never split them:
//
//   - fts_state.upto, a watermark: every message numbered above it is
//     not in the index yet. Messages are numbered in commit order
//     (AUTOINCREMENT, one writer), so a commit adds nothing below it and
//     costs nothing to record.
//   - fts_pending: messages at or below the watermark to (re)index: a
//     reply that finished after the watermark passed it while it still
//     streamed, or a message whose text changed.
//
// So a message that is not streaming is in the index, with its current
// text, exactly when its seq is at most upto and not in fts_pending. The
// triggers keep that true: a change to an indexed message takes its old
// entry out at once (the index's 'delete' needs the old text, which is
// gone after the commit; and a deleted message must leave nothing in the
// index) and queues the new one; a change to a message not indexed yet
// touches the index not at all.
//
// Search waits for the indexer to reach what was committed before it was
// called (catchUp), so it finds everything a commit-time index would; Open
// indexes what a crash left behind.
const lazyIndexSchema = `
DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
CREATE TABLE fts_state (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	upto INTEGER NOT NULL
);
INSERT INTO fts_state (id, upto) SELECT 1, COALESCE(MAX(seq), 0) FROM messages;
CREATE TABLE fts_pending (seq INTEGER PRIMARY KEY);
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN old.seq <= (SELECT upto FROM fts_state) BEGIN
	INSERT INTO messages_fts (messages_fts, rowid, text, lane_key) SELECT 'delete', old.seq, old.text, old.lane_key
		WHERE old.state != 1 AND NOT EXISTS (SELECT 1 FROM fts_pending WHERE seq = old.seq);
	DELETE FROM fts_pending WHERE seq = old.seq;
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text, state, chat_id, thread_id ON messages
	WHEN (old.state != 1 OR new.state != 1) AND old.seq <= (SELECT upto FROM fts_state) BEGIN
	INSERT INTO messages_fts (messages_fts, rowid, text, lane_key) SELECT 'delete', old.seq, old.text, old.lane_key
		WHERE old.state != 1 AND NOT EXISTS (SELECT 1 FROM fts_pending WHERE seq = old.seq);
	INSERT OR IGNORE INTO fts_pending (seq) SELECT new.seq WHERE new.state != 1;
END;
`

const (
	// defaultIndexDelay is how long the indexer lets commits gather after
	// one wakes it: the longer, the bigger (and cheaper per message) its
	// batches. A search does not wait for it (catchUp).
	defaultIndexDelay = 100 * time.Millisecond
	// indexQuiet is how long the writer must have had no commit but the
	// indexer's before the indexer takes it: during a burst of sends the
	// index waits for the burst's end (or maxIndexLag) instead of holding
	// the writer between its commits. A burst of 3,000 sends to 100
	// devices, indexed while it ran, made 6 % fewer deliveries a second
	// (irisgate bench --scenarios ratios --ratio-modes burst).
	indexQuiet = 10 * time.Millisecond
	// maxIndexLag bounds that wait, from the wake-up: under a steady load
	// that never leaves the writer quiet, the index still runs once a
	// second (a search never waits for it: catchUp).
	maxIndexLag = time.Second
	// indexBatch bounds the messages one indexing transaction takes in,
	// so the writer is never held long from the commits waiting for it:
	// 64 hold it about 1.9 ms here for 30 µs a message, 256 about 6 ms
	// for 23 µs (BenchmarkIndexBatch).
	indexBatch = 64
)

// indexer keeps the search index up with the commits.
type indexer struct {
	on   bool          // the schema is lazyIndexVersion's or later
	ran  func(error)   // tests: told after each of the loop's runs
	kick chan struct{} // a commit stored something to index
	// lastCommit is when the newest commit but the indexer's ended
	// (UnixNano): the indexer waits for the writer to be quiet.
	lastCommit atomic.Int64
	sem        chan struct{} // held by the one catch-up running
	stop       chan struct{}
	done       chan struct{}
}

// withIndexDelay sets how long the indexer lets commits gather (tests).
func withIndexDelay(d time.Duration) Option { return func(s *Store) { s.indexDelay = d } }

// withIndexQuiet sets how long the indexer waits for a quiet writer, and
// at most (tests).
func withIndexQuiet(quiet, lag time.Duration) Option {
	return func(s *Store) { s.indexQuiet, s.maxIndexLag = quiet, lag }
}

// withIndexRuns has ran told after each of the indexer's runs (tests).
func withIndexRuns(ran func(error)) Option { return func(s *Store) { s.idx.ran = ran } }

// wake tells the indexer that something was committed to index.
func (x *indexer) wake() {
	select {
	case x.kick <- struct{}{}:
	default: // woken already
	}
}

// startIndexer indexes what the last run committed and left unindexed (a
// crash, or a stop while the indexer waited), then starts the indexer.
func (s *Store) startIndexer() {
	x := &s.idx
	x.on = true
	x.kick = make(chan struct{}, 1)
	x.sem = make(chan struct{}, 1)
	x.stop, x.done = make(chan struct{}), make(chan struct{})
	// A failure here does not keep the gateway from starting: the loop
	// tries again, and searches say what fails meanwhile.
	if n, err := s.catchUp(context.Background()); err != nil {
		s.log.Warn("store: indexing for search the messages the last run left unindexed", "err", err)
		x.wake()
	} else if n > 0 {
		s.log.Info("store: indexed for search the messages the last run committed and had not indexed", "messages", n)
	}
	go s.indexLoop()
}

// stopIndexer stops the indexer and indexes what it had not reached yet,
// so that a clean stop leaves nothing for the next start.
func (s *Store) stopIndexer() {
	x := &s.idx
	if x.stop == nil {
		return
	}
	close(x.stop)
	<-x.done
	x.stop = nil
	if _, err := s.catchUp(context.Background()); err != nil {
		s.log.Warn("store: indexing for search at close (the next start does it)", "err", err)
	}
}

func (s *Store) indexLoop() {
	x := &s.idx
	defer close(x.done)
	failures := 0
	for {
		select {
		case <-x.stop:
			return
		case <-x.kick:
		}
		// After a failure, wait longer each time (up to a minute): a
		// broken index must not fill the log at the rate of commits.
		woke := time.Now()
		wait := max(s.indexDelay, min(s.indexDelay<<min(failures, 10), time.Minute))
		t := time.NewTimer(wait)
		for {
			select {
			case <-x.stop:
				t.Stop()
				return
			case <-t.C:
			}
			now := time.Now()
			busy := s.indexQuiet - now.Sub(time.Unix(0, x.lastCommit.Load()))
			left := woke.Add(max(wait, s.maxIndexLag)).Sub(now)
			if busy <= 0 || left <= 0 {
				break
			}
			t.Reset(min(busy, left))
		}
		_, err := s.catchUp(context.Background())
		if x.ran != nil {
			x.ran(err)
		}
		if err != nil {
			if failures == 0 {
				s.log.Warn("store: indexing for search failed; searches fail until it works", "err", err)
			}
			failures++
			x.wake() // try again
			continue
		}
		if failures > 0 {
			s.log.Info("store: indexing for search works again")
		}
		failures = 0
	}
}

// catchUp indexes everything committed before it was called and returns
// how many messages it took in. Only one runs at a time; one that waited
// for another usually finds nothing left to do. It ends once the
// watermark passed the newest message of its start, after at least one
// batch (which empties the queue): commits that keep coming while it runs
// cannot hold it.
func (s *Store) catchUp(ctx context.Context) (int, error) {
	x := &s.idx
	if !x.on {
		return 0, nil // an old schema: its triggers index in the commit
	}
	current, target, err := s.indexState(ctx)
	if err != nil || current {
		return 0, err
	}
	select {
	case x.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-x.sem }()
	total := 0
	for {
		if current, _, err := s.indexState(ctx); err != nil || current {
			return total, err
		}
		var n int
		var upto int64
		err := s.write(ctx, func(tx *sqliteTx) error {
			var err error
			tx.indexer = true
			n, upto, err = indexSome(tx, indexBatch)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if upto >= target {
			return total, nil
		}
	}
}

// indexState reports whether the index holds every message committed, and
// the newest message's seq.
func (s *Store) indexState(ctx context.Context) (current bool, head int64, err error) {
	err = s.pointRow(ctx, `SELECT h.head, upto >= h.head AND NOT EXISTS (SELECT 1 FROM fts_pending)
		FROM fts_state, (SELECT COALESCE(MAX(seq), 0) AS head FROM messages) h`).Scan(&head, &current)
	return current, head, err
}

// indexSome takes into the index up to limit messages above the
// watermark (-1: all), moving it past them, and every queued one; it
// returns how many entries it added and the watermark.
//
// Each statement walks only what it indexes: the range by seq, the queue
// by its own rows. (A join of the queue with messages once let SQLite's
// planner scan every message in every batch, and a subquery for the new
// watermark walked the whole backlog: 2.5 ms a batch at 20,000 messages,
// growing with the history.)
func indexSome(tx *sqliteTx, limit int) (added int, upto int64, err error) {
	q := &indexQueries
	var from int64
	if err := tx.queryRow(q.watermark).Scan(&from); err != nil {
		return 0, 0, err
	}
	upto = from
	err = sql.ErrNoRows
	if limit > 0 {
		err = tx.queryRow(q.nth, from, limit-1).Scan(&upto)
	}
	if errors.Is(err, sql.ErrNoRows) {
		// Fewer than limit wait: all of them.
		err = tx.queryRow(q.newest, from).Scan(&upto)
	}
	if err != nil {
		return 0, 0, err
	}
	add := func(res sql.Result, err error) error {
		if err == nil {
			k, _ := res.RowsAffected()
			added += int(k)
		}
		return err
	}
	if upto > from {
		if err := add(tx.exec(q.indexRange, from, upto)); err != nil {
			return 0, 0, err
		}
		if _, err := tx.exec(q.setWatermark, upto); err != nil {
			return 0, 0, err
		}
	}
	if err := add(tx.exec(q.indexQueue)); err != nil {
		return 0, 0, err
	}
	if _, err := tx.exec(q.emptyQueue); err != nil {
		return 0, 0, err
	}
	return added, upto, nil
}

// indexQueries are indexSome's statements (a test reads their plans).
var indexQueries = struct {
	watermark, nth, newest, indexRange, setWatermark, indexQueue, emptyQueue string
}{
	watermark: `SELECT upto FROM fts_state`,
	nth:       `SELECT seq FROM messages WHERE seq > ? ORDER BY seq LIMIT 1 OFFSET ?`,
	newest:    `SELECT COALESCE(MAX(seq), ?) FROM messages`,
	indexRange: `INSERT INTO messages_fts (rowid, text, lane_key)
		SELECT seq, text, lane_key FROM messages WHERE seq > ? AND seq <= ? AND state != 1`,
	setWatermark: `UPDATE fts_state SET upto = ?`,
	// The queue is small (replies that finished after the watermark
	// passed them, edits), so it is taken whole. CROSS JOIN keeps it the
	// outer loop: without statistics SQLite's planner made messages the
	// outer one, a scan of the whole history.
	indexQueue: `INSERT INTO messages_fts (rowid, text, lane_key)
		SELECT m.seq, m.text, m.lane_key FROM fts_pending p CROSS JOIN messages m ON m.seq = p.seq WHERE m.state != 1`,
	emptyQueue: `DELETE FROM fts_pending`,
}
