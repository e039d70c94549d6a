// Package irisv1 is the Iris v1 wire protocol as Go types: the envelope,
// the frame types of both directions, one payload type per frame type and
// direction, and the envelope codec. It is the one place the protocol's
// member names are written down in Go; the gateway's dialect (wire/iris),
// the client, the benchmarks and the tests all use it.
//
// It depends on the standard library only, so that anything speaking Iris
// can import it without the gateway. docs/iris-v1.schema.json is the
// contract; internal/irisschema's TestPayloadsAgreeWithSchema checks these
// types against it member by member.
package irisv1

import "encoding/json"

// Version is the protocol's major version, every frame's "v".
const Version = 1

// FrameType is a frame's "type". It is an alias of string, not a type of
// its own: unknown types must pass through untouched (the protocol ignores
// them for forward compatibility), and callers that switch on types they
// read as strings keep working.
type FrameType = string

// Frame types an app sends.
const (
	TypeHello                = "hello"
	TypePing                 = "ping"
	TypeMessageSend          = "message.send"
	TypeSync                 = "sync"
	TypeMessageDelete        = "message.delete"
	TypeAgentStop            = "agent.stop"
	TypeAgentSteer           = "agent.steer"
	TypeFCMRegister          = "fcm.register"
	TypeChannelCreate        = "channel.create"
	TypeChannelRename        = "channel.rename"
	TypeChannelSetDefault    = "channel.set_default"
	TypeChannelFavorite      = "channel.favorite"
	TypeChannelIcon          = "channel.icon"
	TypeChannelSetAutomation = "channel.set_automation"
	TypeChannelDelete        = "channel.delete"
	TypeSearch               = "search"
	TypeMediaUploadStart     = "media.upload.start"
	TypeMediaUploadEnd       = "media.upload.end"
	TypePickerSelect         = "picker.select"
)

// Frame types both directions use: a request and the reply named after it.
const (
	TypeHistory          = "history"
	TypeReadReceipt      = "read.receipt"
	TypeMediaPull        = "media.pull"
	TypeChannelList      = "channel.list"
	TypeCommandsCatalog  = "commands.catalog"
	TypeCommandsComplete = "commands.complete"
)

// Frame types the gateway sends.
const (
	TypeHelloAck       = "hello.ack"
	TypePong           = "pong"
	TypeError          = "error"
	TypeMessage        = "message"
	TypeMessageStart   = "message.start"
	TypeMessageUpdate  = "message.update"
	TypeMessageStop    = "message.stop"
	TypeMessageDeleted = "message.deleted"
	TypeCommentary     = "commentary"
	TypeToolStart      = "tool.start"
	TypeToolProgress   = "tool.progress"
	TypeToolEnd        = "tool.end"
	TypeTodoUpdate     = "todo.update"
	TypeTyping         = "typing"
	TypeNotification   = "notification"
	TypeChannelCreated = "channel.created"
	TypeChannelRenamed = "channel.renamed"
	TypeChannelDeleted = "channel.deleted"
	TypeAgentBusy      = "agent.busy"
	TypeAgentIdle      = "agent.idle"
	TypeStatus         = "status"
	TypeMediaOffer     = "media.offer"
	TypeMediaPullEnd   = "media.pull.end"
	TypeMediaUploadAck = "media.upload.ack"
	TypeSyncDone       = "sync.done"
	TypeSearchResults  = "search.results"
	TypePickerModel    = "picker.model"
	TypePickerChoice   = "picker.choice"
	TypePickerClarify  = "picker.clarify"
	TypePickerApproval = "picker.approval"
	TypePickerConfirm  = "picker.confirm"
)

// PickerPrefix starts every picker frame's type: picker.<kind>.
const PickerPrefix = "picker."

// Error codes, the enum of an error frame's code.
const (
	CodeAuth          = "auth"
	CodeNotFound      = "not_found"
	CodeRateLimited   = "rate_limited"
	CodeMediaTooLarge = "media_too_large"
	CodeUnsupported   = "unsupported"
	CodeInternal      = "internal"
)

// Lane addresses a channel's flat lane (ThreadID empty) or a thread: the
// envelope's chat_id and thread_id.
type Lane struct {
	ChatID   string
	ThreadID string
}

// Envelope is every frame's outer object. Frames are written by
// AppendFrame (the members in this order, empty ones left out) and read
// with encoding/json or, for requests, DecodeRequest.
type Envelope struct {
	V        int             `json:"v"`
	ID       int64           `json:"id,omitempty"`
	Type     FrameType       `json:"type"`
	ChatID   string          `json:"chat_id,omitempty"`
	ThreadID string          `json:"thread_id,omitempty"`
	Cursor   int64           `json:"cursor,omitempty"`
	Payload  json.RawMessage `json:"payload"`
}

// Lane is the envelope's lane.
func (e Envelope) Lane() Lane { return Lane{ChatID: e.ChatID, ThreadID: e.ThreadID} }
