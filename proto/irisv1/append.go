package irisv1

import (
	"encoding/json"
	"strconv"

	"github.com/irisgate/irisgate/internal/jsontext"
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
		dst = jsontext.AppendString(dst, h.OldestMessageID)
	}
	return append(dst, '}'), nil
}

// AppendMessage appends m's JSON, the same bytes as json.Marshal(m), as
// AppendHistory does for each of a page's: message.new is the payload a
// burst of sends encodes most. On error (json.Marshal's, as AppendHistory's)
// dst is returned as it came.
func AppendMessage(dst []byte, m *Message) ([]byte, error) {
	out, err := appendMessage(dst, m)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// AppendMessageUpdate appends u's JSON, the same bytes as json.Marshal(u):
// a streamed reply sends one for every chunk, each with the whole text so
// far.
func AppendMessageUpdate(dst []byte, u *MessageUpdate) []byte {
	dst = append(dst, `{"message_id":`...)
	dst = jsontext.AppendString(dst, u.MessageID)
	dst = append(dst, `,"text":`...)
	dst = jsontext.AppendString(dst, u.Text)
	return append(dst, '}')
}

// appendMessage follows Message's fields and tags, in order.
func appendMessage(dst []byte, m *Message) ([]byte, error) {
	dst = append(dst, `{"message_id":`...)
	dst = jsontext.AppendString(dst, m.MessageID)
	dst = append(dst, `,"role":`...)
	dst = jsontext.AppendString(dst, m.Role)
	dst = append(dst, `,"text":`...)
	dst = jsontext.AppendString(dst, m.Text)
	if m.Reasoning != "" {
		dst = append(dst, `,"reasoning":`...)
		dst = jsontext.AppendString(dst, m.Reasoning)
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
		dst = jsontext.AppendString(dst, m.ReplyTo)
	}
	if m.Model != "" {
		dst = append(dst, `,"model":`...)
		dst = jsontext.AppendString(dst, m.Model)
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
