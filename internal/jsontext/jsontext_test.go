package jsontext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLoneSurrogate(t *testing.T) {
	for in, want := range map[string]bool{
		`{"text":"\ud83d"}`:                 true,
		`{"text":"\uDE00 after"}`:           true,
		`{"text":"\ud83d\u0041"}`:           true,
		`{"text":"\ud83d\\ude00"}`:          true, // an escaped backslash, then text
		`{"text":"\ud83d\ude00"}`:           false,
		`{"text":"\uD83D\uDE00\ud83d"}`:     true,
		`{"text":"\\ud83d"}`:                false, // the text \ud83d, not an escape
		`{"text":"\\\ud83d"}`:               true,
		`{"text":"caf\u00e9 \u2603"}`:       false,
		`{"text":"plain"}`:                  false,
		`{"text":"\u12"}`:                   false, // malformed: json refuses it
		`{"text":"end\\"}`:                  false,
		`{"a":"\ud800\udc00","b":"\ud800"}`: true,
	} {
		if got := LoneSurrogate([]byte(in)); got != want {
			t.Errorf("LoneSurrogate(%s) = %v, want %v", in, got, want)
		}
	}
}

// The oracle: encoding/json turns a lone surrogate into U+FFFD, and
// nothing else that is valid into it but U+FFFD itself.
func FuzzLoneSurrogate(f *testing.F) {
	for _, s := range []string{`"\ud83d"`, `"\ud83d\ude00"`, `"\\ud83d"`, `["\udc00",1]`, `{"a":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lone := LoneSurrogate(data)
		var v any
		if !utf8.Valid(data) || !json.Valid(data) || json.Unmarshal(data, &v) != nil {
			return // invalid UTF-8 is utf8.Valid's to find
		}
		out, _ := json.Marshal(v)
		replaced := bytes.Contains(out, []byte("\ufffd"))
		if strings.Contains(strings.ToLower(string(data)), `\ufffd`) || bytes.Contains(data, []byte("\ufffd")) {
			return // U+FFFD written by the sender: no telling
		}
		if lone != replaced {
			t.Fatalf("LoneSurrogate(%q) = %v, but decoding it replaced a character: %v", data, lone, replaced)
		}
	})
}
