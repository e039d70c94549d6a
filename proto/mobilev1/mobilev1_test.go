package mobilev1

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestB64Size(t *testing.T) {
	for n := range 40 {
		data := bytes.Repeat([]byte{0xa5}, n)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			s := enc.EncodeToString(data)
			if got := B64Size(s); got != n {
				t.Errorf("B64Size(%q) = %d, want %d", s, got, n)
			}
			b, e := DecodeB64("data", s)
			if e != nil || !bytes.Equal(b, data) {
				t.Errorf("DecodeB64(%q) = %v, %v", s, b, e)
			}
		}
	}
	// Line breaks (MIME-style base64) are not counted.
	s := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 100))
	wrapped := s[:76] + "\r\n" + s[76:] + "\n"
	if got := B64Size(wrapped); got != 100 {
		t.Errorf("B64Size of wrapped base64 = %d, want 100", got)
	}
	if b, e := DecodeB64("data", wrapped); e != nil || len(b) != 100 {
		t.Errorf("DecodeB64 of wrapped base64: %d bytes, %v", len(b), e)
	}
	for _, bad := range []string{"!!!!", "QQ=Q", "Q", "QUJD\x00"} {
		if _, e := DecodeB64("data", bad); e == nil || e.Code != CodeBadFrame {
			t.Errorf("DecodeB64(%q) = %v, want bad_frame", bad, e)
		}
	}
}

func TestSplitChars(t *testing.T) {
	text := strings.Repeat("é", ChunkChars) + strings.Repeat("a", ChunkChars) + "🙂"
	parts := SplitChars(text, ChunkChars)
	if len(parts) != 3 || chars(parts[0]) != ChunkChars || chars(parts[1]) != ChunkChars || parts[2] != "🙂" {
		t.Fatalf("split into %d parts", len(parts))
	}
	if strings.Join(parts, "") != text {
		t.Fatal("parts do not concatenate to the text")
	}
	if p := SplitChars("", ChunkChars); len(p) != 1 || p[0] != "" {
		t.Fatalf("empty text: %q", p)
	}
}

// TestLimitBoundaries: each limit of the protocol's table is inclusive,
// and one unit more is refused with its code (the end-to-end tests cover
// each over a socket; the megabyte boundaries are checked here, where they
// are cheap).
func TestLimitBoundaries(t *testing.T) {
	lit := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	b64 := func(n int) json.RawMessage {
		return json.RawMessage(`"` + base64.StdEncoding.EncodeToString(make([]byte, n)) + `"`)
	}
	at, over := b64(MaxMediaBytes), b64(MaxMediaBytes+1)
	want := func(what string, e *Error, code string) {
		t.Helper()
		switch {
		case code == "" && e != nil:
			t.Errorf("%s: refused: %v", what, e)
		case code != "" && (e == nil || e.Code != code):
			t.Errorf("%s: %v, want %s", what, e, code)
		}
	}
	_, e := (&Frame{T: "audio", ID: "a", m: members{Format: lit("ogg"), Data: at}}).Audio()
	want("audio of 8 MiB", e, "")
	_, e = (&Frame{T: "audio", ID: "a", m: members{Format: lit("ogg"), Data: over}}).Audio()
	want("audio of 8 MiB + 1", e, CodeTooBig)
	_, e = (&Frame{T: "media", ID: "m", m: members{Kind: lit("image"), Data: at}}).Media()
	want("a media frame of 8 MiB", e, "")
	_, e = (&Frame{T: "media", ID: "m", m: members{Kind: lit("image"), Data: over}}).Media()
	want("a media frame of 8 MiB + 1", e, CodeTooBig)
	_, e = (&Frame{T: "deliver", m: members{Media: json.RawMessage(`{"kind":"document","data":` + string(at) + `}`)}}).Deliver()
	want("delivered media of 8 MiB", e, "")
	_, e = (&Frame{T: "deliver", m: members{Media: json.RawMessage(`{"kind":"document","data":` + string(over) + `}`)}}).Deliver()
	want("delivered media of 8 MiB + 1", e, CodeTooBig)

	text := strings.Repeat("é", MaxTextChars)
	_, e = (&Frame{T: "text", ID: "t", m: members{Text: lit(text)}}).Text()
	want("text of 12,000 characters", e, "")
	_, e = (&Frame{T: "text", ID: "t", m: members{Text: lit(text + "é")}}).Text()
	want("text of 12,001 characters", e, CodeTooBig)
	_, e = (&Frame{T: "media", ID: "m", m: members{Kind: lit("image"), Data: b64(1), Caption: lit(text)}}).Media()
	want("caption of 12,000 characters", e, "")
	_, e = (&Frame{T: "media", ID: "m", m: members{Kind: lit("image"), Data: b64(1), Caption: lit(text + "x")}}).Media()
	want("caption of 12,001 characters", e, CodeTooBig)
	_, e = (&Frame{T: "deliver", m: members{Text: lit(text + "x")}}).Deliver()
	want("delivered text of 12,001 characters", e, CodeTooBig)

	_, e = (&Frame{T: "media", ID: "m", m: members{Kind: lit("image"), Data: b64(1), Part: lit2(2047), Parts: lit2(2048)}}).Media()
	want("part 2047 of 2048", e, "")
	_, e = (&Frame{T: "media", ID: "m", m: members{Kind: lit("image"), Data: b64(1), Parts: lit2(2049)}}).Media()
	want("2049 parts", e, CodeBadFrame)

	f, e := Decode([]byte(`{"t":"text","id":"` + strings.Repeat("i", 200) + `","text":"x"}`))
	if e != nil || len(f.ID) != MaxIDChars {
		t.Errorf("an id of 200 characters: %v, %d characters kept", e, len(f.ID))
	}
}

func lit2(n int) json.RawMessage { return json.RawMessage(fmt.Sprint(n)) }
