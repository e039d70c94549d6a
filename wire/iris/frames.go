// Package iris is the Iris v1 dialect: JSON frames {v,id,type,chat_id,
// thread_id,cursor,payload} over one WebSocket per device. It decodes
// requests into gateway commands and encodes core events into frames; it
// knows nothing of SQL, and the core knows nothing of these field names,
// which are proto/irisv1's.
package iris

import (
	"errors"

	"github.com/irisgate/irisgate/internal/jsontext"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// Version is the protocol's major version.
const Version = irisv1.Version

// decode parses a frame's envelope and its id. A malformed frame yields an
// unsupported error and, where it could be read, the id.
func decode(data []byte) (*irisv1.Request, int64, error) {
	r, err := irisv1.DecodeRequest(data)
	if err != nil {
		de := new(irisv1.DecodeError) // every error DecodeRequest returns is one
		if !errors.As(err, &de) {
			de.Err = err
		}
		if errors.Is(err, irisv1.ErrVersion) {
			return nil, de.ID, errBadVersion
		}
		return nil, de.ID, errMalformed(de.Err)
	}
	if jsontext.LoneSurrogate(data) {
		// Decoded, it would be U+FFFD: stored as what the device never wrote.
		return nil, r.ID, errLoneSurrogate
	}
	return r, r.ID, nil
}

// payload decodes a frame's payload; absent and null payloads are empty.
func payload(env *irisv1.Request, v any) error {
	if err := irisv1.DecodePayload(env, v); err != nil {
		return errMalformed(err)
	}
	return nil
}
