// Package mobile is the Hermes Mobile v1 dialect: "t"-typed JSON frames
// (hello/ready, text, audio, chunked base64 media, prompt cards, deliver)
// over one WebSocket per device. A device's conversation is the lane of the
// channel "mobile:<device.id>", which Iris devices see in their directory.
// The package turns frames (proto/mobilev1 decodes them) into gateway
// commands and core events into frames; it knows nothing of SQL, and the
// core nothing of these field names.
package mobile

import (
	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/wire"
)

// Fatal is an error after which the connection must close with 1008:
// Frame is the error frame to send first, Reason (the error code) the
// close reason.
type Fatal = wire.Fatal

func fatal(e *mobilev1.Error) *Fatal {
	e.Fatal = true
	return &Fatal{Frame: e.Frame(""), Status: websocket.StatusPolicyViolation, Reason: e.Code, Err: e}
}

// What the server needs of the dialect besides Open (wire.Dialect).

var _ wire.Dialect = (*Dialect)(nil)

func (d *Dialect) Name() string            { return "mobile" }
func (d *Dialect) Is(first []byte) bool    { return mobilev1.Is(first) }
func (d *Dialect) Looks(first []byte) bool { return mobilev1.Looks(first) }
func (d *Dialect) Limit() int64            { return d.cfg.MaxFrame }

// Proofs is false: Hermes Mobile has no replay, so nothing needs proving.
func (d *Dialect) Proofs() bool { return false }

// TooBig is a fatal too_big, then close 1008.
func (d *Dialect) TooBig() *wire.Fatal {
	return fatal(fromCore(ErrFrameTooLarge.New(d.cfg.MaxFrame)))
}

// Refuse is err's fatal error frame, then close 1008 with its code.
func (d *Dialect) Refuse(err error) *wire.Fatal { return fatal(fromCore(err)) }

// Revoked is a fatal auth_failed, then close 1008.
func (d *Dialect) Revoked() *wire.Fatal { return fatal(fromCore(ErrRevoked.New())) }

// InternalError answers a frame whose handling panicked.
func (s *Session) InternalError() []byte { return internalErrorFrame }

var internalErrorFrame = fromCore(core.ErrInternal.New()).Frame("")
