package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// WireVersion is the version of the messages replicas exchange. A message
// of another version is dropped (and counted): replicas of one fleet run
// one release, and a mixed fleet during an upgrade still converges through
// the store. 2: messages are signed (seal.go).
const WireVersion = 2

// Bounds of one message, checked before it is decoded: a NATS server is a
// network peer like any other, and whoever can publish on the fleet's
// subjects can send anything.
const (
	// MaxMessage is the largest message sent or accepted, signature
	// included (NATS's default max_payload is 1 MiB; a transient frame
	// larger than this is not relayed: the durable frame that ends it
	// carries the whole text).
	MaxMessage = 512 << 10
	// MaxIDs bounds the device ids of one presence message; a summary of
	// more devices is sent in parts.
	MaxIDs = 1000
	// maxOrigin bounds a replica's id.
	maxOrigin = 64
	// maxParts bounds the parts of one presence summary (MaxIDs each).
	maxParts = 100
	// maxCursor keeps hostile cursors far from overflow.
	maxCursor = 1 << 62
)

// Kinds of message.
const (
	kindCursor    = "c" // a durable frame was committed at Cursor
	kindTransient = "t" // a frame that is never stored, after the origin's Cursor
	kindPresence  = "p" // devices connected to the origin: On/Off, or a summary part
	kindQuery     = "q" // a replica started: peers send their summaries now
	kindBye       = "b" // the origin stops: forget its devices now
	kindCommand   = "x" // a device's command for the replica running a lane's turn
)

// message is what travels on NATS. Durable frames travel as their cursor
// only: every replica reads them from the store, which stays the one
// authority on their content and order (docs/replicas.md, "What NATS
// carries").
type message struct {
	V      int    `json:"v"`
	Origin string `json:"o"`
	Kind   string `json:"k"`
	// Cursor: kindCursor, the committed frame; kindTransient, the last
	// durable frame the origin published before it (it is delivered after
	// that one); kindPresence, the origin's last published cursor (a
	// heartbeat that heals a lost cursor message).
	Cursor int64 `json:"c,omitempty"`

	Event  *record.Event `json:"e,omitempty"`  // kindTransient
	Closed *pickerClosed `json:"pc,omitempty"` // kindTransient, picker.closed

	On  []string `json:"on,omitempty"`  // kindPresence: connected now
	Off []string `json:"off,omitempty"` // kindPresence: gone now
	// A summary lists every device connected to the origin, in Parts
	// parts of generation Gen; the last part replaces what was known.
	Gen   uint64   `json:"g,omitempty"`
	Part  int      `json:"pt,omitempty"`
	Parts int      `json:"pn,omitempty"`
	All   []string `json:"all,omitempty"`

	Cmd *command `json:"x,omitempty"` // kindCommand
}

// command is what a device asked of a turn that runs on another replica:
// the answer to one of its pickers, or a stop. The receiver applies it
// through the checks a device's own request goes through (command.go).
type command struct {
	Op     string `json:"op"` // opPick or opStop
	Chat   string `json:"chat,omitempty"`
	Thread string `json:"thread,omitempty"`
	Picker string `json:"picker,omitempty"`
	Value  string `json:"value,omitempty"`
	Device string `json:"device,omitempty"` // who answered (the reply names them)
	Msg    string `json:"msg,omitempty"`    // opStarted: the message whose turn began
}

type pickerClosed struct {
	ID    string `json:"id"`
	Value string `json:"value,omitempty"`
}

// relayed are the frames that travel through NATS only: what a turn
// streams, never stored. Everything else that is not durable (status: this
// gateway's own state) stays with the replica's own devices.
var relayed = map[core.EventType]bool{
	core.EvMessageStart: true, core.EvMessageUpdate: true, core.EvToolStart: true, core.EvToolProgress: true,
	core.EvTodo: true, core.EvTyping: true, core.EvPickerClosed: true,
}

var (
	errTooLarge = errors.New("fleet: message too large")
	errVersion  = errors.New("fleet: message of another version")
)

// encodeTransient is the message for a transient frame, nil when it is too
// large to relay.
func encodeTransient(origin string, after int64, ev *core.Event) ([]byte, error) {
	r := record.FromEvent(ev)
	m := message{V: WireVersion, Origin: origin, Kind: kindTransient, Cursor: after, Event: &r}
	if ev.Closed != nil {
		m.Closed = &pickerClosed{ID: ev.Closed.ID, Value: ev.Closed.Value}
	}
	return encode(&m)
}

func encode(m *message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxMessage-trailer {
		return nil, errTooLarge
	}
	return b, nil
}

// decode parses and checks the body of a message from a peer, once its
// signature is checked (sealer.open). Fields a kind does not use are
// ignored, unknown fields too (additive within a version).
func decode(b []byte) (*message, error) {
	if len(b) > MaxMessage {
		return nil, errTooLarge
	}
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if m.V != WireVersion {
		return nil, errVersion
	}
	if !validOrigin(m.Origin) {
		return nil, errors.New("fleet: bad origin")
	}
	if m.Cursor < 0 || m.Cursor >= maxCursor {
		return nil, errors.New("fleet: cursor out of range")
	}
	switch m.Kind {
	case kindCursor:
		if m.Cursor == 0 {
			return nil, errors.New("fleet: cursor message without a cursor")
		}
	case kindTransient:
		if m.Event == nil || !relayed[core.EventType(m.Event.Type)] {
			return nil, errors.New("fleet: not a transient frame")
		}
		if (m.Event.Type == string(core.EvPickerClosed)) != (m.Closed != nil) {
			return nil, errors.New("fleet: picker.closed without its picker, or a picker on another frame")
		}
	case kindPresence:
		if len(m.On)+len(m.Off)+len(m.All) > MaxIDs {
			return nil, errors.New("fleet: too many devices in one message")
		}
		if m.Parts < 0 || m.Parts > maxParts || m.Part < 0 || (m.Parts > 0 && m.Part >= m.Parts) || (m.Parts == 0 && len(m.All) > 0) {
			return nil, errors.New("fleet: bad summary part")
		}
		for _, ids := range [][]string{m.On, m.Off, m.All} {
			for _, id := range ids {
				if !validDevice(id) {
					return nil, errors.New("fleet: bad device id")
				}
			}
		}
	case kindCommand:
		if err := m.Cmd.check(); err != nil {
			return nil, err
		}
	case kindQuery, kindBye:
	default:
		return nil, errors.New("fleet: unknown kind")
	}
	return &m, nil
}

// event is the core event a transient message carries.
func (m *message) event() (*core.Event, error) {
	ev, err := m.Event.Core()
	if err != nil {
		return nil, err
	}
	if m.Closed != nil {
		ev.Closed = &core.PickerClosed{ID: m.Closed.ID, Value: m.Closed.Value}
	}
	ev.Cursor = 0
	return ev, nil
}

// validOrigin: what newOrigin makes, within bounds.
func validOrigin(s string) bool {
	if s == "" || len(s) > maxOrigin {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

// validDevice: a device id the gateway would accept (gateway.MaxBindingLen).
func validDevice(s string) bool { return s != "" && len(s) <= 128 && utf8.ValidString(s) }
