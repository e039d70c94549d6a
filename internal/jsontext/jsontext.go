// Package jsontext checks JSON text for what encoding/json would accept
// and then change: a \u escape of a UTF-16 surrogate without its pair,
// which decodes to U+FFFD, so the gateway would store what the device
// never wrote. (Invalid UTF-8 bytes are the other such case; utf8.Valid
// finds those.)
package jsontext

// LoneSurrogate reports whether data holds a \uD800–\uDFFF escape that is
// not a high surrogate followed at once by a low one. data is assumed to
// be JSON, where a backslash appears only inside strings, so every one
// begins an escape.
func LoneSurrogate(data []byte) bool {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 >= len(data) {
			return false
		}
		if data[i+1] != 'u' {
			i++ // \\, \", \n…: the escaped byte is not an escape's start
			continue
		}
		r, ok := hex4(data[i+2:])
		if !ok {
			i++ // malformed: the decoder refuses it
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				if lo, ok := hex4(data[i+8:]); ok && lo >= 0xDC00 && lo < 0xE000 {
					i += 11
					continue
				}
			}
			return true
		case r >= 0xDC00 && r < 0xE000:
			return true
		}
		i += 5
	}
	return false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
