package iris

import (
	"context"
	"errors"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/wire"
)

// The dialect's own errors, besides the gateway's.
var (
	ErrFrameTooLarge = core.NewKind("frame_too_large", core.CodeUnsupported, "frame larger than %d bytes")
	// ErrNotUTF8 ends a connection: JSON decoding would turn the bad bytes
	// into U+FFFD and store what the device never wrote; RFC 6455 §8.1
	// asks for close 1007.
	ErrNotUTF8      = core.NewKind("frame_not_utf8", core.CodeUnsupported, "text frame is not valid UTF-8")
	ErrRevoked      = core.NewKind("token_revoked", core.CodeAuth, "this token was revoked")
	errNotUTF8Frame = errorFrame(0, ErrNotUTF8.New())
)

// Fatal is an error after which the connection must close: Frame is the
// error frame to send first, then a close with Status and Reason.
type Fatal = wire.Fatal

// policyViolation (1008) closes a connection after a fatal error frame.
const policyViolation = websocket.StatusPolicyViolation

// Dialect is Iris as the server sees it (wire.Dialect).
type Dialect struct {
	cfg      Config
	maxFrame int64
}

var _ wire.Dialect = (*Dialect)(nil)

// NewDialect makes the dialect; maxFrame bounds every frame after the
// hello.
func NewDialect(cfg Config, maxFrame int64) *Dialect { return &Dialect{cfg: cfg, maxFrame: maxFrame} }

func (d *Dialect) Name() string            { return "iris" }
func (d *Dialect) Is(first []byte) bool    { return Is(first) }
func (d *Dialect) Looks(first []byte) bool { return false }
func (d *Dialect) Limit() int64            { return d.maxFrame }
func (d *Dialect) Proofs() bool            { return true }
func (d *Dialect) Close()                  {}

// Open authenticates a hello (Open, the function).
func (d *Dialect) Open(ctx context.Context, p wire.Peer, first []byte) (wire.Session, error) {
	if f := notText(first); f != nil {
		return nil, f
	}
	s, err := Open(ctx, d.cfg, p.Addr, first)
	if err != nil {
		return nil, err
	}
	return textSession{s}, nil
}

// textSession is a Session as the server reads it: a text frame that is
// not UTF-8 ends the connection before Handle sees it.
type textSession struct{ *Session }

func (s textSession) Handle(ctx context.Context, data []byte) (string, *wire.Fatal) {
	if f := notText(data); f != nil {
		s.Settle() // the replies of the sends before it go out first
		return "", f
	}
	typ, err := s.Session.Handle(ctx, data)
	var f *Fatal
	errors.As(err, &f)
	return typ, f
}

// TooBig is the error frame for a frame over the limit, then close 1009.
func (d *Dialect) TooBig() *wire.Fatal {
	f := fatal(0, ErrFrameTooLarge.New(d.maxFrame), "frame too large")
	f.Status = websocket.StatusMessageTooBig
	return f
}

// Refuse is err's error frame (without an id: no request is answered),
// then close 1008 with the code as the reason.
func (d *Dialect) Refuse(err error) *wire.Fatal {
	return fatal(0, err, string(irisCode(core.AsError(err).Code)))
}

// Revoked is an auth error frame, then close 1008 with the reason "auth".
func (d *Dialect) Revoked() *wire.Fatal {
	return fatal(0, ErrRevoked.New(), string(core.CodeAuth))
}

// InternalError answers a frame whose handling panicked.
func (s *Session) InternalError() []byte { return errorFrame(0, core.ErrInternal.New()) }

// notText ends a connection whose text frame is not UTF-8.
func notText(data []byte) *Fatal {
	if utf8.Valid(data) {
		return nil
	}
	return &Fatal{Frame: errNotUTF8Frame, Status: websocket.StatusInvalidFramePayloadData, Reason: ErrNotUTF8.Format, Err: ErrNotUTF8.New()}
}
