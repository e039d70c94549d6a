package postgres

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrNotText is a write of a string PostgreSQL's text type cannot hold: one
// with a NUL byte, or one that is not UTF-8. SQLite stores either as it
// is; PostgreSQL refuses them, so this store says so before sending. The
// gateway checks that what people send is UTF-8; a NUL inside it is the
// one difference a person can meet.
var ErrNotText = errors.New("postgres: a string holds a NUL byte or is not UTF-8, which PostgreSQL's text cannot store")

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
