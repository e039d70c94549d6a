package store

import "fmt"

// CorruptError is a stored row that does not decode. It is never skipped:
// a reader that met one returns it, so nothing goes missing unnoticed.
type CorruptError struct {
	Table string // outbox, messages, conversation, lane_settings, devices
	Key   string // the row: a cursor, a message or device id, a lane
	Err   error  // from package record
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store: %s row %s does not decode: %v", e.Table, e.Key, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }
