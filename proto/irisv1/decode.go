package irisv1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Request is an incoming frame: its envelope, with the payload still
// encoded (DecodePayload reads it into the type's payload). Cursor is
// never set: apps send none.
type Request struct {
	Envelope
}

// DecodeError is a frame DecodeRequest refused. ID is the request id when
// it could be read (0 otherwise), so that the refusal can answer the
// request: an app waits for an answer to every request with an id.
type DecodeError struct {
	ID  int64
	Err error // ErrVersion, or what is malformed
}

func (e *DecodeError) Error() string { return e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// ErrVersion is a frame whose "v" is not Version: another major version
// of the protocol, after which the peer cannot be understood.
var ErrVersion = errors.New("unsupported protocol version")

// inEnvelope is how a request is read: the id is checked by hand so that
// a malformed frame still yields it, and v, chat_id and thread_id are
// pointers so that absent tells apart from zero.
type inEnvelope struct {
	V        *int            `json:"v"`
	ID       json.RawMessage `json:"id"`
	Type     string          `json:"type"`
	ChatID   *string         `json:"chat_id"`
	ThreadID *string         `json:"thread_id"`
	Payload  json.RawMessage `json:"payload"`
	typed    bool            // scanEnvelope saw a type member
}

// DecodeRequest parses a frame's envelope. Every error is a *DecodeError
// carrying the id where it could be read: a member of the wrong type
// leaves the others decoded, so the id still answers the request. An
// absent "v" is taken for Version; any other is ErrVersion.
func DecodeRequest(data []byte) (*Request, error) {
	var env inEnvelope
	var err error
	if !scanEnvelope(data, &env) {
		env = inEnvelope{}
		err = json.Unmarshal(data, &env)
	}
	var te *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &te) {
		return nil, &DecodeError{Err: fmt.Errorf("malformed frame: %s", jsonError(err))}
	}
	var id int64
	if len(env.ID) > 0 && !bytes.Equal(env.ID, []byte("null")) {
		n, perr := strconv.ParseInt(string(env.ID), 10, 64)
		if perr != nil {
			return nil, &DecodeError{Err: errors.New("id must be an integer")}
		}
		id = n
	}
	if err != nil {
		return nil, &DecodeError{ID: id, Err: fmt.Errorf("malformed frame: %s", jsonError(err))}
	}
	if env.V != nil && *env.V != Version {
		return nil, &DecodeError{ID: id, Err: ErrVersion}
	}
	if env.Type == "" {
		return nil, &DecodeError{ID: id, Err: errors.New("frame has no type")}
	}
	r := &Request{Envelope{V: Version, ID: id, Type: env.Type, Payload: env.Payload}}
	if env.ChatID != nil {
		r.ChatID = *env.ChatID
	}
	if env.ThreadID != nil {
		r.ThreadID = *env.ThreadID
	}
	return r, nil
}

// HasType reports whether data is a JSON object with a string "type"
// member, which is how an Iris frame is told from others.
func HasType(data []byte) bool {
	var env inEnvelope
	if scanEnvelope(data, &env) {
		return env.typed
	}
	var probe struct {
		Type *string `json:"type"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Type != nil
}

// DecodePayload reads r's payload into v (a pointer to the payload type).
// An absent or null payload leaves v as it is, the zero value. The error
// names the frame type and, for a member of the wrong type, the member.
func DecodePayload(r *Request, v any) error {
	if len(r.Payload) == 0 || bytes.Equal(r.Payload, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(r.Payload, v); err != nil {
		return fmt.Errorf("malformed %s payload: %s", r.Type, jsonError(err))
	}
	return nil
}

// jsonError says what encoding/json refused; a type error names the
// member by its JSON path.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s must be %s", te.Field, te.Type)
	}
	return err.Error()
}
