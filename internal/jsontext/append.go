package jsontext

import (
	"encoding/binary"
	"unicode/utf8"
)

// Writing JSON strings by hand, byte-equal to encoding/json, is what the
// frames and records the gateway encodes on its hot paths need
// (proto/irisv1's history pages, store/record's rows): one escaper for
// them all.

const hexDigits = "0123456789abcdef"

// plain8 says whether the 8 bytes of s are all plain: none with the top
// bit, none below 0x20, none of " \\ < > &. It may say no of plain bytes
// (AppendString then looks at them one by one), never yes of others: the
// lowest byte below 0x20 borrows and sets its top bit, and the lowest
// zero byte of y is always found.
func plain8(s string) bool {
	x := binary.LittleEndian.Uint64([]byte(s))
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	bad := (x | (x - ones*0x20)) & highs // a top bit, or a byte below 0x20
	for _, c := range [...]uint64{'"', '\\', '<', '>', '&'} {
		y := x ^ (ones * c)
		bad |= (y - ones) &^ y & highs // a zero byte: c was there
	}
	return bad == 0
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
		for i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
		}
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
