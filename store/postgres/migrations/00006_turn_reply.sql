-- A running turn's reply id (store.QueuedTurn.ReplyID): the reply's
-- message.start goes out before its row is committed, so the replica that
-- takes a dead one's lane needs it to end a stream whose row never landed.

-- +goose Up
ALTER TABLE turns ADD COLUMN reply_id text NOT NULL DEFAULT '';
