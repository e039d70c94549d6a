package gateway

import (
	"context"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// Store is what the gateway needs of its database: SQLite's store.Store
// today, PostgreSQL's next (issue 18). Its methods come in groups, each an
// interface of its own, so a new store can be filled, and checked against
// store/storetest's contract, one group at a time. Every change goes
// through Write, inside the group commit; the rest are reads, and the few
// writes that are not the outbox's (devices, tokens, approvals) are single
// statements that need no ordering with it.
type Store interface {
	// Write runs fn in one write transaction, committed when fn returns
	// nil. The group commit runs many requests' writes in one, each in a
	// Tx.Savepoint when one of them fails.
	Write(ctx context.Context, fn func(store.Tx) error) error
	OutboxStore
	DirectoryStore
	AgentStore
	DeviceStore
	TokenStore
	MediaRowStore
	cron.Store
}

// OutboxStore is the outbox as sync reads it. Cursors are gap-free among
// committed frames and only grow: a cursor is never reused, and a frame
// is visible only once every lower cursor is (or was pruned or deleted).
// Events come decoded: the format is the store's.
type OutboxStore interface {
	// OutboxHead is the newest cursor ever assigned (0 for none).
	OutboxHead(ctx context.Context) (int64, error)
	// OutboxFloor is the highest cursor retention removed.
	OutboxFloor(ctx context.Context) (int64, error)
	OutboxCursors(ctx context.Context, after, upto int64, limit int) ([]int64, error)
	// ScanEvents stops with a *store.CorruptError at a frame that does not
	// decode: a replay never leaves one out silently.
	ScanEvents(ctx context.Context, after, upto int64, fn func(*core.Event) error) error
	// ScanEventsSkipping is ScanEvents for a replay that goes on past a
	// frame that does not decode: bad is handed its cursor and error.
	ScanEventsSkipping(ctx context.Context, after, upto int64, fn func(*core.Event) error, bad func(cursor int64, err *store.CorruptError)) error
	PruneOutboxSome(ctx context.Context, keep, minTS int64, n int) (removed int64, more bool, err error)
}

// DirectoryStore is the channel directory, the history and its search.
type DirectoryStore interface {
	Channels(ctx context.Context) ([]core.Channel, error)
	Channel(ctx context.Context, chatID string) (core.Channel, error)
	Message(ctx context.Context, id string) (core.Message, error)
	// Streaming is the replies a crash left being written.
	Streaming(ctx context.Context) ([]core.Message, error)
	History(ctx context.Context, lane core.Lane, beforeID string, limit int) ([]core.Message, bool, error)
	// SearchPageBefore keeps the query rules: words, not syntax; the last
	// word a prefix; diacritics and case folded; a deleted or streaming
	// message never matches.
	SearchPageBefore(ctx context.Context, query string, lane *core.Lane, before string, limit int) (store.SearchPage, error)
}

// AgentStore is the agent's state: each lane's conversation with the
// model and its settings, the turns owed, commands approved for good.
type AgentStore interface {
	Conversation(ctx context.Context, lane core.Lane) ([]record.ConversationEntry, error)
	// ConversationLen counts without decoding, so /new and /status work on
	// a conversation that does not decode.
	ConversationLen(ctx context.Context, lane core.Lane) (int, error)
	LaneSettings(ctx context.Context, lane core.Lane) (record.LaneSettings, error)
	Turns(ctx context.Context) ([]store.QueuedTurn, error)
	Approved(ctx context.Context, command string) (bool, error)
	Approve(ctx context.Context, command string) error
}

// DeviceStore is what the gateway keeps of devices. Hello writes its row
// in the group commit (store.Tx's SeeDevice) and reads back only the
// column it needs (last_pushed_cursor, as LastPushed does), so a push
// registration that does not decode never keeps a device out; PushDevices
// leaves such a device out and lists the others.
type DeviceStore interface {
	SeeDevice(ctx context.Context, d store.Device) error
	LastPushed(ctx context.Context, deviceID string) (int64, error)
	DeviceName(ctx context.Context, deviceID string) (string, error)
	PushDevices(ctx context.Context) ([]store.Device, error)
	SetPushRegistration(ctx context.Context, deviceID, fcmToken, ntfyTopic string) error
	SetWebPush(ctx context.Context, deviceID string, sub record.WebPush) error
	// StaleDevices lists up to limit devices without a push registration,
	// past the newest keep or last seen before before (ms); DeleteDevices
	// forgets them: the device rows stay bounded.
	StaleDevices(ctx context.Context, keep int, before int64, limit int) ([]string, error)
	DeleteDevices(ctx context.Context, ids []string) error
	// DropPushOfRevoked ends the push registrations (and queued pushes) of
	// the devices of a token that no longer exists ("": of every such
	// token), returning how many devices had one.
	DropPushOfRevoked(ctx context.Context, tokenID string) (int, error)
}

// TokenStore is the device tokens (their hashes): what Auth needs.
type TokenStore interface {
	Tokens(ctx context.Context) ([]store.Token, error)
	AddToken(ctx context.Context, t store.Token) error
	TouchToken(ctx context.Context, id string) error
}

// MediaRowStore is the rows of files in messages and of acknowledged
// uploads; package media holds the bytes (media.Index is its part).
type MediaRowStore interface {
	Upload(ctx context.Context, deviceID, ref string) (core.Media, error)
	Media(ctx context.Context, id string) (core.Media, error)
}
