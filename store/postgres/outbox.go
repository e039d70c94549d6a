package postgres

import (
	"context"
	"errors"
	"strconv"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
	"github.com/jackc/pgx/v5"
)

// Outbox cursors.
//
// A device that has seen cursor c asks for what follows c; so no frame may
// become visible after a frame with a higher cursor did, or a device would
// skip it for good. SQLite gets that for free (one writer). In PostgreSQL,
// with several replicas writing, a sequence does not: nextval is not
// transactional, so replica A can take 5, B take 6, B commit first, a
// device read 6 and move past 5 before A commits it. A sequence also leaves
// gaps wherever a transaction rolls back, which a device would wait on.
//
// So cursors come from one row, outbox_head, in the frame's own
// transaction. The first frame of a transaction increments the row (which
// locks it) and takes the new value; later frames of the same transaction
// count on from there in memory, and the row is set to the last one just
// before commit (storeHead), so a busy batch writes the row twice, not once
// per frame. Another transaction that appends waits on the row lock until
// this one has committed or rolled back, and reads the head as it left it:
//
//   - strictly increasing in commit order: PostgreSQL makes a transaction
//     visible before it releases its locks, so by the time the next writer
//     gets a cursor, every lower one is visible to every new snapshot;
//   - gap-free: a rollback (or a savepoint rolled back, which restores the
//     in-memory count and gives up a lock taken inside it) undoes the
//     increment with the frames;
//   - never reused: the row only grows, deletes and pruning leave it.
//
// The price is that transactions that append frames run one at a time
// across all replicas, from their first frame to their commit: the write
// path is serialised as it is in SQLite, and the group commit (many
// requests, one transaction) is what keeps that cheap. The bench
// (BenchmarkCursor) measures it against an unsafe sequence.

// ErrNoHead is AppendEvent's and OutboxHead's error when outbox_head has lost its one row
// (a damaged or hand-edited database): no frame can be given a cursor.
// Its repair is a person's: the head must come back no lower than any
// cursor ever handed out, which devices may hold past what outbox keeps.
var ErrNoHead = errors.New("postgres: table outbox_head has lost its row, so no outbox cursor can be handed out until it is restored with a head no lower than any cursor ever handed out")

// AppendEvent adds a durable event to the outbox and returns its cursor and
// the size of its stored body (the event's record).
func (t *Tx) AppendEvent(ev *core.Event) (cursor int64, size int, err error) {
	body, err := record.EncodeEvent(ev)
	if err != nil {
		return 0, 0, err
	}
	r := store.OutboxRowOf(ev)
	// Checked here, not by the statement helpers: a refusal of theirs
	// looks like no row, which is ErrNoHead's sign.
	if !storable([]any{r.Type, r.ChatID, r.ThreadID, r.MessageID}) {
		return 0, 0, ErrNotText.New()
	}
	if !t.locked {
		err = t.tx.QueryRow(t.ctx, `WITH h AS (UPDATE outbox_head SET head = head + 1 RETURNING head)
			INSERT INTO outbox (cursor, type, chat_id, thread_id, message_id, body, ts)
			SELECT head, $1, $2, $3, $4, $5, $6 FROM h RETURNING cursor`,
			r.Type, r.ChatID, r.ThreadID, r.MessageID, body, ev.TS).Scan(&cursor)
		if errors.Is(err, pgx.ErrNoRows) {
			// The UPDATE found no row: the schema is damaged, not the
			// frame; no cursor can be handed out until the row is back.
			return 0, 0, ErrNoHead
		}
		if err != nil {
			return 0, 0, err
		}
		t.locked, t.base, t.head = true, cursor, cursor
		return cursor, len(body), nil
	}
	cursor = t.head + 1
	if _, err := t.exec(`INSERT INTO outbox (cursor, type, chat_id, thread_id, message_id, body, ts) VALUES ($1,$2,$3,$4,$5,$6,$7)`,
		cursor, r.Type, r.ChatID, r.ThreadID, r.MessageID, body, ev.TS); err != nil {
		return 0, 0, err
	}
	t.head = cursor
	return cursor, len(body), nil
}

// storeHead writes the cursors counted in memory back to outbox_head,
// before the transaction commits.
func (t *Tx) storeHead() error {
	if !t.locked || t.head == t.base {
		return nil
	}
	_, err := t.exec(`UPDATE outbox_head SET head = $1`, t.head)
	return err
}

// OutboxHead returns the newest cursor ever assigned (0 for none).
func (s *Store) OutboxHead(ctx context.Context) (int64, error) {
	var head int64
	err := s.queryRow(ctx, `SELECT head FROM outbox_head`).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNoHead
	}
	return head, err
}

// OutboxFloor returns the highest cursor removed by retention: a sync from
// below it cannot be complete.
func (s *Store) OutboxFloor(ctx context.Context) (int64, error) {
	var v string
	err := s.queryRow(ctx, `SELECT value FROM meta WHERE key = 'outbox_floor'`).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// ScanOutbox calls fn for each row with after < cursor <= upto, in order,
// reading in pages so a long replay holds neither a big result in memory
// nor a connection for its whole length.
func (s *Store) ScanOutbox(ctx context.Context, after, upto int64, fn func(store.OutboxRow) error) error {
	const page = 1000
	buf := make([]store.OutboxRow, 0, page)
	for {
		buf = buf[:0]
		rows, err := s.query(ctx, `SELECT cursor, type, chat_id, thread_id, message_id, body, ts FROM outbox
			WHERE cursor > $1 AND cursor <= $2 ORDER BY cursor LIMIT $3`, after, upto, page)
		if err != nil {
			return err
		}
		for rows.Next() {
			var r store.OutboxRow
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
// the scan with a *store.CorruptError: a replay never leaves a frame out
// silently.
func (s *Store) ScanEvents(ctx context.Context, after, upto int64, fn func(*core.Event) error) error {
	return s.ScanOutbox(ctx, after, upto, func(r store.OutboxRow) error {
		ev, err := record.DecodeEvent(r.Body)
		if err != nil {
			return &store.CorruptError{Table: "outbox", Key: strconv.FormatInt(r.Cursor, 10), Err: err}
		}
		ev.Cursor = r.Cursor
		return fn(ev)
	})
}

// ScanEventsSkipping is ScanEvents for a replay that must go on past a
// row that does not decode: such a row is handed to bad (with the error
// naming it) instead of stopping the scan.
func (s *Store) ScanEventsSkipping(ctx context.Context, after, upto int64, fn func(*core.Event) error, bad func(cursor int64, err *store.CorruptError)) error {
	return s.ScanOutbox(ctx, after, upto, func(r store.OutboxRow) error {
		ev, err := record.DecodeEvent(r.Body)
		if err != nil {
			bad(r.Cursor, &store.CorruptError{Table: "outbox", Key: strconv.FormatInt(r.Cursor, 10), Err: err})
			return nil
		}
		ev.Cursor = r.Cursor
		return fn(ev)
	})
}

// OutboxCursors returns up to limit cursors of frames with after < cursor
// <= upto, in order: which frames still exist, without their bodies.
func (s *Store) OutboxCursors(ctx context.Context, after, upto int64, limit int) ([]int64, error) {
	rows, err := s.query(ctx, `SELECT cursor FROM outbox WHERE cursor > $1 AND cursor <= $2 ORDER BY cursor LIMIT $3`, after, upto, limit)
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

// PruneOutbox keeps the newest keep frames and removes those older than
// minTS (epoch ms), whichever removes more, recording the floor. It works
// in bounded transactions (PruneOutboxSome), so commits go on meanwhile.
func (s *Store) PruneOutbox(ctx context.Context, keep int64, minTS int64) (int64, error) {
	var total int64
	for {
		n, more, err := s.PruneOutboxSome(ctx, keep, minTS, store.PruneChunk)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

// PruneOutboxSome is one bounded step of PruneOutbox: it removes up to n
// of the oldest frames retention removes, and reports whether more wait.
// It takes no cursor, so it does not wait on writers for outbox_head.
func (s *Store) PruneOutboxSome(ctx context.Context, keep, minTS int64, n int) (removed int64, more bool, err error) {
	err = s.write(ctx, func(tx *Tx) error {
		var cut *int64
		if err := tx.queryRow(`SELECT GREATEST(
			(SELECT MAX(cursor) FROM outbox WHERE cursor <= (SELECT MAX(cursor) FROM outbox) - $1),
			(SELECT MAX(cursor) FROM outbox WHERE ts < $2))`, keep, minTS).Scan(&cut); err != nil {
			return err
		}
		if cut == nil {
			return nil
		}
		var upto int64
		if err := tx.queryRow(`SELECT MAX(cursor) FROM (SELECT cursor FROM outbox WHERE cursor <= $1 ORDER BY cursor LIMIT $2) c`, *cut, n).Scan(&upto); err != nil {
			return err
		}
		tag, err := tx.exec(`DELETE FROM outbox WHERE cursor <= $1`, upto)
		if err != nil {
			return err
		}
		removed = tag.RowsAffected()
		more = upto < *cut
		// GREATEST: a floor never moves down, whoever prunes.
		_, err = tx.exec(`INSERT INTO meta (key, value) VALUES ('outbox_floor', $1)
			ON CONFLICT (key) DO UPDATE SET value = GREATEST(meta.value::bigint, excluded.value::bigint)::text`, strconv.FormatInt(upto, 10))
		return err
	})
	return removed, more, err
}

// OutboxLen is how many frames the outbox holds.
func (s *Store) OutboxLen(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM outbox`).Scan(&n)
	return n, err
}
