package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// What a push service's answer means for the push and the registration.
// A backend wraps one of these in an *Error; anything else is a passing
// failure, retried with backoff.
var (
	// ErrGone: the registration no longer exists (FCM UNREGISTERED, Web
	// Push 404/410). It is dropped.
	ErrGone = errors.New("push: registration gone")
	// ErrInvalidAddress: the service will never accept this address (an
	// ntfy topic its server refuses by name). It is dropped: every push to
	// it would fail the same way.
	ErrInvalidAddress = errors.New("push: address refused by the service")
	// ErrRefused: this message is refused for good (too large, malformed).
	// It is not retried; the registration is kept.
	ErrRefused = errors.New("push: message refused")
	// ErrAuth: the service refused the gateway's credentials. Retried
	// (the operator may fix them), and logged once with the fix.
	ErrAuth = errors.New("push: credentials refused")
	// ErrMisconfigured: the configured address is not the service (an
	// ntfy URL that answers 404 to a publish). Retried, logged once.
	ErrMisconfigured = errors.New("push: service misconfigured")
	// ErrRateLimited: the service asks us to slow down. Retried.
	ErrRateLimited = errors.New("push: rate limited")
)

// Error is a push service's answer, classified.
type Error struct {
	Backend string
	Kind    error // one of the Err… values above, or nil: passing
	Status  int   // HTTP status
	Code    int   // the service's own error code (ntfy: 40010…)
	Msg     string
	// Fix tells the operator what to change, for errors only they can
	// fix (credentials, addresses).
	Fix string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s answered HTTP %d", e.Backend, e.Status)
	if e.Status == 0 {
		s = e.Backend
	}
	if e.Code != 0 {
		s += fmt.Sprintf(" (%d)", e.Code)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

func (e *Error) Unwrap() error { return e.Kind }

// Outcome names what became of one attempt on one backend, for
// /metrics (irisgate_push_total{backend,outcome}) and the logs.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "sent"
	case errors.Is(err, ErrGone):
		return "gone"
	case errors.Is(err, ErrInvalidAddress):
		return "invalid_address"
	case errors.Is(err, ErrRefused):
		return "refused"
	case errors.Is(err, ErrAuth):
		return "auth"
	case errors.Is(err, ErrMisconfigured):
		return "misconfigured"
	case errors.Is(err, ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "failed"
}

// readBody reads at most 16 KiB of a push service's answer and closes it.
func readBody(res *http.Response) []byte {
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 16<<10))
	return b
}

// answer reads a Web Push service's answer (RFC 8030 §5, RFC 8292):
// 2xx is sent; 404/410 the subscription is gone; 401/403 the VAPID
// signature was refused; 413 the payload is too large; 429 slow down;
// any other 4xx will not pass if sent again; the rest is passing.
func answer(backend string, res *http.Response) error {
	body := readBody(res)
	if res.StatusCode/100 == 2 {
		return nil
	}
	e := &Error{Backend: backend, Status: res.StatusCode, Msg: cut(string(body), 200)}
	switch s := res.StatusCode; {
	case s == http.StatusNotFound || s == http.StatusGone:
		e.Kind = ErrGone
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Kind = ErrAuth
		e.Fix = "the push service refused the VAPID signature: if vapid.json in the data directory was replaced, browsers must subscribe again"
	case s == http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
	case s/100 == 4:
		e.Kind = ErrRefused
	}
	return e
}
