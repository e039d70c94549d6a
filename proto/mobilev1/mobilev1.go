// Package mobilev1 is the Hermes Mobile v1 wire protocol in Go: its
// limits and error codes, the frames a server sends as types, and the
// decoding and validation of the frames a device sends. The protocol is
// /work/shared/spec/hermes-mobile-protocol.txt (docs/hermes-mobile.md says
// how the gateway speaks it).
//
// It depends on the standard library only, so that anything speaking
// Hermes Mobile (the gateway's dialect, wire/mobile; tests; tools) can
// import it without the gateway.
package mobilev1

import (
	"encoding/json"
	"fmt"
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
	MaxUploadBuffer    = 8 << 20  // their total size per device
	MaxIDChars         = 128      // a client id is truncated to this
	MaxDeviceField     = 120      // device fields are truncated to this
	MaxFilenameChars   = 200      // a media filename is truncated to this
)

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

// Server → device frames.

// Ready answers a hello.
type Ready struct {
	T            string `json:"t"`
	V            int    `json:"v"`
	Session      string `json:"session"`
	Device       Device `json:"device"`
	AvatarURL    string `json:"avatar_url"`
	Capabilities Caps   `json:"capabilities"`
}

// Device is ready's device.
type Device struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Caps are what ready announces the server takes and sends.
type Caps struct {
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

// Media kinds each way, and card kinds (what ready announces).
var (
	MediaInKinds  = []string{"image", "video", "document", "audio"}
	MediaOutKinds = []string{"image", "voice", "video", "document", "animation"}
	PromptKinds   = []string{"exec_approval", "slash_confirm", "clarify"}
)

// Message is one chunk of a text message (or of an edit of one).
type Message struct {
	T     string `json:"t"`
	ID    string `json:"id"`
	Text  string `json:"text"`
	Chunk Chunk  `json:"chunk"`
	Final bool   `json:"final"`
	Edit  bool   `json:"edit,omitempty"`
}

// Chunk places a message frame among its message's.
type Chunk struct {
	Index int `json:"index"`
	Total int `json:"total"`
}

// MediaOut is one part of a file sent to the device (t "media").
type MediaOut struct {
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

// Prompt is a card: a question with options.
type Prompt struct {
	T              string   `json:"t"`
	ID             string   `json:"id"`
	Kind           string   `json:"kind"`
	Text           string   `json:"text"`
	Options        []Option `json:"options"`
	Command        string   `json:"command,omitempty"`
	Description    string   `json:"description,omitempty"`
	Session        string   `json:"session"`
	TimeoutSeconds int      `json:"timeout_seconds"`
}

// Option is a card's button.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Style string `json:"style"`
}

// PromptDone closes a card.
type PromptDone struct {
	T        string `json:"t"`
	ID       string `json:"id"`
	OptionID string `json:"option_id,omitempty"`
	Expired  bool   `json:"expired,omitempty"`
}

// Avatar is the avatar's state.
type Avatar struct {
	T     string `json:"t"`
	State string `json:"state"`
}

// Typing says the agent is typing (or stopped).
type Typing struct {
	T    string `json:"t"`
	Stop bool   `json:"stop,omitempty"`
}

// Pong answers a ping, echoing its ts.
type Pong struct {
	T  string          `json:"t"`
	TS json.RawMessage `json:"ts,omitempty"`
}

// ErrorFrame is an error (Error.Frame).
type ErrorFrame struct {
	T       string `json:"t"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Fatal   bool   `json:"fatal"`
	// ID names the frame the error answers, when it had one (an optional
	// addition: clients ignore fields they do not know).
	ID string `json:"id,omitempty"`
}

// Marshal encodes a frame of this package's types.
func Marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // only the types above are marshalled: cannot happen
		panic(err)
	}
	return b
}

// Frame is e's error frame, answering the frame with id ("": none).
func (e *Error) Frame(id string) []byte {
	return Marshal(ErrorFrame{T: "error", Code: e.Code, Message: e.Message, Fatal: e.Fatal, ID: id})
}

// SplitChars cuts s into the texts of message frames, of at most n
// characters each (ChunkChars in the protocol): at least one, possibly
// empty.
func SplitChars(s string, n int) []string {
	var out []string
	for chars(s) > n {
		cut := len(Truncate(s, n))
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}
