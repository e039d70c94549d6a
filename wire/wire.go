// Package wire is what a WebSocket dialect hands the server: the server
// (package server) owns the sockets, reads frames and writes what the hub
// queues, and knows the dialects only through these interfaces. Iris
// (wire/iris) and Hermes Mobile (wire/mobile) implement them; every frame
// either dialect sends, errors included, is made by the dialect.
package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/hub"
)

// Fatal is an error after which a connection closes: Frame (the
// dialect's error frame) goes out first, then a close with Status and
// Reason.
type Fatal struct {
	Frame  []byte
	Status websocket.StatusCode
	Reason string
	Err    error // what went wrong, for logs
}

func (f *Fatal) Error() string {
	if f.Err != nil {
		return f.Err.Error()
	}
	return f.Reason
}

func (f *Fatal) Unwrap() error { return f.Err }

// Peer is where a connection comes from.
type Peer struct {
	// Addr is the client's address: the socket's peer, or the client a
	// trusted proxy named.
	Addr string
	// Local is a connection over the gateway's admin socket, which only
	// its owner's processes can open. A loopback TCP address proves
	// nothing of the kind (a reverse proxy on the same host makes everyone
	// loopback).
	Local bool
}

// Dialect is one wire dialect, as the server's read loop needs it. The
// server asks each dialect, in its order, whether the first frame Is its
// hello, then whether it Looks like one of its frames; the first that says
// so opens the connection.
type Dialect interface {
	Name() string // metrics label: "iris", "mobile"
	// Is reports whether first is surely this dialect's first frame.
	Is(first []byte) bool
	// Looks reports whether first is this dialect's, though not a
	// hello: Open answers it in the dialect rather than the server
	// dropping it.
	Looks(first []byte) bool
	// Open authenticates the first frame. Its error is a *Fatal to send,
	// or anything else for an internal failure (close 1011).
	Open(ctx context.Context, p Peer, first []byte) (Session, error)
	// Limit is the largest frame a session reads; TooBig ends one that
	// sends a larger frame.
	Limit() int64
	TooBig() *Fatal
	// Refuse ends a connection that never said hello (no hello in time,
	// too many waiting) with err's frame in this dialect; the server
	// merges every dialect's (Bilingual), since it cannot know which the
	// peer speaks.
	Refuse(err error) *Fatal
	// Revoked ends a session whose token was revoked.
	Revoked() *Fatal
	// Proofs reports whether the dialect's outbox frames are proven
	// delivered (answered WebSocket pings after them): Iris replays from
	// a cursor; Hermes Mobile has no replay.
	Proofs() bool
	Close() // at shutdown, after the sessions ended
}

// Session is one authenticated connection of a dialect. The server calls
// Handle and HandleBinary from the connection's read loop only.
type Session interface {
	Conn() *hub.Conn
	// TokenID is the id of the token the session said hello with, for
	// revocation.
	TokenID() string
	// Handle processes a text frame and returns its type for metrics ("":
	// not counted) and, when the connection must close, the Fatal to end
	// it with.
	Handle(ctx context.Context, data []byte) (typ string, f *Fatal)
	HandleBinary(ctx context.Context, data []byte)
	// Settle returns once every request Handle accepted is answered (a
	// dialect may answer some after Handle returns: Iris pipelines
	// message.send), before the server ends the connection of its own
	// accord.
	Settle()
	// InternalError is the frame answering a frame whose handling failed
	// unexpectedly (a panic); the connection stays open.
	InternalError() []byte
	Close()
}

// Bilingual merges the members of JSON objects into one object, the first
// occurrence of a member winning: the error frame a connection that has
// not said hello gets, which reads as an error in every dialect since
// each ignores the members it does not know. Status and Reason are the
// first Fatal's.
func Bilingual(fs ...*Fatal) *Fatal {
	out := &Fatal{}
	buf := []byte{'{'}
	seen := map[string]bool{}
	for i, f := range fs {
		if i == 0 {
			out.Status, out.Reason, out.Err = f.Status, f.Reason, f.Err
		}
		dec := json.NewDecoder(bytes.NewReader(f.Frame))
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			panic(fmt.Sprintf("wire.Bilingual: frame %d is not a JSON object", i))
		}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				panic(fmt.Sprintf("wire.Bilingual: frame %d: %v", i, err))
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				panic(fmt.Sprintf("wire.Bilingual: frame %d: %v", i, err))
			}
			name := t.(string)
			if seen[name] {
				continue
			}
			seen[name] = true
			if len(buf) > 1 {
				buf = append(buf, ',')
			}
			key, _ := json.Marshal(name)
			buf = append(append(append(buf, key...), ':'), v...)
		}
	}
	out.Frame = append(buf, '}')
	return out
}
