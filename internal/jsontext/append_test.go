package jsontext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// plainWords never passes a word holding any byte that is not plain,
// wherever it sits, among plain bytes of every kind.
func TestPlainWords(t *testing.T) {
	for _, fill := range []byte{' ', 'a', '~', '!', '=', '?'} {
		for v := range 256 {
			for pos := range 8 {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(v)
				want := v < 0x80 && plain[v]
				if got := plainWords(string(w)) == 8; got != want {
					t.Fatalf("plainWords(%q) passed it: %v, want %v", w, got, want)
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

// A streamed reply's text as message.update carries it: plain English
// with punctuation and line breaks, a few thousand bytes. ns/byte is the
// escaper's cost; encoding/json's string path is the same work.
func BenchmarkAppendString(b *testing.B) {
	const para = "The committer takes what is queued, writes it in one transaction and answers each write. " +
		"Sends that arrive while it commits wait for the next one, so a burst shares its commits.\n"
	s := strings.Repeat(para, 4096/len(para)+1)[:4096]
	b.Run("jsontext", func(b *testing.B) {
		var dst []byte
		for b.Loop() {
			dst = AppendString(dst[:0], s)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(s)), "ns/byte")
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(s)), "ns/byte")
	})
}
