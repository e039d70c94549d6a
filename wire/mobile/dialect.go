package mobile

import (
	"errors"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/wire"
)

// What the server needs of the dialect besides Open (wire.Dialect).

var _ wire.Dialect = (*Dialect)(nil)

func (d *Dialect) Name() string            { return "mobile" }
func (d *Dialect) Is(first []byte) bool    { return Is(first) }
func (d *Dialect) Looks(first []byte) bool { return Looks(first) }
func (d *Dialect) Limit() int64            { return d.cfg.MaxFrame }

// Proofs is false: Hermes Mobile has no replay, so nothing needs proving.
func (d *Dialect) Proofs() bool { return false }

// TooBig is a fatal too_big, then close 1008.
func (d *Dialect) TooBig() *wire.Fatal {
	return fatal(errorf(CodeTooBig, "frame larger than %d bytes", d.cfg.MaxFrame))
}

// Refuse is err's fatal error frame, then close 1008 with its code.
func (d *Dialect) Refuse(err error) *wire.Fatal { return fatal(fromCore(err)) }

// ErrRevoked ends a session whose token was revoked.
var ErrRevoked = core.NewKind("mobile_token_revoked", core.CodeAuth, "this token was revoked")

// Revoked is a fatal auth_failed, then close 1008.
func (d *Dialect) Revoked() *wire.Fatal { return fatal(fromCore(ErrRevoked.New())) }

// InternalError answers a frame whose handling panicked.
func (s *Session) InternalError() []byte { return internalErrorFrame }

var internalErrorFrame = errorFrame(fromCore(core.ErrInternal.New()), "")

// codes is how a core error reads in Hermes Mobile, by its code: the one
// table, for the hello and every frame after it.
var codes = map[core.Code]string{
	core.CodeAuth:          CodeAuthFailed,
	core.CodeForbidden:     CodeForbidden,
	core.CodeMediaTooLarge: CodeTooBig,
	core.CodeInternal:      CodeInternal,
	core.CodeUnsupported:   CodeBadFrame,
	core.CodeNotFound:      CodeBadFrame, // the protocol has no not_found: what the frame named is wrong
	core.CodeRateLimited:   CodeBadFrame, // a bound (a full lane queue), not an auth failure
}

// kindCodes are the kinds whose Hermes Mobile code is not their core
// code's: the protocol has codes of its own for them.
var kindCodes = map[*core.Kind]string{
	wire.ErrHelloTimeout: CodeAuthRequired,
	wire.ErrHelloEvicted: CodeAuthRequired,
}

// fromCore is the one mapping of an error to this dialect's: its own
// errors as they are, a core error by kindCodes, then codes.
func fromCore(err error) *Error {
	var me *Error
	if errors.As(err, &me) {
		return &Error{Code: me.Code, Message: me.Message}
	}
	e := core.AsError(err)
	code, ok := kindCodes[e.Kind]
	if !ok {
		code, ok = codes[e.Code]
	}
	if !ok {
		// A code added to core but not to codes: TestMobileCodes fails
		// first; a client is still told something it can show.
		code = CodeInternal
	}
	return &Error{Code: code, Message: e.Message}
}
