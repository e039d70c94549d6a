// Package mobile is the Hermes Mobile v1 dialect: "t"-typed JSON frames
// (hello/ready, text, audio, chunked base64 media, prompt cards, deliver)
// over one WebSocket per device. A device's conversation is the lane of the
// channel "mobile:<device.id>", which Iris devices see in their directory.
// The package turns frames (proto/mobilev1 decodes them) into gateway
// commands and core events into frames; it knows nothing of SQL, and the
// core nothing of these field names.
package mobile

import (
	"errors"
	"fmt"

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

// errorf makes an error of the protocol's codes.
func errorf(code, format string, args ...any) *mobilev1.Error {
	return &mobilev1.Error{Code: code, Message: fmt.Sprintf(format, args...)}
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
	return fatal(errorf(mobilev1.CodeTooBig, "frame larger than %d bytes", d.cfg.MaxFrame))
}

// Refuse is err's fatal error frame, then close 1008 with its code.
func (d *Dialect) Refuse(err error) *wire.Fatal { return fatal(fromCore(err)) }

// ErrRevoked ends a session whose token was revoked.
var ErrRevoked = core.NewKind("mobile_token_revoked", core.CodeAuth, "this token was revoked")

// Revoked is a fatal auth_failed, then close 1008.
func (d *Dialect) Revoked() *wire.Fatal { return fatal(fromCore(ErrRevoked.New())) }

// InternalError answers a frame whose handling panicked.
func (s *Session) InternalError() []byte { return internalErrorFrame }

var internalErrorFrame = fromCore(core.ErrInternal.New()).Frame("")

// codes is how a core error reads in Hermes Mobile, by its code: the one
// table, for the hello and every frame after it.
var codes = map[core.Code]string{
	core.CodeAuth:          mobilev1.CodeAuthFailed,
	core.CodeForbidden:     mobilev1.CodeForbidden,
	core.CodeMediaTooLarge: mobilev1.CodeTooBig,
	core.CodeInternal:      mobilev1.CodeInternal,
	core.CodeUnsupported:   mobilev1.CodeBadFrame,
	core.CodeNotFound:      mobilev1.CodeBadFrame, // the protocol has no not_found: what the frame named is wrong
	core.CodeRateLimited:   mobilev1.CodeBadFrame, // a bound (a full lane queue), not an auth failure
}

// kindCodes are the kinds whose Hermes Mobile code is not their core
// code's: the protocol has codes of its own for them.
var kindCodes = map[*core.Kind]string{
	wire.ErrHelloTimeout: mobilev1.CodeAuthRequired,
	wire.ErrHelloEvicted: mobilev1.CodeAuthRequired,
}

// fromCore is the one mapping of an error to this dialect's: its own
// errors as they are, a core error by kindCodes, then codes.
func fromCore(err error) *mobilev1.Error {
	var me *mobilev1.Error
	if errors.As(err, &me) {
		return &mobilev1.Error{Code: me.Code, Message: me.Message}
	}
	e := core.AsError(err)
	code, ok := kindCodes[e.Kind]
	if !ok {
		code, ok = codes[e.Code]
	}
	if !ok {
		// A code added to core but not to codes: TestMobileCodes fails
		// first; a client is still told something it can show.
		code = mobilev1.CodeInternal
	}
	return &mobilev1.Error{Code: code, Message: e.Message}
}
