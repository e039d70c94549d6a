package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// Message states.
const (
	stateFinal     = 0
	stateStreaming = 1
	stateStopped   = 2
)

// InsertMessage adds a message to its lane's history. A message whose
// streaming flag is set is a reply still being written (see FinishMessage).
func (t *sqliteTx) InsertMessage(m core.Message, streaming bool) error {
	state := stateFinal
	if streaming {
		state = stateStreaming
	} else if m.Stopped {
		state = stateStopped
	}
	media, runtime, err := encodeExtras(m)
	if err != nil {
		return err
	}
	err = t.queue(messageShape, m.ID, m.Lane.ChatID, m.Lane.ThreadID, m.Role, m.Text, m.Reasoning, media, m.ReplyTo, m.Model, m.Tokens, runtime, m.TS, state)
	t.indexes = t.indexes || state != stateStreaming
	t.hist.lane(m.Lane)
	return err
}

// SaveProgress records the text so far of a streaming reply, so a crash
// loses at most what was streamed since the last call.
func (t *sqliteTx) SaveProgress(id, text, reasoning string) error {
	t.hist.id(id)
	_, err := t.exec(`UPDATE messages SET text = ?, reasoning = ? WHERE id = ? AND state = ?`, text, reasoning, id, stateStreaming)
	return err
}

// FinishMessage replaces a streaming reply with its final form.
func (t *sqliteTx) FinishMessage(m core.Message) error {
	media, runtime, err := encodeExtras(m)
	if err != nil {
		return err
	}
	state := stateFinal
	if m.Stopped {
		state = stateStopped
	}
	t.hist.id(m.ID)
	res, err := t.exec(`UPDATE messages SET text=?, reasoning=?, media=?, model=?, tokens=?, runtime=?, state=? WHERE id = ?`,
		m.Text, m.Reasoning, media, m.Model, m.Tokens, runtime, state, m.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound // deleted while it streamed
	}
	t.indexes = true
	return nil
}

// DeleteMessages removes a lane's messages with their read state, their
// entries in the agent's conversation and their outbox frames
// (but not message.deleted frames, which are how devices learn of it).
func (t *sqliteTx) DeleteMessages(lane core.Lane, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// Only ids of this lane: a device may not delete elsewhere by naming
	// another lane's ids.
	t.hist.lane(lane)
	t.conv.lanes = append(t.conv.lanes, lane)
	in, args := inList(ids)
	args = append(args, lane.ChatID, lane.ThreadID)
	for _, q := range deleteMessagesQueries(in) {
		if _, err := t.exec(q, args...); err != nil {
			return err
		}
	}
	return nil
}

// deleteMessagesQueries are DeleteMessages's statements for the ids'
// placeholder list in (a test reads their plans). Each table is searched
// by the ids alone: the lane's columns are written +chat_id, which no
// index serves, and the term that message_id is not empty is what lets
// the partial indexes on message_id serve. Without them SQLite's planner (no statistics) walked
// the whole lane for reads and conversation, and the whole outbox, at
// every delete: 88 ms in the writer's transaction at 100,000 messages.
// The term also keeps an empty id from naming the lane's frames and
// entries that belong to no message.
func deleteMessagesQueries(in string) []string {
	const inLane = ` AND +chat_id = ? AND +thread_id = ?`
	const some = `message_id != '' AND message_id IN `
	return []string{
		`DELETE FROM messages WHERE id IN ` + in + inLane,
		`DELETE FROM reads WHERE message_id IN ` + in + inLane,
		`DELETE FROM outbox WHERE type != 'message.deleted' AND ` + some + in + inLane,
		`DELETE FROM conversation WHERE ` + some + in + inLane,
		`DELETE FROM turns WHERE message_id IN ` + in + inLane,
	}
}

// Streaming returns the replies left streaming by a crash.
func (s *Store) Streaming(ctx context.Context) ([]core.Message, error) {
	return s.queryMessages(ctx, `SELECT `+msgCols+` FROM messages WHERE state = 1 ORDER BY seq`)
}

// Message returns one message.
func (s *Store) Message(ctx context.Context, id string) (core.Message, error) {
	ms, err := s.queryMessages(ctx, `SELECT `+msgCols+` FROM messages WHERE id = ?`, id)
	if err != nil {
		return core.Message{}, err
	}
	if len(ms) == 0 {
		return core.Message{}, ErrNotFound
	}
	return ms[0], nil
}

// History returns up to limit messages of a lane older than beforeID (the
// newest when beforeID is empty), oldest first, and whether older ones exist.
// The newest page of a lane read lately comes from memory (histcache.go).
func (s *Store) History(ctx context.Context, lane core.Lane, beforeID string, limit int) ([]core.Message, bool, error) {
	if beforeID != "" || limit <= 0 || limit > histMaxLimit {
		return s.historyQuery(ctx, lane, beforeID, limit)
	}
	if ms, more, ok := s.hist.get(lane, limit); ok {
		return ms, more, nil
	}
	gen := s.hist.begin()
	ms, more, err := s.historyQuery(ctx, lane, "", limit)
	if err == nil {
		s.hist.put(gen, lane, ms, more)
	}
	return ms, more, err
}

// historyQuery is History read from the database.
func (s *Store) historyQuery(ctx context.Context, lane core.Lane, beforeID string, limit int) ([]core.Message, bool, error) {
	before := int64(1 << 62)
	if beforeID != "" {
		err := s.pointRow(ctx, `SELECT seq FROM messages WHERE id = ? AND chat_id = ? AND thread_id = ?`,
			beforeID, lane.ChatID, lane.ThreadID).Scan(&before)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, ErrNotFound
		}
		if err != nil {
			return nil, false, err
		}
	}
	ms, err := s.queryMessages(ctx, `SELECT `+msgCols+` FROM messages WHERE chat_id = ? AND thread_id = ? AND seq < ?
		ORDER BY seq DESC LIMIT ?`, lane.ChatID, lane.ThreadID, before, limit+1)
	if err != nil {
		return nil, false, err
	}
	more := len(ms) > limit
	if more {
		ms = ms[:limit]
	}
	slices.Reverse(ms)
	return ms, more, nil
}

const msgCols = `id, chat_id, thread_id, role, text, reasoning, media, reply_to, model, tokens, runtime, ts, state`

func (s *Store) queryMessages(ctx context.Context, q string, args ...any) ([]core.Message, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Message
	for rows.Next() {
		var m core.Message
		var media, runtime string
		var state int
		if err := rows.Scan(&m.ID, &m.Lane.ChatID, &m.Lane.ThreadID, &m.Role, &m.Text, &m.Reasoning, &media, &m.ReplyTo,
			&m.Model, &m.Tokens, &runtime, &m.TS, &state); err != nil {
			return nil, err
		}
		m.Stopped = state == stateStopped
		var err error
		if m.Media, err = record.DecodeMedia(media); err != nil {
			return nil, &CorruptError{Table: "messages", Key: m.ID + " media", Err: err}
		}
		if m.Runtime, err = record.DecodeRuntime(runtime); err != nil {
			return nil, &CorruptError{Table: "messages", Key: m.ID + " runtime", Err: err}
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// encodeExtras serialises the optional parts of a message for their columns.
func encodeExtras(m core.Message) (media, runtime string, err error) {
	if media, err = record.EncodeMedia(m.Media); err != nil {
		return "", "", err
	}
	runtime, err = record.EncodeRuntime(m.Runtime)
	return media, runtime, err
}

func inList(ids []string) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")", args
}

// MarkRead stores that a device has seen a message.
func (t *sqliteTx) MarkRead(lane core.Lane, messageID, deviceID string, ts int64) error {
	_, err := t.exec(`INSERT INTO reads (chat_id, thread_id, message_id, device_id, ts) VALUES (?,?,?,?,?)
		ON CONFLICT (message_id, device_id) DO UPDATE SET ts = excluded.ts`, lane.ChatID, lane.ThreadID, messageID, deviceID, ts)
	return err
}
