package mobilev1

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/irisgate/irisgate/internal/jsontext"
)

// The seed corpus is in testdata/fuzz/FuzzDecode/: valid frames of
// every device type, wrong field types, nulls, huge numbers, bad base64,
// invalid UTF-8, non-objects and broken JSON.

// checkError asserts that e is a well-formed error of the protocol's enum
// whose frame is a JSON object {t:error, code, message, fatal}.
func checkError(t *testing.T, e *Error, input []byte, what string) {
	t.Helper()
	if !slices.Contains(Codes, e.Code) {
		t.Fatalf("%s(%q): code %q is not in the protocol's enum", what, input, e.Code)
	}
	if e.Message == "" {
		t.Fatalf("%s(%q): error without a message", what, input)
	}
	var f map[string]any
	if err := json.Unmarshal(e.Frame("x"), &f); err != nil {
		t.Fatalf("%s(%q): error frame is not JSON: %v", what, input, err)
	}
	if f["t"] != "error" || f["code"] != e.Code || f["message"] != e.Message {
		t.Fatalf("%s(%q): error frame %v", what, input, f)
	}
	if _, ok := f["fatal"].(bool); !ok {
		t.Fatalf("%s(%q): error frame without fatal: %v", what, input, f)
	}
}

// FuzzDecode fuzzes the frame decoder and every frame type's field
// decoding and validation. Invariants: no panic; a refusal is an error of
// the enum with a frame that is JSON; decode refuses whatever is not a
// UTF-8 JSON object with a string t (and no lone surrogate escape) and accepts it otherwise (with t
// lowercased and the id at most 128 characters); what a parser accepts
// is within the protocol's limits, and base64 it accepts by size decodes
// to exactly that size or is refused as bad_frame.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, e := Decode(data)
		if e != nil {
			checkError(t, e, data, "Decode")
			if e.Code != CodeBadFrame {
				t.Fatalf("Decode(%q) = %s, want bad_frame", data, e.Code)
			}
			var probe struct {
				T *string `json:"t"`
			}
			trimmed := bytes.TrimLeft(data, " \t\r\n")
			// Well-formed: UTF-8 JSON without a lone surrogate escape
			// (which would decode to U+FFFD), an object with a string t.
			if utf8.Valid(data) && !jsontext.LoneSurrogate(data) && len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(data, &probe) == nil &&
				probe.T != nil && strings.TrimSpace(*probe.T) != "" && readableID(data) {
				t.Fatalf("decode refused a well-formed frame %q: %v", data, e)
			}
			return
		}
		if !utf8.Valid(data) || !json.Valid(data) || jsontext.LoneSurrogate(data) {
			t.Fatalf("decode accepted %q", data)
		}
		if fr.T == "" || fr.T != strings.ToLower(fr.T) {
			t.Fatalf("Decode(%q): t = %q", data, fr.T)
		}
		if n := utf8.RuneCountInString(fr.ID); n > MaxIDChars {
			t.Fatalf("Decode(%q): id of %d characters", data, n)
		}
		if Looks(data) != !hasType(data) {
			t.Fatalf("Looks(%q) disagrees with decode", data)
		}
		if Is(data) != (fr.T == "hello" && strings.TrimSpace(probeT(data)) == probeT(data)) {
			t.Fatalf("Is(%q) = %v for t %q", data, Is(data), fr.T)
		}

		// The fast path for plain strings agrees with encoding/json.
		for _, raw := range []json.RawMessage{fr.m.Text, fr.m.Data, fr.m.Token, fr.m.Kind} {
			got, e := optString(raw, "member")
			if isNull(raw) {
				if got != nil || e != nil {
					t.Fatalf("optString(%q) = %v, %v for an absent member", raw, got, e)
				}
				continue
			}
			var want string
			err := json.Unmarshal(raw, &want)
			if (err == nil) != (e == nil) || (got != nil && *got != want) {
				t.Fatalf("optString(%q) = %v, %v; encoding/json: %q, %v", raw, got, e, want, err)
			}
		}
		if h, e := fr.Hello(); e != nil {
			checkError(t, e, data, "Hello")
		} else {
			for _, s := range []string{h.DeviceID, h.DeviceName, h.Platform, h.AppVersion, h.UserID, h.UserName} {
				if utf8.RuneCountInString(s) > MaxDeviceField {
					t.Fatalf("parseHello(%q): a device field of %d characters", data, utf8.RuneCountInString(s))
				}
			}
		}
		if text, e := fr.Text(); e != nil {
			checkError(t, e, data, "Text")
		} else if strings.TrimSpace(text) == "" || utf8.RuneCountInString(text) > MaxTextChars || fr.ID == "" {
			t.Fatalf("parseText(%q) accepted %q", data, text)
		}
		if a, e := fr.Audio(); e != nil {
			checkError(t, e, data, "Audio")
		} else {
			if a.Format != "wav" && a.Format != "ogg" || a.Size > MaxAudioBytes || a.Data == "" || fr.ID == "" ||
				utf8.RuneCountInString(a.Text) > MaxTextChars {
				t.Fatalf("parseAudio(%q) accepted %+v", data, a)
			}
			checkB64(t, a.Data, a.Size)
		}
		if m, e := fr.Media(); e != nil {
			checkError(t, e, data, "Media")
		} else {
			if !slices.Contains(MediaInKinds, m.Kind) || m.Parts < 1 || m.Parts > MaxMediaParts || m.Part < 0 || m.Part >= m.Parts ||
				m.Size > MaxMediaBytes || m.Data == "" || utf8.RuneCountInString(m.Filename) > MaxFilenameChars ||
				utf8.RuneCountInString(m.Caption) > MaxTextChars || fr.ID == "" {
				t.Fatalf("parseMedia(%q) accepted %+v", data, m)
			}
			checkB64(t, m.Data, m.Size)
		}
		if a, e := fr.Prompt(); e != nil {
			checkError(t, e, data, "Prompt")
		} else if a.PromptID == "" || (a.OptionID == "" && strings.TrimSpace(a.Text) == "") {
			t.Fatalf("parsePrompt(%q) accepted %+v", data, a)
		}
		if d, e := fr.Deliver(); e != nil {
			checkError(t, e, data, "Deliver")
		} else {
			if strings.TrimSpace(d.Text) == "" && d.Media == nil || utf8.RuneCountInString(d.Text) > MaxTextChars {
				t.Fatalf("parseDeliver(%q) accepted %+v", data, d)
			}
			if d.Media != nil {
				if !slices.Contains(MediaOutKinds, d.Media.Kind) || d.Media.Size > MaxMediaBytes {
					t.Fatalf("parseDeliver(%q) accepted media %+v", data, d.Media)
				}
				checkB64(t, d.Media.Data, d.Media.Size)
			}
		}
		if ts := fr.PingTS(); ts != nil && !json.Valid(ts) {
			t.Fatalf("ping ts %q is not JSON", ts)
		}
	})
}

// checkB64: base64 accepted by its size either decodes to that size or is
// refused as bad_frame.
func checkB64(t *testing.T, s string, size int) {
	t.Helper()
	b, e := DecodeB64("data", s)
	if e != nil {
		if e.Code != CodeBadFrame {
			t.Fatalf("DecodeB64(%q) = %v, want bad_frame", s, e)
		}
		return
	}
	if len(b) != size {
		t.Fatalf("DecodeB64(%q) gave %d bytes, B64Size said %d", s, len(b), size)
	}
}

// readableID: the frame's id member, if any, is null, a string or a number.
func readableID(data []byte) bool {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	_, e := readID(m.ID)
	return e == nil
}

func hasType(data []byte) bool {
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Type != nil
}

func probeT(data []byte) string {
	var probe struct {
		T string `json:"t"`
	}
	json.Unmarshal(data, &probe)
	return strings.ToLower(probe.T)
}

// FuzzIs checks Is's quick refusal against the decode it skips: they
// agree on every input.
func FuzzIs(f *testing.F) {
	for _, s := range []string{`{"t":"hello"}`, `{"T":"HELLO"}`, `{"\u0074":"hello"}`, `{"t" : "Hello"}`,
		`{"v":1,"type":"hello","payload":{"token":"tok","device_id":"d"}}`, `{"x":"t"}`, `["t"]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var probe struct {
			T *string `json:"t"`
		}
		want := json.Unmarshal(data, &probe) == nil && probe.T != nil && strings.EqualFold(*probe.T, "hello")
		if got := Is(data); got != want {
			t.Fatalf("Is(%q) = %v, decoding says %v", data, got, want)
		}
	})
}
