package jsontext

import (
	"unicode/utf8"
)

// Writing JSON strings by hand, byte-equal to encoding/json, is what the
// frames and records the gateway encodes on its hot paths need
// (proto/irisv1's history pages, store/record's rows): one escaper for
// them all.

const hexDigits = "0123456789abcdef"

// plainWords returns how many of s's leading bytes, in whole words of 8,
// are all plain: none with the top bit, none below 0x20, none of
// " \\ < > &. It may stop at a word of plain bytes (AppendString then
// looks at them one by one), never pass a word holding another: the
// lowest byte below 0x20 borrows and sets its top bit, and the lowest
// zero byte of each y is always found. Three zero tests cover the five
// bytes: < and > differ only in bit 1 (both are 0x3e with it set, and no
// other byte is), " and & only in bit 2 (both 0x26 with it set). One call
// runs over a whole stretch of plain text: a call per word cost twice
// the time (BenchmarkAppendString).
func plainWords(s string) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		bad := x | (x - ones*0x20)          // a top bit, or a byte below 0x20
		y := (x | ones*0x02) ^ (ones * '>') // < or >
		bad |= (y - ones) &^ y
		y = (x | ones*0x04) ^ (ones * '&') // " or &
		bad |= (y - ones) &^ y
		y = x ^ (ones * '\\')
		bad |= (y - ones) &^ y
		if bad&highs != 0 {
			break
		}
	}
	return i
}

// plain are the ASCII bytes a JSON string holds as they are.
var plain = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// AppendString appends s as a JSON string escaped exactly as encoding/json
// escapes it (HTML-safe): <, > and & as \u003c…, U+2028 and U+2029 as
// \u2028 and \u2029, control characters short where JSON has a short
// form, and each invalid UTF-8 byte as \ufffd.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time: most of a text is.
		i += plainWords(s[i:])
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if plain[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
