package irisv1

// scanEnvelope is DecodeRequest's fast path: one pass over a frame whose
// envelope is plain (what apps send), filling env exactly as
// json.Unmarshal would, with no reflection and no second pass to check
// the syntax. encoding/json was most of the CPU a ping cost the gateway
// besides its system calls, and a hello was parsed four times.
//
// It answers false whenever it is not sure, and the caller then asks
// encoding/json, whose answer (an error included) is the reference:
// invalid JSON anywhere, a key with an escape or a non-ASCII byte, a key
// that matches a member only case-insensitively (encoding/json takes
// "Type" for "type"), a member given twice, a v or id that is not a plain
// integer, a string member that is null or has an escape or a non-ASCII
// byte (encoding/json would replace invalid UTF-8), nesting deeper than
// scanMaxDepth. FuzzScanEnvelope holds it to encoding/json.
func scanEnvelope(data []byte, env *inEnvelope) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	var seen uint8
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		ks := i + 1
		ke := plainString(data, ks)
		if ke < 0 {
			return false
		}
		key := data[ks:ke]
		i = skipSpace(data, ke+1)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		m := member(key)
		if m < 0 {
			return false // a member's name in another case
		}
		if m > 0 {
			if seen&(1<<m) != 0 {
				return false
			}
			seen |= 1 << m
		}
		switch m {
		case mV, mID:
			e := plainInt(data, i)
			if e < 0 {
				return false
			}
			if m == mID {
				env.ID = data[i:e:e]
			} else {
				v := 0
				neg := data[i] == '-'
				for _, c := range data[i:e] {
					if c != '-' {
						v = v*10 + int(c-'0')
					}
				}
				if neg {
					v = -v
				}
				env.V = &v
			}
			i = e
		case mType, mChatID, mThreadID:
			if i >= len(data) || data[i] != '"' {
				return false
			}
			e := plainString(data, i+1)
			if e < 0 {
				return false
			}
			s := string(data[i+1 : e])
			switch m {
			case mType:
				env.Type, env.typed = s, true
			case mChatID:
				env.ChatID = &s
			default:
				env.ThreadID = &s
			}
			i = e + 1
		default: // payload, or a member the envelope does not have
			e := skipValue(data, i, 0)
			if e < 0 {
				return false
			}
			if m == mPayload {
				env.Payload = append([]byte(nil), data[i:e]...)
			}
			i = e
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// The envelope's members, as member numbers them; 0 is any other name.
const (
	mOther = iota
	mV
	mID
	mType
	mChatID
	mThreadID
	mPayload
)

var memberNames = [...]string{mV: "v", mID: "id", mType: "type", mChatID: "chat_id", mThreadID: "thread_id", mPayload: "payload"}

// member is the envelope member named key, mOther for none, and -1 for a
// name equal to one only when case is ignored (ASCII: key has no other
// bytes).
func member(key []byte) int {
	for m, name := range memberNames {
		if m == mOther || len(name) != len(key) {
			continue
		}
		if string(key) == name {
			return m
		}
		fold := true
		for j := range key {
			if lower(key[j]) != name[j] {
				fold = false
				break
			}
		}
		if fold {
			return -1
		}
	}
	return mOther
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainString is the index of the quote closing a string that begins at
// i (after its opening quote), or -1 unless every byte of it is printable
// ASCII other than a backslash.
func plainString(data []byte, i int) int {
	for ; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i
		case c < 0x20 || c >= 0x80 || c == '\\':
			return -1
		}
	}
	return -1
}

// plainInt is the end of an integer literal at i (-?(0|[1-9][0-9]*), at
// most 18 digits, not followed by a fraction or exponent), or -1.
func plainInt(data []byte, i int) int {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	d := j
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		j++
	}
	if j == d || j-d > 18 || (data[d] == '0' && j-d > 1) {
		return -1
	}
	if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return -1
	}
	return j
}

// scanMaxDepth bounds the nesting skipValue follows (encoding/json's own
// bound, 10000, is for the fallback to enforce).
const scanMaxDepth = 64

// skipValue is the end of the JSON value at i, or -1 when it is not one
// (or nests deeper than scanMaxDepth).
func skipValue(data []byte, i, depth int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; {
	case c == '{' || c == '[':
		if depth >= scanMaxDepth {
			return -1
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == end {
			return i + 1
		}
		for {
			if c == '{' {
				if i >= len(data) || data[i] != '"' {
					return -1
				}
				if i = skipString(data, i+1); i < 0 {
					return -1
				}
				i = skipSpace(data, i)
				if i >= len(data) || data[i] != ':' {
					return -1
				}
				i = skipSpace(data, i+1)
			}
			if i = skipValue(data, i, depth+1); i < 0 {
				return -1
			}
			i = skipSpace(data, i)
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case ',':
				i = skipSpace(data, i+1)
			case end:
				return i + 1
			default:
				return -1
			}
		}
	case c == '"':
		return skipString(data, i+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(data, i)
	case c == 't':
		return literal(data, i, "true")
	case c == 'f':
		return literal(data, i, "false")
	case c == 'n':
		return literal(data, i, "null")
	}
	return -1
}

func literal(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipString is the index after the quote closing a string that begins
// at i (after its opening quote), or -1 when it is not valid JSON. Bytes
// of 0x80 and above pass, as encoding/json's scanner lets them.
func skipString(data []byte, i int) int {
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		default:
			i++
		}
	}
	return -1
}

// skipNumber is the end of the JSON number at i, or -1.
func skipNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		if i = digits(data, i+1); i < 0 {
			return -1
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i = digits(data, i); i < 0 {
			return -1
		}
	}
	return i
}

// digits skips the run of at least one digit at data[i:] and returns
// where it ends; -1 when there is none.
func digits(data []byte, i int) int {
	d := i
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	if i == d {
		return -1
	}
	return i
}
