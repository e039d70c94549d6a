package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// The agent's state per lane: its conversation with the model, the lane's
// settings (both records, package record), and the commands a person
// approved for good.

// maxConversation bounds what is loaded for one turn; the runtime trims
// further to fit the model's window.
const maxConversation = 4000

// AppendConversation adds an entry to a lane's conversation. messageID,
// when set, ties it to a chat message so deleting that message deletes it.
func (t *sqliteTx) AppendConversation(lane core.Lane, messageID string, e record.ConversationEntry) error {
	body, err := record.EncodeConversation(e)
	if err != nil {
		return err
	}
	if _, err = t.exec(`INSERT INTO conversation (chat_id, thread_id, message_id, body) VALUES (?,?,?,?)`,
		lane.ChatID, lane.ThreadID, messageID, body); err != nil {
		return err
	}
	t.conv.appended = append(t.conv.appended, convAppend{lane: lane, entry: cloneEntry(e), size: len(body)})
	return nil
}

// Conversation returns a lane's newest entries, oldest first. An entry
// that does not decode fails the read (*CorruptError): a model given a
// conversation with a hole in it would answer something else.
func (s *Store) Conversation(ctx context.Context, lane core.Lane) ([]record.ConversationEntry, error) {
	if entries, ok := s.conv.get(lane); ok {
		return entries, nil
	}
	gen := s.conv.begin()
	rows, err := s.query(ctx, `SELECT seq, body FROM (SELECT seq, body FROM conversation WHERE chat_id = ? AND thread_id = ?
		ORDER BY seq DESC LIMIT ?) ORDER BY seq`, lane.ChatID, lane.ThreadID, maxConversation)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []record.ConversationEntry
	var sizes []int
	for rows.Next() {
		var seq int64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			return nil, err
		}
		e, err := record.DecodeConversation(b)
		if err != nil {
			return nil, &CorruptError{Table: "conversation", Key: strconv.FormatInt(seq, 10), Err: err}
		}
		out = append(out, e)
		sizes = append(sizes, len(b))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.conv.put(gen, lane, out, sizes)
	return out, nil
}

// ConversationLen counts a lane's conversation entries without reading
// them, so /new and /status work on a conversation that does not decode.
func (s *Store) ConversationLen(ctx context.Context, lane core.Lane) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM conversation WHERE chat_id = ? AND thread_id = ?`, lane.ChatID, lane.ThreadID).Scan(&n)
	return n, err
}

// ClearConversation starts a lane's conversation afresh (/new).
func (t *sqliteTx) ClearConversation(lane core.Lane) error {
	t.conv.lanes = append(t.conv.lanes, lane)
	_, err := t.exec(`DELETE FROM conversation WHERE chat_id = ? AND thread_id = ?`, lane.ChatID, lane.ThreadID)
	return err
}

// TruncateConversation removes the entry tied to messageID and every later
// entry of its lane (/undo, /retry).
func (t *sqliteTx) TruncateConversation(lane core.Lane, messageID string) error {
	t.conv.lanes = append(t.conv.lanes, lane)
	_, err := t.exec(truncateConversation, lane.ChatID, lane.ThreadID, messageID, lane.ChatID, lane.ThreadID)
	return err
}

// truncateConversation finds the entry by its message alone (the partial
// index conversation_message, which the term that message_id is not empty
// lets serve; +chat_id keeps conversation_lane out), then deletes the
// lane's tail from it.
// Found through the lane, it walked the lane's whole conversation.
const truncateConversation = `DELETE FROM conversation WHERE chat_id = ? AND thread_id = ? AND seq >=
	(SELECT MIN(seq) FROM conversation WHERE message_id = ? AND message_id != '' AND +chat_id = ? AND +thread_id = ?)`

// LaneSettings returns a lane's settings (zero ones when it has none).
func (s *Store) LaneSettings(ctx context.Context, lane core.Lane) (record.LaneSettings, error) {
	if ls, ok := s.sets.get(lane); ok {
		return ls, nil
	}
	gen := s.sets.begin()
	var b []byte
	err := s.pointRow(ctx, `SELECT body FROM lane_settings WHERE chat_id = ? AND thread_id = ?`, lane.ChatID, lane.ThreadID).Scan(&b)
	if err == sql.ErrNoRows {
		ls := record.LaneSettings{V: record.Version}
		s.sets.put(gen, lane, ls)
		return ls, nil
	}
	if err != nil {
		return record.LaneSettings{}, err
	}
	ls, err := record.DecodeLaneSettings(b)
	if err != nil {
		return record.LaneSettings{}, &CorruptError{Table: "lane_settings", Key: lane.String(), Err: err}
	}
	s.sets.put(gen, lane, ls)
	return ls, nil
}

// SetLaneSettings stores a lane's settings.
func (t *sqliteTx) SetLaneSettings(lane core.Lane, ls record.LaneSettings) error {
	body, err := record.EncodeLaneSettings(ls)
	if err != nil {
		return err
	}
	t.sets.lanes = append(t.sets.lanes, lane)
	_, err = t.exec(`INSERT INTO lane_settings (chat_id, thread_id, body) VALUES (?,?,?)
		ON CONFLICT (chat_id, thread_id) DO UPDATE SET body = excluded.body`, lane.ChatID, lane.ThreadID, body)
	return err
}

// Approved reports whether a command was approved "always".
func (s *Store) Approved(ctx context.Context, command string) (bool, error) {
	var n int
	err := s.pointRow(ctx, `SELECT COUNT(*) FROM approvals WHERE command = ?`, command).Scan(&n)
	return n > 0, err
}

// Approve remembers a command as approved for good.
func (s *Store) Approve(ctx context.Context, command string) error {
	_, err := s.exec(ctx, `INSERT INTO approvals (command, created) VALUES (?, ?) ON CONFLICT DO NOTHING`, command, now())
	return err
}

// QueuedTurn is a turn the gateway owes a lane: a person's message waiting
// for (or getting) its answer (a sent message, or steering the running
// turn has not taken yet), or a cron job's prompt (a cron turn). Kept so a
// restart answers it.
type QueuedTurn struct {
	MessageID string // a cron turn's is its CronTurnID: it has no message
	Lane      core.Lane
	Running   bool
	CronJob   string // the job a cron turn runs; empty for a person's turn
	// ReplyID is the id the running turn's reply streams under, stored
	// when it starts: its message.start goes out before the reply's row
	// is committed, so recovery needs it to end a stream whose row never
	// landed. Empty for a turn that has not started or streams nothing.
	ReplyID string
}

// turnReplySchema keeps a running turn's reply id (QueuedTurn.ReplyID).
const turnReplySchema = `
ALTER TABLE turns ADD COLUMN reply_id TEXT NOT NULL DEFAULT '';
`

// CronTurnPrefix marks a cron turn's id. A cron turn stores no message (its
// prompt is the job's, its answer a cron message posted at its end), so its
// row is keyed by an id naming the job instead.
const CronTurnPrefix = "cron:"

// CronTurnID makes the id of one run of job jobID as a turn, unique per run
// so two runs of a job queued in a lane do not share a row.
func CronTurnID(jobID string) string {
	return CronTurnPrefix + core.NewID("") + ":" + jobID
}

// CronJobOf returns the job a turn id names; empty for a person's turn.
func CronJobOf(id string) string {
	rest, ok := strings.CutPrefix(id, CronTurnPrefix)
	if !ok {
		return ""
	}
	_, job, _ := strings.Cut(rest, ":")
	return job
}

// QueueTurn records that messageID awaits an agent turn.
func (t *sqliteTx) QueueTurn(lane core.Lane, messageID string) error {
	return t.queue(turnShape, messageID, lane.ChatID, lane.ThreadID)
}

// StartTurn marks a turn as running, its reply streaming as replyID.
func (t *sqliteTx) StartTurn(messageID, replyID string) error {
	_, err := t.exec(`UPDATE turns SET running = 1, reply_id = ? WHERE message_id = ?`, replyID, messageID)
	return err
}

// EndTurn forgets a finished turn.
func (t *sqliteTx) EndTurn(messageID string) error {
	_, err := t.exec(`DELETE FROM turns WHERE message_id = ?`, messageID)
	return err
}

// Turns lists the turns owed that the gateway settles at start-up, oldest
// first: every person's turn, and the cron turns that were running (they
// get their agent.idle and are not run again, like a person's). A cron turn
// that never started is not listed: OwedCronRuns hands it to the scheduler,
// which makes its job due again (package cron).
func (s *Store) Turns(ctx context.Context) ([]QueuedTurn, error) {
	return s.turns(ctx, `SELECT message_id, chat_id, thread_id, running, reply_id FROM turns
		WHERE running = 1 OR message_id NOT LIKE '`+CronTurnPrefix+`%' ORDER BY seq`)
}

// OwedCronRuns lists the cron turns the last run queued but never started,
// oldest first.
func (s *Store) OwedCronRuns(ctx context.Context) ([]QueuedTurn, error) {
	return s.turns(ctx, `SELECT message_id, chat_id, thread_id, running, reply_id FROM turns
		WHERE running = 0 AND message_id LIKE '`+CronTurnPrefix+`%' ORDER BY seq`)
}

// ForgetTurn drops a turn's row outside the gateway's commits: the
// scheduler does so once it has taken over an owed cron run.
func (s *Store) ForgetTurn(ctx context.Context, messageID string) error {
	_, err := s.exec(ctx, `DELETE FROM turns WHERE message_id = ?`, messageID)
	return err
}

func (s *Store) turns(ctx context.Context, q string) ([]QueuedTurn, error) {
	rows, err := s.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []QueuedTurn
	for rows.Next() {
		var q QueuedTurn
		var running int
		if err := rows.Scan(&q.MessageID, &q.Lane.ChatID, &q.Lane.ThreadID, &running, &q.ReplyID); err != nil {
			return nil, err
		}
		q.Running = running == 1
		q.CronJob = CronJobOf(q.MessageID)
		out = append(out, q)
	}
	return out, rows.Err()
}
