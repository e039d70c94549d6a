package postgres

import (
	"context"
	"errors"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
	"github.com/jackc/pgx/v5"
)

const channelCols = `chat_id, name, kind, parent, is_default, auto, favorite, icon, color, automation`

type scanner interface{ Scan(...any) error }

func scanChannel(r scanner) (core.Channel, error) {
	var c core.Channel
	err := r.Scan(&c.ChatID, &c.Name, &c.Kind, &c.ParentChatID, &c.IsDefault, &c.Auto, &c.Favorite, &c.Icon, &c.Color, &c.Automation)
	return c, err
}

// Channels returns the whole directory: favourites first, then by creation.
func (s *Store) Channels(ctx context.Context) ([]core.Channel, error) {
	rows, err := s.query(ctx, `SELECT `+channelCols+` FROM channels ORDER BY favorite DESC, created, chat_id`)
	if err != nil {
		return nil, err
	}
	return collectChannels(rows)
}

func collectChannels(rows rows) ([]core.Channel, error) {
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
	return getChannel(s.queryRow(ctx, `SELECT `+channelCols+` FROM channels WHERE chat_id = $1`, chatID))
}

// Channel reads an entry inside a write transaction.
func (t *Tx) Channel(chatID string) (core.Channel, error) {
	return getChannel(t.queryRow(`SELECT `+channelCols+` FROM channels WHERE chat_id = $1`, chatID))
}

// ChannelCount counts the channels and threads.
func (t *Tx) ChannelCount() (int, error) {
	var n int
	err := t.queryRow(`SELECT COUNT(*) FROM channels`).Scan(&n)
	return n, err
}

func getChannel(row pgx.Row) (core.Channel, error) {
	c, err := scanChannel(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, store.ErrNotFound
	}
	return c, err
}

// IconBytes is the size of the directory's icons (as stored, base64),
// but for chatID's.
func (t *Tx) IconBytes(except string) (int64, error) {
	var n int64
	err := t.queryRow(`SELECT COALESCE(SUM(length(icon)), 0) FROM channels WHERE chat_id != $1`, except).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		// An id text cannot hold is no entry's: every icon counts.
		err = t.queryRow(`SELECT COALESCE(SUM(length(icon)), 0) FROM channels`).Scan(&n)
	}
	return n, err
}

// PutChannel inserts or replaces a directory entry.
func (t *Tx) PutChannel(c core.Channel) error {
	_, err := t.exec(`INSERT INTO channels (`+channelCols+`, created) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)
		ON CONFLICT (chat_id) DO UPDATE SET name=excluded.name, kind=excluded.kind, parent=excluded.parent,
		is_default=excluded.is_default, auto=excluded.auto, favorite=excluded.favorite, icon=excluded.icon,
		color=excluded.color, automation=excluded.automation`,
		c.ChatID, c.Name, c.Kind, c.ParentChatID, c.IsDefault, c.Auto, c.Favorite, c.Icon, c.Color, c.Automation, now())
	return err
}

// SetDefault moves the default flag to chatID and returns the entries it
// moved away from.
func (t *Tx) SetDefault(chatID string) ([]string, error) {
	rows, err := t.query(`SELECT chat_id FROM channels WHERE is_default AND chat_id != $1`, chatID)
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
	// Only the rows that change: the others are not rewritten.
	_, err = t.exec(`UPDATE channels SET is_default = (chat_id = $1) WHERE is_default != (chat_id = $1)`, chatID)
	return lost, err
}

// DeleteChannel removes a channel (or thread) with its threads, their
// history, read state, agent state and outbox frames. It returns the
// removed entries.
func (t *Tx) DeleteChannel(chatID string) ([]core.Channel, error) {
	rows, err := t.query(`SELECT `+channelCols+` FROM channels WHERE chat_id = $1 OR parent = $1`, chatID)
	if err != nil {
		return nil, err
	}
	gone, err := collectChannels(rows)
	if err != nil {
		return nil, err
	}
	for _, c := range gone {
		l := c.Lane()
		// A channel's frames carry its chat id, a thread's carry its
		// parent and its own id (see store.OutboxRow).
		lane := `chat_id = $1`
		args := []any{l.ChatID}
		if c.Kind == core.KindThread {
			lane = `chat_id = $1 AND thread_id = $2`
			args = append(args, l.ThreadID)
		}
		for _, table := range []string{"outbox", "reads", "messages", "conversation", "lane_settings", "turns"} {
			if _, err := t.exec(`DELETE FROM `+table+` WHERE `+lane, args...); err != nil {
				return nil, err
			}
		}
		if _, err := t.exec(`DELETE FROM channels WHERE chat_id = $1`, c.ChatID); err != nil {
			return nil, err
		}
	}
	return gone, nil
}
