package core

import (
	"errors"
	"fmt"
)

// Code is a protocol-neutral error class; each dialect maps it to its own enum.
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

// Error is an error a client is told about: a code and a message that says
// exactly what was wrong.
type Error struct {
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

// Errorf makes an Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError turns any error into an *Error; unknown errors become internal
// ones whose message hides the details.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}
