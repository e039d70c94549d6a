package iris

import (
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// fatal is err's error frame, then close 1008 with reason.
func fatal(id int64, err error, reason string) *Fatal {
	e := core.AsError(err)
	return &Fatal{Frame: errorFrame(id, e), Status: policyViolation, Reason: reason, Err: e}
}

func (s *Session) sendError(id int64, err error) {
	s.conn.SendHere(hub.Out{Data: errorFrame(id, core.AsError(err))})
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
var (
	ErrBadVersion     = core.NewKind("iris_version", core.CodeUnsupported, "unsupported protocol version; this gateway speaks v%d")
	ErrUnknownType    = core.NewKind("iris_unknown_type", core.CodeUnsupported, "unknown request type %q")
	ErrLoneSurrogate  = core.NewKind("iris_lone_surrogate", core.CodeUnsupported, `the frame holds a lone UTF-16 surrogate escape (a \uD800-\uDFFF without its pair): it is no character`)
	ErrAlreadyHello   = core.NewKind("iris_already_hello", core.CodeUnsupported, "already said hello")
	ErrHelloFirst     = core.NewKind("iris_hello_first", core.CodeUnsupported, "the first frame must be hello, not %q")
	ErrMinProtocol    = core.NewKind("iris_min_protocol", core.CodeUnsupported, "this gateway speaks Iris v%d; the app needs v%d")
	ErrNeeds          = core.NewKind("iris_member_missing", core.CodeUnsupported, "%s needs %s")
	ErrNullableString = core.NewKind("iris_not_nullable_string", core.CodeUnsupported, "%s must be a string or null")
	ErrSyncing        = core.NewKind("iris_sync_running", core.CodeRateLimited, "a sync is already running on this connection: wait for its sync.done (or error)")
	ErrTooManyPulls   = core.NewKind("iris_pulls_waiting", core.CodeRateLimited, "%d pulls are waiting on this connection already")
	ErrMalformed      = core.NewKind("iris_malformed", core.CodeUnsupported, "%s")
)

// errBadVersion ends a connection that speaks another major version.
var errBadVersion = ErrBadVersion.New(Version)

// errUnknownType answers a request with an id whose type this gateway
// does not know (its name cut to 64 bytes).
func errUnknownType(typ irisv1.FrameType) error {
	t := string(typ)
	if len(t) > 64 {
		t = t[:64] + "…"
	}
	return ErrUnknownType.New(t)
}

// errLoneSurrogate refuses a frame with a \u escape of half a UTF-16
// surrogate pair: decoded, it would be U+FFFD, what the device never wrote.
var errLoneSurrogate = ErrLoneSurrogate.New()

var errAlreadyHello = ErrAlreadyHello.New()

func errHelloFirst(typ irisv1.FrameType) error { return ErrHelloFirst.New(typ) }

// errMinProtocol refuses an app that needs a later version than this one.
func errMinProtocol(need int) error { return ErrMinProtocol.New(Version, need) }

// errNeeds refuses a request without a member it cannot do without.
func errNeeds(typ irisv1.FrameType, what string) error { return ErrNeeds.New(typ, what) }

func errNotNullableString(member string) error { return ErrNullableString.New(member) }

// errSyncing answers a sync sent while the connection's last one runs.
var errSyncing = ErrSyncing.New()

// errTooManyPulls answers a media.pull while maxQueuedPulls wait.
var errTooManyPulls = ErrTooManyPulls.New(maxQueuedPulls)

// errMalformed refuses a frame or payload irisv1 could not decode.
func errMalformed(err error) error { return ErrMalformed.Wrap(err, err) }
