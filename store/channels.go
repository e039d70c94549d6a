package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/irisgate/irisgate/core"
)

const channelCols = `chat_id, name, kind, parent, is_default, auto, favorite, icon, color, automation`

type scanner interface{ Scan(...any) error }

func scanChannel(r scanner) (core.Channel, error) {
	var c core.Channel
	var def, auto, fav, autom int
	err := r.Scan(&c.ChatID, &c.Name, &c.Kind, &c.ParentChatID, &def, &auto, &fav, &c.Icon, &c.Color, &autom)
	c.IsDefault, c.Auto, c.Favorite, c.Automation = def == 1, auto == 1, fav == 1, autom == 1
	return c, err
}

// Channels returns the whole directory: favourites first, then by creation.
func (s *Store) Channels(ctx context.Context) ([]core.Channel, error) {
	rows, err := s.query(ctx, `SELECT `+channelCols+` FROM channels ORDER BY favorite DESC, created, chat_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Channel
	for rows.Next() {
		c, err := scanChannel(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Channel returns one directory entry.
func (s *Store) Channel(ctx context.Context, chatID string) (core.Channel, error) {
	return getChannel(s.pointRow(ctx, `SELECT `+channelCols+` FROM channels WHERE chat_id = ?`, chatID))
}

// Channel reads an entry inside a write transaction.
func (t *sqliteTx) Channel(chatID string) (core.Channel, error) {
	return getChannel(t.queryRow(`SELECT `+channelCols+` FROM channels WHERE chat_id = ?`, chatID))
}

// ChannelCount counts the channels and threads.
func (t *sqliteTx) ChannelCount() (int, error) {
	var n int
	err := t.queryRow(`SELECT COUNT(*) FROM channels`).Scan(&n)
	return n, err
}

func getChannel(row *sql.Row) (core.Channel, error) {
	c, err := scanChannel(row)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	return c, err
}

// IconBytes is the size of the directory's icons (as stored, base64),
// but for chatID's.
func (t *sqliteTx) IconBytes(except string) (int64, error) {
	var n int64
	err := t.queryRow(`SELECT COALESCE(SUM(LENGTH(icon)), 0) FROM channels WHERE chat_id != ?`, except).Scan(&n)
	return n, err
}

// PutChannel inserts or replaces a directory entry.
func (t *sqliteTx) PutChannel(c core.Channel) error {
	_, err := t.exec(`INSERT INTO channels (`+channelCols+`, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (chat_id) DO UPDATE SET name=excluded.name, kind=excluded.kind, parent=excluded.parent,
		is_default=excluded.is_default, auto=excluded.auto, favorite=excluded.favorite, icon=excluded.icon,
		color=excluded.color, automation=excluded.automation`,
		c.ChatID, c.Name, c.Kind, c.ParentChatID, b2i(c.IsDefault), b2i(c.Auto), b2i(c.Favorite), c.Icon, c.Color, b2i(c.Automation), now())
	return err
}

// SetDefault moves the default flag to chatID and returns the entries it
// moved away from.
func (t *sqliteTx) SetDefault(chatID string) ([]string, error) {
	rows, err := t.query(`SELECT chat_id FROM channels WHERE is_default = 1 AND chat_id != ?`, chatID)
	if err != nil {
		return nil, err
	}
	var lost []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		lost = append(lost, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	_, err = t.exec(`UPDATE channels SET is_default = (chat_id = ?)`, chatID)
	return lost, err
}

// DeleteChannel removes a channel (or thread) with its threads, their
// history, read state and outbox frames. It returns the removed entries.
func (t *sqliteTx) DeleteChannel(chatID string) ([]core.Channel, error) {
	rows, err := t.query(`SELECT `+channelCols+` FROM channels WHERE chat_id = ? OR parent = ?`, chatID, chatID)
	if err != nil {
		return nil, err
	}
	var gone []core.Channel
	for rows.Next() {
		c, err := scanChannel(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		gone = append(gone, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, c := range gone {
		l := c.Lane()
		t.hist.chat(l.ChatID) // a thread's too: more than it needs, never less
		t.sets.chats = append(t.sets.chats, l.ChatID)
		t.conv.chats = append(t.conv.chats, l.ChatID)
		// A channel's frames carry its chat id, a thread's carry its
		// parent and its own id (see OutboxRow).
		lane := `chat_id = ?`
		args := []any{l.ChatID}
		if c.Kind == core.KindThread {
			lane = `chat_id = ? AND thread_id = ?`
			args = append(args, l.ThreadID)
		}
		for _, q := range deleteLaneQueries(lane) {
			if _, err := t.exec(q, args...); err != nil {
				return nil, err
			}
		}
		if _, err := t.exec(`DELETE FROM channels WHERE chat_id = ?`, c.ChatID); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// deleteLaneQueries are DeleteChannel's statements for a lane's condition
// (a test reads their plans). The outbox's carries the term that chat_id
// is not empty, which lets its partial index outbox_chat serve: without
// it each delete scanned the whole outbox in the writer's transaction.
func deleteLaneQueries(lane string) []string {
	var qs []string
	for _, table := range []string{"outbox", "reads", "messages", "conversation", "lane_settings", "turns"} {
		where := lane
		if table == "outbox" {
			where = `chat_id != '' AND ` + lane
		}
		qs = append(qs, `DELETE FROM `+table+` WHERE `+where)
	}
	return qs
}
