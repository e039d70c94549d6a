package store

import (
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// Tx is a write transaction: every change the gateway makes goes through
// one, inside its group commit. It is an interface so a store other than
// SQLite (PostgreSQL, issue 18) can hand out its own; the SQLite one is
// sqliteTx. A Tx is valid only inside the Write (or Savepoint) that gave
// it.
type Tx interface {
	// Savepoint runs fn so that a failing fn undoes only its own writes.
	Savepoint(fn func(Tx) error) error

	// Flush makes every write so far reach the database and returns the
	// error of one that failed. A store may hold inserts back to put
	// them in together (SQLite's does: rowbuf.go), so an insert's error
	// can come later than its call; the end of the transaction and of a
	// savepoint flush too.
	Flush() error

	// AppendEvent adds a durable event to the outbox: the store encodes
	// it. Cursors are gap-free among committed rows and only grow.
	AppendEvent(ev *core.Event) (cursor int64, size int, err error)

	// The channel directory.
	Channel(chatID string) (core.Channel, error)
	ChannelCount() (int, error) // channels and threads, in all
	PutChannel(c core.Channel) error
	IconBytes(except string) (int64, error)
	SetDefault(chatID string) ([]string, error)
	DeleteChannel(chatID string) ([]core.Channel, error)

	// History.
	InsertMessage(m core.Message, streaming bool) error
	SaveProgress(id, text, reasoning string) error
	FinishMessage(m core.Message) error
	DeleteMessages(lane core.Lane, ids []string) error
	MarkRead(lane core.Lane, messageID, deviceID string, ts int64) error

	// Agent state: the conversation, lane settings, the turn queue.
	AppendConversation(lane core.Lane, messageID string, e record.ConversationEntry) error
	ClearConversation(lane core.Lane) error
	TruncateConversation(lane core.Lane, messageID string) error
	SetLaneSettings(lane core.Lane, ls record.LaneSettings) error
	QueueTurn(lane core.Lane, messageID string) error
	StartTurn(messageID, replyID string) error
	EndTurn(messageID string) error

	// SeeDevice records a device at hello (Store.SeeDevice) and returns
	// its last_pushed_cursor.
	SeeDevice(d Device) (lastPushed int64, err error)

	// Media rows (the bytes live in package media's content store).
	PutBlob(sha256 string, size int64) error
	PutUpload(deviceID, ref string, m core.Media) error
	AttachUpload(deviceID, ref string, lane core.Lane, messageID string) (core.Media, error)
	InsertMedia(m core.Media, lane core.Lane) (bool, error)
}

var _ Tx = (*sqliteTx)(nil)
