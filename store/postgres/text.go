package postgres

import (
	"strings"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
)

// ErrNotText is a write of a string PostgreSQL's text type cannot hold: one
// with a NUL byte, or one that is not UTF-8. SQLite stores either as it
// is; PostgreSQL refuses them, so this store says so before sending. The
// gateway checks that what people send is UTF-8; a NUL inside it is the
// one difference a person can meet, and is told so (unsupported), not
// given an internal error. The store returns ErrNotText.New().
var ErrNotText = core.NewKind("text_not_storable", core.CodeUnsupported,
	"the text holds a NUL character (or bytes that are not UTF-8), which this gateway's store, PostgreSQL, cannot keep")

// storable reports whether every string argument can be PostgreSQL text.
func storable(args []any) bool {
	for _, a := range args {
		switch v := a.(type) {
		case string:
			if !isText(v) {
				return false
			}
		case []string:
			for _, s := range v {
				if !isText(s) {
					return false
				}
			}
		}
	}
	return true
}

func isText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
