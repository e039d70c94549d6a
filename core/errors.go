package core

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Code is a protocol-neutral error class; each dialect maps it to its own
// enum (wire/iris, wire/mobile) and the HTTP API to a status (wire/httperr).
type Code string

// The codes. They match the Iris names; Hermes Mobile maps them.
const (
	CodeAuth          Code = "auth"
	CodeNotFound      Code = "not_found"
	CodeRateLimited   Code = "rate_limited"
	CodeMediaTooLarge Code = "media_too_large"
	CodeUnsupported   Code = "unsupported"
	CodeInternal      Code = "internal"
	CodeForbidden     Code = "forbidden"
)

// Codes are all the codes: the mapping tests of every target range over
// this list, so a code added here and forgotten in a mapping fails them.
var Codes = []Code{CodeAuth, CodeNotFound, CodeRateLimited, CodeMediaTooLarge, CodeUnsupported, CodeInternal, CodeForbidden}

// Kind is an entry of the error catalogue: a named error with a stable
// code and a human message. Its name is stable (scripts and logs may key
// on it) and listed, with the code and the message, in docs/errors.md.
// Kinds are made once, in the package that returns them, by NewKind in a
// var block; the package's errors are then its kinds' New and Wrap.
type Kind struct {
	Name   string // snake_case, unique among all kinds
	Code   Code
	Format string // the message, with fmt verbs for New's arguments
}

// Error makes a *Kind usable as the target of errors.Is.
func (k *Kind) Error() string { return k.Name }

// New makes an error of this kind, its message Format with args.
func (k *Kind) New(args ...any) *Error {
	return &Error{Kind: k, Code: k.Code, Message: fmt.Sprintf(k.Format, args...)}
}

// Wrap is New with a cause, kept for logs (and errors.Is/As) but never
// shown to a client.
func (k *Kind) Wrap(cause error, args ...any) *Error {
	e := k.New(args...)
	e.Err = cause
	return e
}

var (
	kindsMu sync.Mutex
	kinds   = map[string]*Kind{}
	kindRe  = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
)

// NewKind adds a kind to the catalogue. It panics (at init) on a name
// that is not snake_case or is taken, and on a code that is not one of
// Codes: both are programming errors that must not reach a release.
func NewKind(name string, code Code, format string) *Kind {
	if !kindRe.MatchString(name) {
		panic(fmt.Sprintf("core.NewKind: %q is not a snake_case name", name))
	}
	if !slices.Contains(Codes, code) {
		panic(fmt.Sprintf("core.NewKind: %s has the unknown code %q", name, code))
	}
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[name]; dup {
		panic(fmt.Sprintf("core.NewKind: the name %q is taken", name))
	}
	k := &Kind{Name: name, Code: code, Format: format}
	kinds[name] = k
	return k
}

// Kinds lists the kinds of the packages linked into the program, by name.
func Kinds() []*Kind {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	out := make([]*Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b *Kind) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// LookupKind finds a kind by name.
func LookupKind(name string) (*Kind, bool) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	k, ok := kinds[name]
	return k, ok
}

// Error is an error a client is told about: a code and a message that says
// exactly what was wrong. Kind is the catalogue entry it was made from
// (nil only for errors read back from another process, and those of
// Errorf).
type Error struct {
	Kind    *Kind
	Code    Code
	Message string
	Err     error // cause, for logs only
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, SomeKind) hold for the errors of that kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(*Kind)
	return ok && e.Kind == k
}

// Name is the error's kind name ("" when it has none).
func (e *Error) Name() string {
	if e.Kind == nil {
		return ""
	}
	return e.Kind.Name
}

// Errorf makes an Error with a formatted message and no kind, for tests
// that need an arbitrary error: outside core, code makes its errors from
// kinds (TestNoAdHocErrors).
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Received rebuilds an error another process answered with (the admin
// socket's client reads the gateway's): the code and the message as they
// were sent, without a kind.
func Received(code Code, message string) *Error {
	return &Error{Code: code, Message: message}
}

// ErrInternal is what every error that is not an *Error becomes for a
// client: its details are for the log only.
var ErrInternal = NewKind("internal", CodeInternal, "internal error")

// AsError turns any error into an *Error; unknown errors become internal
// ones whose message hides the details.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return ErrInternal.Wrap(err)
}
