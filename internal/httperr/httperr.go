// Package httperr is how the HTTP APIs (POST /api/send and the admin
// socket's) answer a failure: the one mapping from an error to an HTTP
// status and a JSON body {"error":{"code","message"}}, and back.
package httperr

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/irisgate/irisgate/core"
)

// ErrContentType is a request body of a type the endpoint does not take
// (415).
var ErrContentType = core.NewKind("unsupported_content_type", core.CodeUnsupported, "Content-Type must be %s, not %q")

// Body is a failure's answer.
type Body struct {
	Error struct {
		Code    core.Code `json:"code"`
		Message string    `json:"message"`
	} `json:"error"`
}

// statuses is the HTTP status of each code.
var statuses = map[core.Code]int{
	core.CodeAuth:          http.StatusForbidden, // not 401: no WWW-Authenticate challenge applies
	core.CodeForbidden:     http.StatusForbidden,
	core.CodeNotFound:      http.StatusNotFound,
	core.CodeRateLimited:   http.StatusTooManyRequests,
	core.CodeMediaTooLarge: http.StatusRequestEntityTooLarge,
	core.CodeUnsupported:   http.StatusBadRequest,
	core.CodeInternal:      http.StatusInternalServerError,
}

// kindStatuses are the kinds whose status is not their code's.
var kindStatuses = map[*core.Kind]int{
	ErrContentType: http.StatusUnsupportedMediaType,
}

// Status is err's HTTP status: by its kind where that has one of its own,
// else by its code.
func Status(err error) int {
	e := core.AsError(err)
	if st, ok := kindStatuses[e.Kind]; ok {
		return st
	}
	if st, ok := statuses[e.Code]; ok {
		return st
	}
	return http.StatusInternalServerError // a code missing above: TestStatuses fails first
}

// Write answers err with its status and body. With detail, an internal
// error's cause is told: the admin socket does, since only the gateway's
// owner reaches it; anywhere else "internal error" hides it.
func Write(w http.ResponseWriter, err error, detail bool) {
	e := core.AsError(err)
	var body Body
	body.Error.Code, body.Error.Message = e.Code, e.Message
	if detail && e.Code == core.CodeInternal && e.Err != nil {
		body.Error.Message = "internal error: " + e.Err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(Status(e))
	json.NewEncoder(w).Encode(body)
}

// Read reads a failure answer (of at most limit bytes) back into the
// error it was; an answer without a body of ours is named by its status.
func Read(res *http.Response, limit int64) error {
	var body Body
	if err := json.NewDecoder(io.LimitReader(res.Body, limit)).Decode(&body); err != nil || body.Error.Code == "" {
		return errors.New("the gateway answered " + res.Status)
	}
	return core.Received(body.Error.Code, body.Error.Message)
}
