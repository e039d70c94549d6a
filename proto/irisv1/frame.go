package irisv1

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/irisgate/irisgate/internal/jsontext"
)

// AppendFrame appends env with payload (a JSON value, written as it is)
// as one frame: the same bytes json.Marshal makes of env holding payload,
// without checking and copying the payload again. That copy dominated the
// fan-out of long message.update frames, which is why the envelope is
// written by hand. An empty payload is written as null, as json.Marshal
// writes a nil json.RawMessage. env.Payload is not used.
func AppendFrame(dst []byte, env Envelope, payload []byte) []byte {
	dst = AppendEnvelope(slices.Grow(dst, len(payload)+96), env)
	if len(payload) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, payload...)
	}
	return append(dst, '}')
}

// AppendEnvelope appends what AppendFrame writes before the payload: the
// frame is that, the payload's JSON, and '}'. A payload encoded straight
// after it (AppendHistory) is not copied.
func AppendEnvelope(dst []byte, env Envelope) []byte {
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, int64(env.V), 10)
	if env.ID != 0 {
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendInt(dst, env.ID, 10)
	}
	dst = append(dst, `,"type":`...)
	dst = jsontext.AppendString(dst, env.Type)
	if env.ChatID != "" {
		dst = append(dst, `,"chat_id":`...)
		dst = jsontext.AppendString(dst, env.ChatID)
	}
	if env.ThreadID != "" {
		dst = append(dst, `,"thread_id":`...)
		dst = jsontext.AppendString(dst, env.ThreadID)
	}
	if env.Cursor != 0 {
		dst = append(dst, `,"cursor":`...)
		dst = strconv.AppendInt(dst, env.Cursor, 10)
	}
	return append(dst, payloadKey...)
}

// Marshal renders env with payload p, encoded with encoding/json.
func Marshal(env Envelope, p any) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return AppendFrame(make([]byte, 0, len(b)+96), env, b), nil
}

// payloadKey follows the envelope's other members in every frame
// AppendFrame writes; it cannot occur inside them, as quotes in JSON
// strings are escaped.
var payloadKey = []byte(`,"payload":`)

// SpliceCursor returns frame, written by AppendFrame without a cursor,
// with cursor spliced in before its payload: a live broadcast frame as
// sync replays it, the same bytes as encoding it with the cursor from the
// start. It returns nil for a nil frame or one AppendFrame did not write.
func SpliceCursor(frame []byte, cursor int64) []byte {
	i := bytes.Index(frame, payloadKey)
	if frame == nil || i < 0 {
		return nil
	}
	out := make([]byte, 0, len(frame)+32)
	out = append(out, frame[:i]...)
	out = append(out, `,"cursor":`...)
	out = strconv.AppendInt(out, cursor, 10)
	return append(out, frame[i:]...)
}
