package core

import (
	"strings"
	"testing"
	"time"
)

func TestNewMessageIDAscendsWithTime(t *testing.T) {
	seen := map[string]bool{}
	prev := NewMessageID()
	for range 3 {
		// The next millisecond's ids sort after every id of this one.
		start := time.Now().UnixMilli()
		for time.Now().UnixMilli() == start {
		}
		id := NewMessageID()
		if id <= prev {
			t.Fatalf("%s, made a millisecond later, sorts before %s", id, prev)
		}
		prev = id
	}
	for range 10000 {
		id := NewMessageID()
		if seen[id] {
			t.Fatalf("%s minted twice", id)
		}
		seen[id] = true
		if len(id) != 2+24 || !strings.HasPrefix(id, "m_") || strings.Trim(id[2:], "0123456789abcdefghijklmnopqrstuv") != "" {
			t.Fatalf("malformed message id %q", id)
		}
	}
}
