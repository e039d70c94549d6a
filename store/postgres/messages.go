package postgres

import (
	"context"
	"errors"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
	"github.com/jackc/pgx/v5"
)

// Message states, as package store's.
const (
	stateFinal     = 0
	stateStreaming = 1
	stateStopped   = 2
)

// InsertMessage adds a message to its lane's history, and to search unless
// it is a reply still being written (streaming; see FinishMessage).
func (t *Tx) InsertMessage(m core.Message, streaming bool) error {
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
	var words *string
	if !streaming {
		v := tsvector(m.Text)
		words = &v
	}
	_, err = t.exec(`INSERT INTO messages (id, chat_id, thread_id, role, text, reasoning, media, reply_to, model, tokens, runtime, ts, state, search)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14::text::tsvector)`,
		m.ID, m.Lane.ChatID, m.Lane.ThreadID, m.Role, m.Text, m.Reasoning, media, m.ReplyTo, m.Model, m.Tokens, runtime, m.TS, state, words)
	return err
}

// SaveProgress records the text so far of a streaming reply, so a crash
// loses at most what was streamed since the last call.
func (t *Tx) SaveProgress(id, text, reasoning string) error {
	_, err := t.exec(`UPDATE messages SET text = $1, reasoning = $2 WHERE id = $3 AND state = $4`, text, reasoning, id, stateStreaming)
	return err
}

// FinishMessage replaces a streaming reply with its final form, which
// search then finds (again, with its new text, when finished twice).
func (t *Tx) FinishMessage(m core.Message) error {
	media, runtime, err := encodeExtras(m)
	if err != nil {
		return err
	}
	state := stateFinal
	if m.Stopped {
		state = stateStopped
	}
	tag, err := t.exec(`UPDATE messages SET text=$1, reasoning=$2, media=$3, model=$4, tokens=$5, runtime=$6, state=$7, search=$8::text::tsvector WHERE id = $9`,
		m.Text, m.Reasoning, media, m.Model, m.Tokens, runtime, state, tsvector(m.Text), m.ID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound // deleted while it streamed
	}
	return nil
}

// DeleteMessages removes a lane's messages with their read state, their
// entries in the agent's conversation, their turns and their outbox frames
// (but not message.deleted frames, which are how devices learn of it);
// their media rows go with them (a trigger).
func (t *Tx) DeleteMessages(lane core.Lane, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// Only ids of this lane: a device may not delete elsewhere by naming
	// another lane's ids.
	const inLane = ` AND chat_id = $2 AND thread_id = $3`
	for _, q := range []string{
		`DELETE FROM messages WHERE id = ANY($1)` + inLane,
		`DELETE FROM reads WHERE message_id = ANY($1)` + inLane,
		`DELETE FROM outbox WHERE type != 'message.deleted' AND message_id = ANY($1)` + inLane,
		`DELETE FROM conversation WHERE message_id = ANY($1)` + inLane,
		`DELETE FROM turns WHERE message_id = ANY($1)` + inLane,
	} {
		if _, err := t.exec(q, ids, lane.ChatID, lane.ThreadID); err != nil {
			return err
		}
	}
	return nil
}

// MarkRead stores that a device has seen a message.
func (t *Tx) MarkRead(lane core.Lane, messageID, deviceID string, ts int64) error {
	_, err := t.exec(`INSERT INTO reads (chat_id, thread_id, message_id, device_id, ts) VALUES ($1,$2,$3,$4,$5)
		ON CONFLICT (message_id, device_id) DO UPDATE SET ts = excluded.ts`, lane.ChatID, lane.ThreadID, messageID, deviceID, ts)
	return err
}

// Streaming returns the replies left streaming by a crash.
func (s *Store) Streaming(ctx context.Context) ([]core.Message, error) {
	return s.queryMessages(ctx, `SELECT `+msgCols+` FROM messages WHERE state = 1 ORDER BY seq`)
}

// Message returns one message.
func (s *Store) Message(ctx context.Context, id string) (core.Message, error) {
	ms, err := s.queryMessages(ctx, `SELECT `+msgCols+` FROM messages WHERE id = $1`, id)
	if err != nil {
		return core.Message{}, err
	}
	if len(ms) == 0 {
		return core.Message{}, store.ErrNotFound
	}
	return ms[0], nil
}

// History returns up to limit messages of a lane older than beforeID (the
// newest when beforeID is empty), oldest first, and whether older ones exist.
func (s *Store) History(ctx context.Context, lane core.Lane, beforeID string, limit int) ([]core.Message, bool, error) {
	before := int64(1 << 62)
	if beforeID != "" {
		err := s.queryRow(ctx, `SELECT seq FROM messages WHERE id = $1 AND chat_id = $2 AND thread_id = $3`,
			beforeID, lane.ChatID, lane.ThreadID).Scan(&before)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, store.ErrNotFound
		}
		if err != nil {
			return nil, false, err
		}
	}
	ms, err := s.queryMessages(ctx, `SELECT `+msgCols+` FROM messages WHERE chat_id = $1 AND thread_id = $2 AND seq < $3
		ORDER BY seq DESC LIMIT $4`, lane.ChatID, lane.ThreadID, before, limit+1)
	if err != nil {
		return nil, false, err
	}
	more := len(ms) > limit
	if more {
		ms = ms[:limit]
	}
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
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
		var state int16
		if err := rows.Scan(&m.ID, &m.Lane.ChatID, &m.Lane.ThreadID, &m.Role, &m.Text, &m.Reasoning, &media, &m.ReplyTo,
			&m.Model, &m.Tokens, &runtime, &m.TS, &state); err != nil {
			return nil, err
		}
		m.Stopped = state == stateStopped
		var err error
		if m.Media, err = record.DecodeMedia(media); err != nil {
			return nil, &store.CorruptError{Table: "messages", Key: m.ID + " media", Err: err}
		}
		if m.Runtime, err = record.DecodeRuntime(runtime); err != nil {
			return nil, &store.CorruptError{Table: "messages", Key: m.ID + " runtime", Err: err}
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
