package irisv1

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// oldMarshal is wire/iris's marshal as it was before this package (main
// at b84ad07), kept to measure AppendFrame against in the same run.
func oldMarshal(env Envelope, p any) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		b, _ = json.Marshal(Error{Code: "internal", Message: "unencodable payload: " + err.Error()})
		env.Type = "error"
	}
	out := make([]byte, 0, len(b)+96)
	out = append(out, `{"v":`...)
	out = strconv.AppendInt(out, int64(env.V), 10)
	if env.ID != 0 {
		out = append(out, `,"id":`...)
		out = strconv.AppendInt(out, env.ID, 10)
	}
	out = append(out, `,"type":`...)
	out = oldAppendString(out, env.Type)
	if env.ChatID != "" {
		out = append(out, `,"chat_id":`...)
		out = oldAppendString(out, env.ChatID)
	}
	if env.ThreadID != "" {
		out = append(out, `,"thread_id":`...)
		out = oldAppendString(out, env.ThreadID)
	}
	if env.Cursor != 0 {
		out = append(out, `,"cursor":`...)
		out = strconv.AppendInt(out, env.Cursor, 10)
	}
	out = append(out, `,"payload":`...)
	out = append(out, b...)
	return append(out, '}')
}

func oldAppendString(dst []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(dst, q...)
}

// newMarshal is the path wire/iris takes now: the payload through
// encoding/json, the envelope through AppendFrame.
func newMarshal(env Envelope, p any) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return AppendFrame(make([]byte, 0, len(b)+96), env, b)
}

// BenchmarkAppendFrame encodes a message.update (the fan-out's most
// frequent frame) the old way and the new, short and long:
//
//	go test -run x -bench AppendFrame -count 6 ./proto/irisv1
func BenchmarkAppendFrame(b *testing.B) {
	env := Envelope{V: Version, Type: TypeMessageUpdate, ChatID: "default", ThreadID: "t_01J8ZQ4K7M3N5P"}
	for _, size := range []int{64, 4096} {
		p := MessageUpdate{MessageID: "m_01J8ZQ4K7M3N5P6Q", Text: strings.Repeat("All work and no play. ", size/22+1)[:size]}
		if string(oldMarshal(env, p)) != string(newMarshal(env, p)) {
			b.Fatal("the old and the new encoding differ")
		}
		for _, c := range []struct {
			name string
			fn   func(Envelope, any) []byte
		}{{"old", oldMarshal}, {"new", newMarshal}} {
			b.Run(c.name+"/update-"+strconv.Itoa(size)+"B", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c.fn(env, p)
				}
			})
		}
	}
}
