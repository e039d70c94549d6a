package jsontext

import (
	"bytes"
	"encoding/json"
	"testing"
)

// plain8 never calls plain a word holding any byte that is not, wherever
// it sits, among plain bytes of every kind.
func TestPlain8(t *testing.T) {
	for _, fill := range []byte{' ', 'a', '~', '!', '=', '?'} {
		for v := range 256 {
			for pos := range 8 {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(v)
				want := v < 0x80 && plain[v]
				if got := plain8(string(w)); got != want {
					t.Fatalf("plain8(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}

// AppendString writes what json.Marshal writes of any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain text", "<a href=\"x\">&amp;</a>", "\u2028\u2029", "\xff\xfe", "tab\there\nnew", "\x00\x1f\x7f", "é😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("AppendString(%q) = %s, json.Marshal %s", s, got[1:], want)
		}
	})
}
