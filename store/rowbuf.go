package store

import (
	"database/sql"
	"errors"
	"strings"
)

// A batch of sends inserts, per send, a message, its owed turn and its
// outbox frame. One INSERT a row pays for its own bind, step and reset and,
// in the AUTOINCREMENT tables, a read and a write of sqlite_sequence: a
// third of each row's cost (BenchmarkSendRows). So the transaction keeps
// those rows and puts them in as multi-row INSERTs, in the order they
// came, before it runs any other statement and before it commits: nothing
// in the transaction ever sees the table without them.
//
// A row that fails (a constraint) fails its whole statement, so its error
// reaches the transaction later than the call that made it: the group
// commit asks for it (Tx.Flush) and, as for any failed write, runs the
// batch again with a savepoint per write, and each savepoint puts its rows
// in before it ends.

// insertShape is one table's INSERT with its statements for each chunk.
type insertShape struct {
	cols    int
	queries [len(chunkRows)]string
}

// chunkRows are the rows one statement takes: a few shapes, so their
// prepared statements stay few (maxStmts), and at most 64 (SQLite's
// limit on variables is far off: 64 × 13).
var chunkRows = [...]int{64, 16, 4, 1}

func newShape(head string, cols int, tail string) *insertShape {
	s := &insertShape{cols: cols}
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	for i, n := range chunkRows {
		s.queries[i] = head + " VALUES " + strings.TrimSuffix(strings.Repeat(tuple+",", n), ",") + tail
	}
	return s
}

var (
	messageShape = newShape(`INSERT INTO messages (id, chat_id, thread_id, role, text, reasoning, media, reply_to, model, tokens, runtime, ts, state)`, 13, "")
	turnShape    = newShape(`INSERT INTO turns (message_id, chat_id, thread_id)`, 3, ` ON CONFLICT DO NOTHING`)
	outboxShape  = newShape(`INSERT INTO outbox (cursor, type, chat_id, thread_id, message_id, body, ts)`, 7, "")
)

// pendingRows are one table's rows not yet inserted.
type pendingRows struct {
	shape *insertShape
	args  []any
}

// rowBuffer is a transaction's rows not yet inserted, and the outbox's
// head so that AppendEvent can name its cursor before its row goes in.
type rowBuffer struct {
	tables []*pendingRows
	n      int // rows waiting, in all
	// head is the newest cursor the transaction has assigned, known once
	// it has read sqlite_sequence.
	head      int64
	headKnown bool
	// err is a failed insert's, which every later statement of the
	// transaction (or of its savepoint) returns.
	err error
}

// add queues one row of shape.
func (b *rowBuffer) add(shape *insertShape, args ...any) {
	var p *pendingRows
	for _, t := range b.tables {
		if t.shape == shape {
			p = t
		}
	}
	if p == nil {
		p = &pendingRows{shape: shape}
		b.tables = append(b.tables, p)
	}
	p.args = append(p.args, args...)
	b.n++
}

// discard forgets the waiting rows: the savepoint that made them failed.
func (b *rowBuffer) discard() {
	for _, t := range b.tables {
		clear(t.args)
		t.args = t.args[:0]
	}
	b.n = 0
}

// queue adds a row to the transaction's buffer.
func (t *sqliteTx) queue(shape *insertShape, args ...any) error {
	if t.rows.err != nil {
		return t.rows.err
	}
	t.rows.add(shape, args...)
	return nil
}

// Flush inserts the rows waiting and returns the error of any that
// failed.
func (t *sqliteTx) Flush() error {
	if t.rows.err != nil || t.rows.n == 0 {
		return t.rows.err
	}
	for _, p := range t.rows.tables {
		args := p.args
		for len(args) > 0 {
			rows := len(args) / p.shape.cols
			i := 0
			for chunkRows[i] > rows {
				i++
			}
			n := chunkRows[i] * p.shape.cols
			if _, err := t.execNow(p.shape.queries[i], args[:n]...); err != nil {
				t.rows.discard()
				t.rows.err = err
				return err
			}
			args = args[n:]
		}
		clear(p.args)
		p.args = p.args[:0]
	}
	t.rows.n = 0
	return nil
}

// nextCursor is the cursor of the next outbox row. AUTOINCREMENT keeps the
// newest ever assigned in sqlite_sequence; the writer's transaction holds
// the write lock, so no one else assigns one meanwhile. Rows waiting can
// stay so: none of them is the outbox's before its head is known.
func (t *sqliteTx) nextCursor() (int64, error) {
	if !t.rows.headKnown {
		var head sql.NullInt64
		err := t.queryRowNow(`SELECT seq FROM sqlite_sequence WHERE name = 'outbox'`).Scan(&head)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		t.rows.head, t.rows.headKnown = head.Int64, true
	}
	t.rows.head++
	return t.rows.head, nil
}
