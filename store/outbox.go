package store

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// OutboxRow is one durable frame as stored. ChatID/ThreadID name the lane
// it belongs to (for a channel.* frame: the entry itself, a thread under its
// parent), so deleting a channel or thread deletes its frames; MessageID,
// when set, ties it to a message so deleting the message deletes the frame.
// Body is the event's record (package record); ScanEvents decodes it.
type OutboxRow struct {
	Cursor    int64
	Type      string
	ChatID    string
	ThreadID  string
	MessageID string
	Body      []byte
	TS        int64
}

// AppendEvent adds a durable event to the outbox and returns its cursor and
// the size of its stored body. Cursors only grow, even across deletes
// (AUTOINCREMENT never reuses a value). The row goes in with the
// transaction's others (rowbuf.go), under the cursor named here.
func (t *sqliteTx) AppendEvent(ev *core.Event) (cursor int64, size int, err error) {
	body, err := record.EncodeEvent(ev)
	if err != nil {
		return 0, 0, err
	}
	r := outboxRow(ev)
	if cursor, err = t.nextCursor(); err != nil {
		return 0, 0, err
	}
	if err := t.queue(outboxShape, cursor, r.Type, r.ChatID, r.ThreadID, r.MessageID, body, ev.TS); err != nil {
		return 0, 0, err
	}
	return cursor, len(body), nil
}

// outboxRow is the columns an event's row is found and deleted by.
func outboxRow(ev *core.Event) OutboxRow {
	r := OutboxRow{Type: string(ev.Type), ChatID: ev.Lane.ChatID, ThreadID: ev.Lane.ThreadID}
	switch {
	case ev.Message != nil:
		r.MessageID = ev.Message.ID
	case ev.Channel != nil:
		l := ev.Channel.Lane()
		r.ChatID, r.ThreadID = l.ChatID, l.ThreadID
	case ev.Type == core.EvCommentary:
		r.MessageID = ev.StreamID
	case ev.Type == core.EvReadReceipt && len(ev.MessageIDs) == 1:
		r.MessageID = ev.MessageIDs[0]
	case ev.Type == core.EvMediaOffer && ev.Media != nil:
		// Deleting the message the file came with deletes its offer.
		r.MessageID = ev.Media.MessageID
	}
	return r
}

// OutboxRowOf is the columns an event's row is found and deleted by, for
// any store: which lane and message deleting takes the frame with.
func OutboxRowOf(ev *core.Event) OutboxRow { return outboxRow(ev) }

// OutboxHead returns the newest cursor ever assigned (0 for none).
func (s *Store) OutboxHead(ctx context.Context) (int64, error) {
	var head sql.NullInt64
	err := s.pointRow(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'outbox'`).Scan(&head)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return head.Int64, err
}

// OutboxFloor returns the highest cursor removed by retention: a sync from
// below it cannot be complete.
func (s *Store) OutboxFloor(ctx context.Context) (int64, error) {
	v, err := s.meta(ctx, "outbox_floor")
	if err != nil || v == "" {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// ScanOutbox calls fn for each row with after < cursor <= upto, in order,
// reading in pages so a long replay holds neither a big result in memory
// nor a read transaction open for its whole length.
func (s *Store) ScanOutbox(ctx context.Context, after, upto int64, fn func(OutboxRow) error) error {
	const page = 1000
	buf := make([]OutboxRow, 0, page)
	for {
		buf = buf[:0]
		rows, err := s.query(ctx, `SELECT cursor, type, chat_id, thread_id, message_id, body, ts FROM outbox
			WHERE cursor > ? AND cursor <= ? ORDER BY cursor LIMIT ?`, after, upto, page)
		if err != nil {
			return err
		}
		for rows.Next() {
			var r OutboxRow
			if err := rows.Scan(&r.Cursor, &r.Type, &r.ChatID, &r.ThreadID, &r.MessageID, &r.Body, &r.TS); err != nil {
				rows.Close()
				return err
			}
			buf = append(buf, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range buf {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(buf) < page {
			return nil
		}
		after = buf[len(buf)-1].Cursor
	}
}

// ScanEvents calls fn with each event with after < cursor <= upto, in
// order, decoded and with its cursor set. A row that does not decode stops
// the scan with a *CorruptError: a replay never leaves a frame out
// silently.
func (s *Store) ScanEvents(ctx context.Context, after, upto int64, fn func(*core.Event) error) error {
	return s.ScanOutbox(ctx, after, upto, func(r OutboxRow) error {
		ev, err := record.DecodeEvent(r.Body)
		if err != nil {
			return &CorruptError{Table: "outbox", Key: strconv.FormatInt(r.Cursor, 10), Err: err}
		}
		ev.Cursor = r.Cursor
		return fn(ev)
	})
}

// ScanEventsSkipping is ScanEvents for a replay that must go on past a
// row that does not decode: such a row is handed to bad (with the error
// naming it) instead of stopping the scan.
func (s *Store) ScanEventsSkipping(ctx context.Context, after, upto int64, fn func(*core.Event) error, bad func(cursor int64, err *CorruptError)) error {
	return s.ScanOutbox(ctx, after, upto, func(r OutboxRow) error {
		ev, err := record.DecodeEvent(r.Body)
		if err != nil {
			bad(r.Cursor, &CorruptError{Table: "outbox", Key: strconv.FormatInt(r.Cursor, 10), Err: err})
			return nil
		}
		ev.Cursor = r.Cursor
		return fn(ev)
	})
}

// OutboxCursors returns up to limit cursors of frames with after < cursor
// <= upto, in order: which frames still exist, without their bodies.
func (s *Store) OutboxCursors(ctx context.Context, after, upto int64, limit int) ([]int64, error) {
	rows, err := s.query(ctx, `SELECT cursor FROM outbox WHERE cursor > ? AND cursor <= ? ORDER BY cursor LIMIT ?`, after, upto, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]int64, 0, 64)
	for rows.Next() {
		var c int64
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PruneOutbox keeps the newest keep frames and removes the oldest ones
// older than minTS (epoch ms), whichever removes more, recording the floor. It works
// in bounded transactions (PruneOutboxSome), so commits go on meanwhile.
func (s *Store) PruneOutbox(ctx context.Context, keep int64, minTS int64) (int64, error) {
	var total int64
	for {
		n, more, err := s.PruneOutboxSome(ctx, keep, minTS, PruneChunk)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

// PruneChunk is how many frames one pruning transaction removes at most:
// the write lock it holds stays short (secure_delete overwrites them).
const PruneChunk = 5000

// PruneOutboxSome is one bounded step of PruneOutbox: it removes up to n
// of the oldest frames retention removes, and reports whether more wait.
func (s *Store) PruneOutboxSome(ctx context.Context, keep, minTS int64, n int) (removed int64, more bool, err error) {
	err = s.write(ctx, func(tx *sqliteTx) error {
		var cut sql.NullInt64
		if err := tx.queryRow(pruneCut, keep, minTS).Scan(&cut); err != nil {
			return err
		}
		if !cut.Valid {
			return nil
		}
		var upto int64
		if err := tx.queryRow(`SELECT MAX(cursor) FROM (SELECT cursor FROM outbox WHERE cursor <= ? ORDER BY cursor LIMIT ?)`, cut.Int64, n).Scan(&upto); err != nil {
			return err
		}
		res, err := tx.exec(`DELETE FROM outbox WHERE cursor <= ?`, upto)
		if err != nil {
			return err
		}
		removed, _ = res.RowsAffected()
		more = upto < cut.Int64
		return tx.setMeta("outbox_floor", strconv.FormatInt(upto, 10))
	})
	return removed, more, err
}

// pruneCut is the newest frame retention removes: the newest keep frames
// stay, and the oldest frames go for as long as they are older than minTS.
// Each half is a search by cursor that stops where it is answered: below
// the head by keep, and at the oldest frame young enough to stay, so it
// reads only frames that go. (A frame whose ts is older than an earlier
// one's, the clock having stepped back, goes with the frames before it.)
// One search for "cursor <= head - keep OR ts < minTS" walked down from the
// head to the first frame that matched: every minute, in the writer's
// transaction, the whole outbox while nothing was due (34 ms at 300,000
// frames), keep frames when something was.
const pruneCut = `SELECT MAX(c) FROM (
	SELECT MAX(cursor) AS c FROM outbox WHERE cursor <= (SELECT MAX(cursor) FROM outbox) - ?1
	UNION ALL
	SELECT MAX(cursor) FROM outbox WHERE cursor < COALESCE((SELECT MIN(cursor) FROM outbox WHERE ts >= ?2), 1 << 62))`

// OutboxLen is how many frames the outbox holds.
func (s *Store) OutboxLen(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM outbox`).Scan(&n)
	return n, err
}

func (s *Store) meta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.pointRow(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return v, err
}

func (t *sqliteTx) setMeta(key, value string) error {
	_, err := t.exec(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}
