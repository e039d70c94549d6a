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

// The agent's state per lane: its conversation with the model, the lane's
// settings (both records), the commands approved for good, and the turns
// owed.

// maxConversation bounds what is loaded for one turn, as in SQLite.
const maxConversation = 4000

// AppendConversation adds an entry to a lane's conversation. messageID,
// when set, ties it to a chat message so deleting that message deletes it.
func (t *Tx) AppendConversation(lane core.Lane, messageID string, e record.ConversationEntry) error {
	body, err := record.EncodeConversation(e)
	if err != nil {
		return err
	}
	_, err = t.exec(`INSERT INTO conversation (chat_id, thread_id, message_id, body) VALUES ($1,$2,$3,$4)`,
		lane.ChatID, lane.ThreadID, messageID, string(body))
	return err
}

// Conversation returns a lane's newest entries, oldest first. An entry
// that does not decode fails the read (*store.CorruptError).
func (s *Store) Conversation(ctx context.Context, lane core.Lane) ([]record.ConversationEntry, error) {
	rows, err := s.query(ctx, `SELECT seq, body FROM (SELECT seq, body FROM conversation WHERE chat_id = $1 AND thread_id = $2
		ORDER BY seq DESC LIMIT $3) c ORDER BY seq`, lane.ChatID, lane.ThreadID, maxConversation)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []record.ConversationEntry
	for rows.Next() {
		var seq int64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			return nil, err
		}
		e, err := record.DecodeConversation(b)
		if err != nil {
			return nil, &store.CorruptError{Table: "conversation", Key: strconv.FormatInt(seq, 10), Err: err}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ConversationLen counts a lane's conversation entries without reading
// them, so /new and /status work on a conversation that does not decode.
func (s *Store) ConversationLen(ctx context.Context, lane core.Lane) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM conversation WHERE chat_id = $1 AND thread_id = $2`, lane.ChatID, lane.ThreadID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// ClearConversation starts a lane's conversation afresh (/new).
func (t *Tx) ClearConversation(lane core.Lane) error {
	_, err := t.exec(`DELETE FROM conversation WHERE chat_id = $1 AND thread_id = $2`, lane.ChatID, lane.ThreadID)
	return err
}

// TruncateConversation removes the entry tied to messageID and every later
// entry of its lane (/undo, /retry).
func (t *Tx) TruncateConversation(lane core.Lane, messageID string) error {
	_, err := t.exec(`DELETE FROM conversation WHERE chat_id = $1 AND thread_id = $2 AND seq >=
		(SELECT MIN(seq) FROM conversation WHERE message_id = $3 AND chat_id = $1 AND thread_id = $2)`,
		lane.ChatID, lane.ThreadID, messageID)
	return err
}

// LaneSettings returns a lane's settings (zero ones when it has none).
func (s *Store) LaneSettings(ctx context.Context, lane core.Lane) (record.LaneSettings, error) {
	var b []byte
	err := s.queryRow(ctx, `SELECT body FROM lane_settings WHERE chat_id = $1 AND thread_id = $2`, lane.ChatID, lane.ThreadID).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return record.LaneSettings{V: record.Version}, nil
	}
	if err != nil {
		return record.LaneSettings{}, err
	}
	ls, err := record.DecodeLaneSettings(b)
	if err != nil {
		return record.LaneSettings{}, &store.CorruptError{Table: "lane_settings", Key: lane.String(), Err: err}
	}
	return ls, nil
}

// SetLaneSettings stores a lane's settings.
func (t *Tx) SetLaneSettings(lane core.Lane, ls record.LaneSettings) error {
	body, err := record.EncodeLaneSettings(ls)
	if err != nil {
		return err
	}
	_, err = t.exec(`INSERT INTO lane_settings (chat_id, thread_id, body) VALUES ($1,$2,$3)
		ON CONFLICT (chat_id, thread_id) DO UPDATE SET body = excluded.body`, lane.ChatID, lane.ThreadID, string(body))
	return err
}

// Approved reports whether a command was approved "always".
func (s *Store) Approved(ctx context.Context, command string) (bool, error) {
	var ok bool
	err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM approvals WHERE command = $1)`, command).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

// Approve remembers a command as approved for good.
func (s *Store) Approve(ctx context.Context, command string) error {
	_, err := s.exec(ctx, `INSERT INTO approvals (command, created) VALUES ($1, $2) ON CONFLICT DO NOTHING`, command, now())
	return err
}

// QueueTurn records that messageID awaits an agent turn.
func (t *Tx) QueueTurn(lane core.Lane, messageID string) error {
	_, err := t.exec(`INSERT INTO turns (message_id, chat_id, thread_id) VALUES ($1,$2,$3) ON CONFLICT DO NOTHING`,
		messageID, lane.ChatID, lane.ThreadID)
	return err
}

// StartTurn marks a turn as running, its reply streaming as replyID.
func (t *Tx) StartTurn(messageID, replyID string) error {
	_, err := t.exec(`UPDATE turns SET running = true, reply_id = $2 WHERE message_id = $1`, messageID, replyID)
	return err
}

// EndTurn forgets a finished turn.
func (t *Tx) EndTurn(messageID string) error {
	_, err := t.exec(`DELETE FROM turns WHERE message_id = $1`, messageID)
	return err
}

// cronTurn matches the ids of cron turns (store.CronTurnID).
const cronTurn = `starts_with(message_id, '` + store.CronTurnPrefix + `')`

// Turns lists the turns owed that the gateway settles at start-up, oldest
// first: every person's turn, and the cron turns that were running. A cron
// turn that never started is OwedCronRuns' (package store says why).
func (s *Store) Turns(ctx context.Context) ([]store.QueuedTurn, error) {
	return s.turns(ctx, `SELECT message_id, chat_id, thread_id, running, reply_id FROM turns WHERE running OR NOT `+cronTurn+` ORDER BY seq`)
}

// OwedCronRuns lists the cron turns the last run queued but never started,
// oldest first.
func (s *Store) OwedCronRuns(ctx context.Context) ([]store.QueuedTurn, error) {
	return s.turns(ctx, `SELECT message_id, chat_id, thread_id, running, reply_id FROM turns WHERE NOT running AND `+cronTurn+` ORDER BY seq`)
}

// ForgetTurn drops a turn's row outside the gateway's commits: the
// scheduler does so once it has taken over an owed cron run.
func (s *Store) ForgetTurn(ctx context.Context, messageID string) error {
	_, err := s.exec(ctx, `DELETE FROM turns WHERE message_id = $1`, messageID)
	return err
}

func (s *Store) turns(ctx context.Context, q string) ([]store.QueuedTurn, error) {
	rows, err := s.query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.QueuedTurn
	for rows.Next() {
		var q store.QueuedTurn
		if err := rows.Scan(&q.MessageID, &q.Lane.ChatID, &q.Lane.ThreadID, &q.Running, &q.ReplyID); err != nil {
			return nil, err
		}
		q.CronJob = store.CronJobOf(q.MessageID)
		out = append(out, q)
	}
	return out, rows.Err()
}
