-- The schema of the PostgreSQL store: the SQLite store's tables at its
-- newest version (records everywhere), in PostgreSQL's types. Comments on
-- what differs; the columns mean what package store's do.

-- +goose Up
CREATE TABLE channels (
	chat_id    text PRIMARY KEY,
	name       text NOT NULL,
	kind       text NOT NULL,
	parent     text NOT NULL DEFAULT '',
	is_default boolean NOT NULL DEFAULT false,
	auto       boolean NOT NULL DEFAULT false,
	favorite   boolean NOT NULL DEFAULT false,
	icon       text NOT NULL DEFAULT '',
	color      text NOT NULL DEFAULT '',
	automation boolean NOT NULL DEFAULT false,
	created    bigint NOT NULL
);
CREATE INDEX channels_parent ON channels (parent) WHERE parent != '';
INSERT INTO channels (chat_id, name, kind, is_default, created) VALUES ('default', 'Default', 'default', true, 0);

-- search is the message's words as the store tokenised and folded them
-- (search.go), NULL while the reply is still being written: streaming
-- replies stay out of search until they finish, as in SQLite.
CREATE TABLE messages (
	seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id        text NOT NULL UNIQUE,
	chat_id   text NOT NULL,
	thread_id text NOT NULL DEFAULT '',
	role      text NOT NULL,
	text      text NOT NULL DEFAULT '',
	reasoning text NOT NULL DEFAULT '',
	media     text NOT NULL DEFAULT '',
	reply_to  text NOT NULL DEFAULT '',
	model     text NOT NULL DEFAULT '',
	tokens    bigint NOT NULL DEFAULT 0,
	runtime   text NOT NULL DEFAULT '',
	ts        bigint NOT NULL,
	state     smallint NOT NULL DEFAULT 0, -- 0 final, 1 streaming, 2 stopped
	search    tsvector
);
CREATE INDEX messages_lane ON messages (chat_id, thread_id, seq);
CREATE INDEX messages_streaming ON messages (seq) WHERE state = 1;
CREATE INDEX messages_search ON messages USING gin (search);

-- The outbox. cursor is not a sequence: outbox_head hands cursors out
-- inside the frame's own transaction (outbox.go says why).
CREATE TABLE outbox (
	cursor     bigint PRIMARY KEY,
	type       text NOT NULL,
	chat_id    text NOT NULL DEFAULT '',
	thread_id  text NOT NULL DEFAULT '',
	message_id text NOT NULL DEFAULT '',
	body       bytea NOT NULL,
	ts         bigint NOT NULL
);
CREATE INDEX outbox_chat ON outbox (chat_id, thread_id) WHERE chat_id != '';
CREATE INDEX outbox_message ON outbox (message_id) WHERE message_id != '';

CREATE TABLE outbox_head (
	one  boolean PRIMARY KEY DEFAULT true CHECK (one),
	head bigint NOT NULL
);
INSERT INTO outbox_head (head) VALUES (0);

CREATE TABLE meta (
	key   text PRIMARY KEY,
	value text NOT NULL
);

CREATE TABLE tokens (
	id        text PRIMARY KEY,
	hash      bytea NOT NULL UNIQUE,
	name      text NOT NULL DEFAULT '',
	device_id text NOT NULL DEFAULT '',
	created   bigint NOT NULL,
	last_used bigint NOT NULL DEFAULT 0
);

CREATE TABLE devices (
	device_id          text PRIMARY KEY,
	name               text NOT NULL DEFAULT '',
	fcm_token          text NOT NULL DEFAULT '',
	ntfy_topic         text NOT NULL DEFAULT '',
	webpush            text NOT NULL DEFAULT '',
	last_pushed_cursor bigint NOT NULL DEFAULT 0,
	proven             text NOT NULL DEFAULT '',
	last_seen          bigint NOT NULL DEFAULT 0
);

CREATE TABLE reads (
	chat_id    text NOT NULL,
	thread_id  text NOT NULL DEFAULT '',
	message_id text NOT NULL,
	device_id  text NOT NULL,
	ts         bigint NOT NULL,
	PRIMARY KEY (message_id, device_id)
);
CREATE INDEX reads_chat ON reads (chat_id, thread_id);

CREATE TABLE conversation (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	chat_id    text NOT NULL,
	thread_id  text NOT NULL DEFAULT '',
	message_id text NOT NULL DEFAULT '',
	body       text NOT NULL
);
CREATE INDEX conversation_lane ON conversation (chat_id, thread_id, seq);
CREATE INDEX conversation_message ON conversation (message_id) WHERE message_id != '';

CREATE TABLE lane_settings (
	chat_id   text NOT NULL,
	thread_id text NOT NULL DEFAULT '',
	body      text NOT NULL,
	PRIMARY KEY (chat_id, thread_id)
);

CREATE TABLE approvals (
	command text PRIMARY KEY,
	created bigint NOT NULL
);

CREATE TABLE turns (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	message_id text NOT NULL UNIQUE,
	chat_id    text NOT NULL,
	thread_id  text NOT NULL DEFAULT '',
	running    boolean NOT NULL DEFAULT false
);
CREATE INDEX turns_lane ON turns (chat_id, thread_id);

CREATE TABLE push_queue (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	device_id  text NOT NULL,
	collapse   text NOT NULL DEFAULT '',
	cursor     bigint NOT NULL DEFAULT 0,
	title      text NOT NULL DEFAULT '',
	body       text NOT NULL DEFAULT '',
	chat_id    text NOT NULL DEFAULT '',
	thread_id  text NOT NULL DEFAULT '',
	kind       text NOT NULL DEFAULT '',
	priority   integer NOT NULL DEFAULT 3,
	message_id text NOT NULL DEFAULT '',
	attempts   integer NOT NULL DEFAULT 0,
	next_at    bigint NOT NULL,
	last_err   text NOT NULL DEFAULT '',
	gen        bigint NOT NULL DEFAULT 0,
	UNIQUE (device_id, collapse)
);
CREATE INDEX push_due ON push_queue (next_at);

CREATE TABLE cron_jobs (
	id        text PRIMARY KEY,
	name      text NOT NULL DEFAULT '',
	schedule  text NOT NULL,
	prompt    text NOT NULL DEFAULT '',
	text      text NOT NULL DEFAULT '',
	chat_id   text NOT NULL,
	thread_id text NOT NULL DEFAULT '',
	enabled   boolean NOT NULL DEFAULT true,
	last_run  bigint NOT NULL DEFAULT 0,
	next_run  bigint NOT NULL DEFAULT 0,
	last_err  text NOT NULL DEFAULT '',
	created   bigint NOT NULL
);

-- Media rows: blobs are the content store's files with the number of rows
-- using them, counted by triggers, so every path that deletes a message
-- (message.delete, channel.delete, /undo…) releases its files without
-- knowing about them (as in SQLite).
CREATE TABLE blobs (
	sha256  text PRIMARY KEY,
	size    bigint NOT NULL,
	refs    bigint NOT NULL DEFAULT 0,
	created bigint NOT NULL
);
CREATE INDEX blobs_unused ON blobs (sha256) WHERE refs <= 0;

CREATE TABLE media (
	id         text PRIMARY KEY,
	sha256     text NOT NULL,
	kind       text NOT NULL,
	mime       text NOT NULL,
	size       bigint NOT NULL,
	filename   text NOT NULL,
	chat_id    text NOT NULL,
	thread_id  text NOT NULL DEFAULT '',
	message_id text NOT NULL,
	created    bigint NOT NULL
);
CREATE INDEX media_message ON media (message_id);
CREATE INDEX media_chat ON media (chat_id, thread_id);

CREATE TABLE uploads (
	device_id text NOT NULL,
	ref       text NOT NULL,
	sha256    text NOT NULL,
	kind      text NOT NULL,
	mime      text NOT NULL,
	size      bigint NOT NULL,
	filename  text NOT NULL,
	created   bigint NOT NULL,
	PRIMARY KEY (device_id, ref)
);
CREATE INDEX uploads_created ON uploads (created);

-- +goose StatementBegin
CREATE FUNCTION blob_ref() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		UPDATE blobs SET refs = refs + 1 WHERE sha256 = NEW.sha256;
		RETURN NEW;
	END IF;
	UPDATE blobs SET refs = refs - 1 WHERE sha256 = OLD.sha256;
	RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER media_ref AFTER INSERT OR DELETE ON media FOR EACH ROW EXECUTE FUNCTION blob_ref();
CREATE TRIGGER uploads_ref AFTER INSERT OR DELETE ON uploads FOR EACH ROW EXECUTE FUNCTION blob_ref();

-- +goose StatementBegin
CREATE FUNCTION message_media() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM media WHERE message_id = OLD.id;
	RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER messages_media AFTER DELETE ON messages FOR EACH ROW EXECUTE FUNCTION message_media();

-- Rows a migration could not read, kept as found (package store's
-- quarantine). A new PostgreSQL database has no older rows to read; the
-- table is here for the migrations to come.
CREATE TABLE quarantine (
	id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tbl  text NOT NULL,
	key  text NOT NULL,
	body bytea NOT NULL,
	err  text NOT NULL,
	ts   bigint NOT NULL
);
