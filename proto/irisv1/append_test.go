package irisv1

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// checkAppendHistory fails unless AppendHistory writes json.Marshal's
// bytes, after what dst held, or refuses what json.Marshal refuses.
func checkAppendHistory(t *testing.T, h *History) {
	t.Helper()
	want, werr := json.Marshal(h)
	prefix := []byte(`{"v":1,"payload":`)
	got, err := AppendHistory(bytes.Clone(prefix), h)
	if (err != nil) != (werr != nil) {
		t.Fatalf("AppendHistory error %v, json.Marshal's %v", err, werr)
	}
	if err != nil {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("a refused page left %q after the prefix", got[len(prefix):])
		}
		return
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendHistory:\n %s\njson.Marshal:\n %s", got, want)
	}
}

func TestAppendHistoryIsEncodingJSON(t *testing.T) {
	pct, lat, nan := 42, 0.000123456, math.NaN()
	odd := "plain <b>&</b> \"q\" \\ \b\f\n\r\t\x00\x1f\x7f é 😀 \u2028\u2029 \xff\xfe bad \xe2\x82 end"
	full := Message{MessageID: "m_1", Role: "assistant", Text: odd, Reasoning: "why " + odd,
		Media:   []Media{{MediaID: "med_1", Kind: "image", Mime: "image/png", Size: 3, Filename: "a<b>.png", MessageID: "m_1"}},
		ReplyTo: "m_0", Model: "gpt-x", Tokens: -7, Runtime: &Runtime{Model: "r", ContextPct: &pct, Cwd: "/tmp", Latency: &lat}, TS: 1733050000000}
	for name, h := range map[string]*History{
		"nil messages":                 {},
		"empty messages":               {Messages: []Message{}, HasMore: true},
		"plain":                        {Messages: []Message{{MessageID: "m_1", Role: "user", Text: "hi", TS: 1}}, OldestMessageID: "m_1"},
		"every field":                  {Messages: []Message{full, {MessageID: "m_2", Role: "user", Text: strings.Repeat("x", 5000)}}, HasMore: true, OldestMessageID: odd},
		"a runtime json cannot encode": {Messages: []Message{{MessageID: "m_1", Runtime: &Runtime{Cost: &nan}}}},
	} {
		t.Run(name, func(t *testing.T) { checkAppendHistory(t, h) })
	}
}

// FuzzAppendHistory: any strings, any numbers, the same bytes as
// encoding/json.
func FuzzAppendHistory(f *testing.F) {
	f.Add("m_1", "user", "hello", "", "", "", 0, int64(1), true, "m_1", false)
	f.Add("m\u2028", "assistant", "<&>\"\\\x00\xff", "\xe2\x82", "r\t", "model", -3, int64(-1), false, "", true)
	f.Fuzz(func(t *testing.T, id, role, text, reasoning, replyTo, model string, tokens int, ts int64, more bool, oldest string, media bool) {
		m := Message{MessageID: id, Role: role, Text: text, Reasoning: reasoning, ReplyTo: replyTo, Model: model, Tokens: tokens, TS: ts}
		if media {
			m.Media = []Media{{MediaID: text, Filename: reasoning, Size: ts}}
			m.Runtime = &Runtime{Model: model, Cwd: text}
		}
		checkAppendHistory(t, &History{Messages: []Message{m, {MessageID: oldest, Text: role}}, HasMore: more, OldestMessageID: oldest})
	})
}

// BenchmarkHistoryPage is one page of ten 120-byte messages (irisgate
// bench's round trips), encoded as the history handler did (json.Marshal,
// then AppendFrame) and as it does (AppendEnvelope, AppendHistory).
//
//	go test -run x -bench HistoryPage -count 6 ./proto/irisv1
func BenchmarkHistoryPage(b *testing.B) {
	h := &History{HasMore: true, OldestMessageID: "msg_0123456789abcdef00"}
	for i := range 10 {
		h.Messages = append(h.Messages, Message{MessageID: "msg_0123456789abcdef0" + string(rune('0'+i)), Role: "user",
			Text: strings.Repeat("pub 7 ", 20), TS: 1733050000000 + int64(i)})
	}
	env := Envelope{V: Version, ID: 7, Type: TypeHistory, ChatID: "default"}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, _ := json.Marshal(h)
			AppendFrame(make([]byte, 0, len(p)+96), env, p)
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, _ := AppendHistory(AppendEnvelope(make([]byte, 0, 2048), env), h)
			_ = append(f, '}')
		}
	})
}

// AppendHistory writes Message's fields by hand: a field added to
// History, Message, or one whose tag changes, must be added to it too.
func TestAppendHistoryKnowsEveryField(t *testing.T) {
	for typ, want := range map[reflect.Type]string{
		reflect.TypeFor[History](): `Messages json:"messages"|HasMore json:"has_more"|OldestMessageID json:"oldest_message_id,omitempty"`,
		reflect.TypeFor[Message](): `MessageID json:"message_id"|Role json:"role"|Text json:"text"|Reasoning json:"reasoning,omitempty"|` +
			`Media json:"media,omitempty"|ReplyTo json:"reply_to,omitempty"|Model json:"model,omitempty"|Tokens json:"tokens,omitempty"|` +
			`Runtime json:"runtime,omitempty"|TS json:"ts"`,
	} {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name+" "+string(f.Tag))
		}
		if g := strings.Join(got, "|"); g != want {
			t.Errorf("%s's fields are now\n %s\nAppendHistory writes\n %s", typ.Name(), g, want)
		}
	}
}
