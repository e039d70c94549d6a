package iris

import (
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// Fatal is an error after which the connection must close: Frame is the
// error frame to send first, Reason the close reason.
type Fatal struct {
	Frame  []byte
	Reason string
	err    *core.Error
}

func (f *Fatal) Error() string { return f.err.Error() }

func fatal(id int64, err error, reason string) *Fatal {
	e := core.AsError(err)
	return &Fatal{Frame: errorFrame(id, e), Reason: reason, err: e}
}

// Revoked is the error that ends a session whose token was revoked: an
// auth error frame, then a close with 1008 (reason "auth").
func Revoked() *Fatal {
	return fatal(0, core.Errorf(core.CodeAuth, "this token was revoked"), string(core.CodeAuth))
}

func (s *Session) sendError(id int64, err error) {
	s.conn.Send(hub.Out{Data: errorFrame(id, core.AsError(err))})
}

// errorFrame is the one place a core error becomes an Iris error frame.
func errorFrame(id int64, e *core.Error) []byte {
	return marshal(irisv1.Envelope{V: Version, ID: id, Type: irisv1.TypeError}, irisv1.Error{Code: string(irisCode(e.Code)), Message: e.Message})
}

// irisCode is c in Iris's enum, which has no forbidden: a device that may
// not do something is refused as unauthenticated.
func irisCode(c core.Code) core.Code {
	if c == core.CodeForbidden {
		return core.CodeAuth
	}
	return c
}

// The dialect's own refusals: what the gateway's commands cannot say
// because they are about the frames.

// errBadVersion ends a connection that speaks another major version.
var errBadVersion = core.Errorf(core.CodeUnsupported, "unsupported protocol version; this gateway speaks v%d", Version)

// errUnknownType answers a request with an id whose type this gateway
// does not know.
func errUnknownType(typ irisv1.FrameType) error {
	t := string(typ)
	if len(t) > 64 {
		t = t[:64] + "…"
	}
	return core.Errorf(core.CodeUnsupported, "unknown request type %q", t)
}

// errLoneSurrogate refuses a frame with a \u escape of half a UTF-16
// surrogate pair.
var errLoneSurrogate = core.Errorf(core.CodeUnsupported, `the frame holds a lone UTF-16 surrogate escape (a \uD800-\uDFFF without its pair): it is no character`)

// errAlreadyHello answers a hello after the first frame.
var errAlreadyHello = core.Errorf(core.CodeUnsupported, "already said hello")

// errHelloFirst refuses a connection whose first frame is not a hello.
func errHelloFirst(typ irisv1.FrameType) error {
	return core.Errorf(core.CodeUnsupported, "the first frame must be hello, not %q", typ)
}

// errMinProtocol refuses an app that needs a later version than this one.
func errMinProtocol(need int) error {
	return core.Errorf(core.CodeUnsupported, "this gateway speaks Iris v%d; the app needs v%d", Version, need)
}

// errNeeds refuses a request without a member it cannot do without.
func errNeeds(typ irisv1.FrameType, what string) error {
	return core.Errorf(core.CodeUnsupported, "%s needs %s", typ, what)
}

// errNotNullableString refuses a member that must be a string or null.
func errNotNullableString(member string) error {
	return core.Errorf(core.CodeUnsupported, "%s must be a string or null", member)
}

// errSyncing answers a sync sent while the connection's last one runs.
var errSyncing = core.Errorf(core.CodeRateLimited, "a sync is already running on this connection: wait for its sync.done (or error)")

// errTooManyPulls answers a media.pull while maxQueuedPulls wait.
var errTooManyPulls = core.Errorf(core.CodeRateLimited, "%d pulls are waiting on this connection already", maxQueuedPulls)

// errMalformed refuses a frame or payload irisv1 could not decode.
func errMalformed(err error) error { return core.Errorf(core.CodeUnsupported, "%s", err) }
