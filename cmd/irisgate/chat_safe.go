package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/irisgate/irisgate/client"
)

// Everything the chat prints that came from the gateway (a reply, a
// model's tool output, an approval's command, a channel's name, an error
// message) may carry what a model was told to write: an escape sequence
// that sets the terminal's clipboard (OSC 52), hides text (SGR 8), moves
// the cursor back over a line (\r) or retitles the window. The chat writes
// its own escape sequences only; every remote string is made visible
// first, at the one place frames come in.

// visible renders the C0 and C1 control characters of s (but newline and
// tab) and DEL as visible symbols: ESC as ␛, CR as ␍, the rest of C0 as
// their Control Pictures, C1 as <U+009B>; invalid UTF-8 as U+FFFD.
func visible(s string) string {
	if !needsCleaning(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r) // ␀…␟: ␛ for ESC, ␍ for CR
		case r == 0x7f:
			b.WriteRune('␡')
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// visibleLine is visible for a string shown on one line (an approval's
// command): a newline shows as ␤, so a command cannot lay out lines of
// its own under the question.
func visibleLine(s string) string {
	return strings.ReplaceAll(visible(s), "\n", "␤")
}

// needsCleaning reports whether s holds anything visible would change:
// a control character but newline and tab, DEL, a C1 character (0xC2
// 0x80–0x9F in UTF-8) or invalid UTF-8.
func needsCleaning(s string) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			return true
		case c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] < 0xa0:
			return true
		case c >= 0x80:
			ascii = false
		}
	}
	return !ascii && !utf8.ValidString(s)
}

// cleanFrame makes every string of a frame from the gateway visible: its
// lane ids and each string anywhere in its payload. A payload that is not
// JSON is left to fail its decoding.
func cleanFrame(f client.Frame) client.Frame {
	f.Type, f.ChatID, f.ThreadID = visible(f.Type), visible(f.ChatID), visible(f.ThreadID)
	f.Payload = cleanJSON(f.Payload)
	return f
}

// cleanJSON is data with each string anywhere in it made visible, member
// names included; data that is not JSON is returned as it is.
func cleanJSON(data []byte) []byte {
	if len(data) == 0 || !bytes.ContainsAny(data, `\`) && !needsCleaning(string(data)) {
		return data // no escape, no control character: nothing to clean
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return data
	}
	if b, err := json.Marshal(cleanValue(v)); err == nil {
		return b
	}
	return data
}

// cleaned is v (a payload that reached the chat already decoded, such as
// the hello.ack client.Dial reads) with every string made visible, by the
// same rule as cleanFrame's: through its JSON, so a member irisv1 gains
// is covered too. Should that round trip ever fail, the zero value is
// returned rather than v, which would go out as it came.
func cleaned[T any](v T) T {
	var out T
	b, err := json.Marshal(v)
	if err != nil || json.Unmarshal(cleanJSON(b), &out) != nil {
		var zero T
		return zero
	}
	return out
}

func cleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return visible(x)
	case []any:
		for i := range x {
			x[i] = cleanValue(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[visible(k)] = cleanValue(e)
		}
		return out
	}
	return v
}
