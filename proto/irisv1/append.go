package irisv1

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// AppendHistory appends h's JSON, the same bytes as json.Marshal(h)
// (FuzzAppendHistory holds it to that), without reflection or a buffer of
// its own: a history page is the largest reply devices ask for often, and
// encoding/json was most of what answering one from memory cost. Media and
// runtime footers, rare in a page, still go through encoding/json; the
// error is json.Marshal's (a runtime float it cannot encode), and dst is
// then returned as it came.
func AppendHistory(dst []byte, h *History) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"messages":`...)
	if h.Messages == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range h.Messages {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendMessage(dst, &h.Messages[i]); err != nil {
				return dst[:start], err
			}
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"has_more":`...)
	dst = strconv.AppendBool(dst, h.HasMore)
	if h.OldestMessageID != "" {
		dst = append(dst, `,"oldest_message_id":`...)
		dst = appendText(dst, h.OldestMessageID)
	}
	return append(dst, '}'), nil
}

// appendMessage follows Message's fields and tags, in order.
func appendMessage(dst []byte, m *Message) ([]byte, error) {
	dst = append(dst, `{"message_id":`...)
	dst = appendText(dst, m.MessageID)
	dst = append(dst, `,"role":`...)
	dst = appendText(dst, m.Role)
	dst = append(dst, `,"text":`...)
	dst = appendText(dst, m.Text)
	if m.Reasoning != "" {
		dst = append(dst, `,"reasoning":`...)
		dst = appendText(dst, m.Reasoning)
	}
	if len(m.Media) > 0 {
		b, err := json.Marshal(m.Media)
		if err != nil {
			return dst, err
		}
		dst = append(dst, `,"media":`...)
		dst = append(dst, b...)
	}
	if m.ReplyTo != "" {
		dst = append(dst, `,"reply_to":`...)
		dst = appendText(dst, m.ReplyTo)
	}
	if m.Model != "" {
		dst = append(dst, `,"model":`...)
		dst = appendText(dst, m.Model)
	}
	if m.Tokens != 0 {
		dst = append(dst, `,"tokens":`...)
		dst = strconv.AppendInt(dst, int64(m.Tokens), 10)
	}
	if m.Runtime != nil {
		b, err := json.Marshal(m.Runtime)
		if err != nil {
			return dst, err
		}
		dst = append(dst, `,"runtime":`...)
		dst = append(dst, b...)
	}
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, m.TS, 10)
	return append(dst, '}'), nil
}

const hexDigits = "0123456789abcdef"

// plain8 says whether the 8 bytes of s are all plain: none with the top
// bit, none below 0x20, none of " \\ < > &. It may say no of plain bytes
// (appendText then looks at them one by one), never yes of others: the
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

// appendText appends s as a JSON string escaped exactly as encoding/json
// escapes it (HTML-safe): <, > and & as \u003c…, U+2028 and U+2029 as
// \u2028 and \u2029, control characters short where JSON has a short
// form, and each invalid UTF-8 byte as \ufffd.
func appendText(dst []byte, s string) []byte {
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
