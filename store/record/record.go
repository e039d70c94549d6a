// Package record is the format of what the store persists as JSON: outbox
// events, a message's media list and runtime footer, the agent's
// conversation entries, lane settings and Web Push subscriptions.
//
// The JSON names here are the stored format, not Go's field names: a core
// type may be renamed freely, a record field never is. Fields are only ever
// added (an older reader ignores what it does not know), and every record
// carries "v":1. A change that cannot be made by adding a field is a new
// version, with a migration in package store.
//
// The package knows no database, so the SQLite store and a later PostgreSQL
// one share it. The shapes written before records existed (version 0, the
// Go field names of package core and agent) are frozen in legacy.go; only the
// store's migration reads them.
package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/irisgate/irisgate/core"
)

// Version is the version every record is written with.
const Version = 1

// Kinds of record, as errors name them.
const (
	KindEvent        = "event"
	KindMedia        = "media"
	KindRuntime      = "runtime"
	KindConversation = "conversation"
	KindLaneSettings = "lane_settings"
	KindWebPush      = "webpush"
)

// VersionError is a body written with a version this code does not read:
// a newer irisgate's (downgrading needs the copy the migration kept), or a
// version 0 body the migration should have rewritten.
type VersionError struct {
	Kind string
	Got  int
}

func (e *VersionError) Error() string {
	if e.Got == 0 {
		return fmt.Sprintf("record: %s is in the format before records (v0); the store's migration rewrites it", e.Kind)
	}
	return fmt.Sprintf("record: %s has version %d, this irisgate reads version %d", e.Kind, e.Got, Version)
}

// DecodeError is a body that is not a record of its kind.
type DecodeError struct {
	Kind string
	Err  error
}

func (e *DecodeError) Error() string { return fmt.Sprintf("record: unreadable %s: %v", e.Kind, e.Err) }

func (e *DecodeError) Unwrap() error { return e.Err }

// v1Prefix is how every body this package writes begins: "v" is the first
// field of every record, so the common case is told without a parse.
var v1Prefix = []byte(`{"v":1`)

// VersionOf returns the version of a stored body: 0 for the shapes before
// records (objects without "v", or a JSON array for a media list).
func VersionOf(kind string, b []byte) (int, error) {
	if bytes.HasPrefix(b, v1Prefix) && len(b) > len(v1Prefix) && (b[len(v1Prefix)] == ',' || b[len(v1Prefix)] == '}') {
		return 1, nil
	}
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 0 && b[0] == '[' && kind == KindMedia {
		return 0, nil
	}
	if len(b) == 0 || b[0] != '{' {
		return 0, &DecodeError{kind, fmt.Errorf("not a JSON object")}
	}
	// Another writer's spacing or member order. No shape of version 0 has
	// a member named v (or V: encoding/json matches names without case).
	var probe struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return 0, &DecodeError{kind, err}
	}
	if probe.V == nil {
		return 0, nil
	}
	if *probe.V < 1 {
		return 0, &DecodeError{kind, fmt.Errorf("version %d", *probe.V)}
	}
	return *probe.V, nil
}

// decodeV1 unmarshals a body that must be of the current version into v.
func decodeV1(kind string, b []byte, v any) error {
	n, err := VersionOf(kind, b)
	if err != nil {
		return err
	}
	if n != Version {
		return &VersionError{kind, n}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &DecodeError{kind, err}
	}
	return nil
}

// Upgrade rewrites a stored body of kind as the current version: a
// version 0 body is decoded with the frozen shapes and encoded anew
// (changed); a current one is decoded to prove it reads and returned as it
// is. Only the store's migration uses it: readers take the current version
// only.
func Upgrade(kind string, b []byte) (out []byte, changed bool, err error) {
	n, err := VersionOf(kind, b)
	if err != nil {
		return nil, false, err
	}
	if n > Version {
		return nil, false, &VersionError{kind, n}
	}
	if n == Version {
		switch kind {
		case KindEvent:
			_, err = DecodeEvent(b)
		case KindMedia:
			_, err = DecodeMedia(string(b))
		case KindRuntime:
			_, err = DecodeRuntime(string(b))
		case KindConversation:
			_, err = DecodeConversation(b)
		case KindLaneSettings:
			_, err = DecodeLaneSettings(b)
		case KindWebPush:
			_, err = DecodeWebPush(b)
		default:
			err = fmt.Errorf("record: no kind %q", kind)
		}
		return b, false, err
	}
	switch kind {
	case KindEvent:
		var ev *core.Event
		if ev, err = decodeEventV0(b); err == nil {
			out, err = EncodeEvent(ev)
		}
	case KindMedia:
		var ms []core.Media
		if ms, err = decodeMediaV0(b); err == nil {
			var s string
			s, err = EncodeMedia(ms)
			out = []byte(s)
		}
	case KindRuntime:
		var r *core.Runtime
		if r, err = decodeRuntimeV0(b); err == nil {
			var s string
			s, err = EncodeRuntime(r)
			out = []byte(s)
		}
	case KindConversation:
		var e ConversationEntry
		if e, err = decodeConversationV0(b); err == nil {
			out, err = EncodeConversation(e)
		}
	case KindLaneSettings:
		var s LaneSettings
		if s, err = decodeLaneSettingsV0(b); err == nil {
			out, err = EncodeLaneSettings(s)
		}
	case KindWebPush:
		var w WebPush
		if w, err = decodeWebPushV0(b); err == nil {
			out, err = EncodeWebPush(w)
		}
	default:
		err = fmt.Errorf("record: no kind %q", kind)
	}
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			err = &DecodeError{kind, err}
		}
		return nil, false, err
	}
	return out, true, nil
}
