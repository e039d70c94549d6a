package record

import (
	"encoding/json"

	"github.com/irisgate/irisgate/core"
)

// MediaList is a message's media column.
type MediaList struct {
	V     int     `json:"v"`
	Media []Media `json:"media"`
}

// RuntimeRow is a message's runtime column.
type RuntimeRow struct {
	V int `json:"v"`
	Runtime
}

// EncodeMedia encodes a message's media list; "" for none.
func EncodeMedia(ms []core.Media) (string, error) {
	if len(ms) == 0 {
		return "", nil
	}
	b, err := json.Marshal(MediaList{V: Version, Media: mediaRecords(ms)})
	return string(b), err
}

// DecodeMedia decodes a media column; "" is none.
func DecodeMedia(s string) ([]core.Media, error) {
	if s == "" {
		return nil, nil
	}
	b := []byte(s)
	var r MediaList
	if err := decodeV1(KindMedia, b, &r); err != nil {
		return nil, err
	}
	return coreMedia(r.Media), nil
}

// EncodeRuntime encodes a message's runtime footer; "" for none.
func EncodeRuntime(r *core.Runtime) (string, error) {
	if r == nil {
		return "", nil
	}
	b, err := json.Marshal(RuntimeRow{V: Version, Runtime: *runtimeRecord(r)})
	return string(b), err
}

// DecodeRuntime decodes a runtime column; "" is none (nil).
func DecodeRuntime(s string) (*core.Runtime, error) {
	if s == "" {
		return nil, nil
	}
	b := []byte(s)
	var r RuntimeRow
	if err := decodeV1(KindRuntime, b, &r); err != nil {
		return nil, err
	}
	return r.Runtime.core(), nil
}
