// Package mobile is the Hermes Mobile v1 dialect: "t"-typed JSON frames
// (hello/ready, text, audio, chunked base64 media, prompt cards, deliver)
// over one WebSocket per device. A device's conversation is the lane of the
// channel "mobile:<device.id>", which Iris devices see in their directory.
// The package decodes frames into gateway commands and encodes core events
// into frames; it knows nothing of SQL, and the core nothing of these
// field names.
package mobile

import (
	"encoding/json"
	"fmt"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/wire"
)

// Version is the protocol version declared in ready.
const Version = 1

// The protocol's limits (hermes-mobile-protocol.txt, "Constraints and
// limits").
const (
	MaxFrameBytes      = 16 << 20 // one WebSocket frame
	MaxTextChars       = 12000    // text, caption
	MaxAudioBytes      = 8 << 20  // decoded audio
	MaxMediaBytes      = 8 << 20  // one media file, either direction
	MediaChunkBytes    = 3 << 20  // the protocol's chunk size for large files
	MinMediaChunkBytes = 4 << 10  // the parts ceiling derives from it
	MaxMediaParts      = 2048     // ceil(MaxMediaBytes / MinMediaChunkBytes)
	ChunkChars         = 3500     // characters of a message frame
	PromptTTLSeconds   = 300      // a card's default lifetime
	MaxUploads         = 8        // unfinished multi-part uploads per device
	TokenDevices       = 4        // a token's devices together: this many devices' uploads and buffers
	MaxUploadBuffer    = 8 << 20  // their total size per device
	MaxIDChars         = 128      // a client id is truncated to this
	MaxDeviceField     = 120      // device fields are truncated to this
	MaxFilenameChars   = 200      // a media filename is truncated to this
)

// downChunkBytes is the size of a media chunk sent to a device: the
// protocol's ~3 MiB, less a little so one chunk, base64-encoded with its
// frame, fits in half a connection's default send queue (8 MiB), which is
// what a waiting send needs.
const downChunkBytes = MediaChunkBytes - 4<<10

// Error codes.
const (
	CodeBadFrame         = "bad_frame"
	CodeAuthFailed       = "auth_failed"
	CodeForbidden        = "forbidden"
	CodeUnsupportedFrame = "unsupported_frame"
	CodeTooBig           = "too_big"
	CodeDeviceOffline    = "device_offline"
	CodeAuthRequired     = "auth_required"
	CodeInternal         = "internal_error"
)

// Codes is the protocol's error-code enum.
var Codes = []string{CodeBadFrame, CodeAuthFailed, CodeForbidden, CodeUnsupportedFrame, CodeTooBig, CodeDeviceOffline, CodeAuthRequired, CodeInternal}

// Error is an error a device is told about with an error frame.
type Error struct {
	Code    string
	Message string
	Fatal   bool // the connection closes with 1008 after it
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Fatal is an error after which the connection must close with 1008:
// Frame is the error frame to send first, Reason (the error code) the
// close reason.
type Fatal = wire.Fatal

func fatal(e *Error) *Fatal {
	e.Fatal = true
	return &Fatal{Frame: errorFrame(e, ""), Status: websocket.StatusPolicyViolation, Reason: e.Code, Err: e}
}

// Server → device frames.

type readyJSON struct {
	T            string     `json:"t"`
	V            int        `json:"v"`
	Session      string     `json:"session"`
	Device       deviceJSON `json:"device"`
	AvatarURL    string     `json:"avatar_url"`
	Capabilities capsJSON   `json:"capabilities"`
}

type deviceJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type capsJSON struct {
	Text          bool     `json:"text"`
	Voice         bool     `json:"voice"`
	Typing        bool     `json:"typing"`
	AvatarStates  []string `json:"avatar_states"`
	MediaIn       []string `json:"media_in"`
	MediaOut      []string `json:"media_out"`
	Prompts       []string `json:"prompts"`
	Edit          bool     `json:"edit"`
	MaxMediaBytes int      `json:"max_media_bytes"`
	MaxTextChars  int      `json:"max_text_chars"`
}

// Avatar states.
const (
	AvatarIdle     = "idle"
	AvatarThinking = "thinking"
	AvatarSpeaking = "speaking"
)

// Media kinds each way, and card kinds.
var (
	mediaInKinds  = []string{"image", "video", "document", "audio"}
	mediaOutKinds = []string{"image", "voice", "video", "document", "animation"}
	promptKinds   = []string{"exec_approval", "slash_confirm", "clarify"}
)

type messageJSON struct {
	T     string    `json:"t"`
	ID    string    `json:"id"`
	Text  string    `json:"text"`
	Chunk chunkJSON `json:"chunk"`
	Final bool      `json:"final"`
	Edit  bool      `json:"edit,omitempty"`
}

type chunkJSON struct {
	Index int `json:"index"`
	Total int `json:"total"`
}

type mediaOutJSON struct {
	T        string `json:"t"`
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Mime     string `json:"mime"`
	Filename string `json:"filename"`
	Caption  string `json:"caption,omitempty"`
	Part     int    `json:"part"`
	Parts    int    `json:"parts"`
	Final    bool   `json:"final"`
	Size     int64  `json:"size"`
	Data     string `json:"data,omitempty"`
	URL      string `json:"url,omitempty"`
	ReplyTo  string `json:"reply_to,omitempty"`
}

type promptJSON struct {
	T              string       `json:"t"`
	ID             string       `json:"id"`
	Kind           string       `json:"kind"`
	Text           string       `json:"text"`
	Options        []optionJSON `json:"options"`
	Command        string       `json:"command,omitempty"`
	Description    string       `json:"description,omitempty"`
	Session        string       `json:"session"`
	TimeoutSeconds int          `json:"timeout_seconds"`
}

type optionJSON struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Style string `json:"style"`
}

type promptDoneJSON struct {
	T        string `json:"t"`
	ID       string `json:"id"`
	OptionID string `json:"option_id,omitempty"`
	Expired  bool   `json:"expired,omitempty"`
}

type avatarJSON struct {
	T     string `json:"t"`
	State string `json:"state"`
}

type typingJSON struct {
	T    string `json:"t"`
	Stop bool   `json:"stop,omitempty"`
}

type pongJSON struct {
	T  string          `json:"t"`
	TS json.RawMessage `json:"ts,omitempty"`
}

type errorJSON struct {
	T       string `json:"t"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Fatal   bool   `json:"fatal"`
	// ID names the frame the error answers, when it had one (an optional
	// addition: clients ignore fields they do not know).
	ID string `json:"id,omitempty"`
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // only the types above are marshalled: cannot happen
		panic(err)
	}
	return b
}

func errorFrame(e *Error, id string) []byte {
	return marshal(errorJSON{T: "error", Code: e.Code, Message: e.Message, Fatal: e.Fatal, ID: id})
}
