package mobilev1

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/irisgate/irisgate/internal/jsontext"
)

// Frame is a decoded device frame: its type (lowercased), its id
// (truncated) and the raw members the frame types read. The frame is
// scanned once; each type then decodes only its own members, so a member
// another type would reject cannot make an unknown frame an error.
type Frame struct {
	T  string
	ID string
	m  members
}

// members are every member a device frame type reads, undecoded.
type members struct {
	T        json.RawMessage `json:"t"`
	ID       json.RawMessage `json:"id"`
	Token    json.RawMessage `json:"token"`
	Device   json.RawMessage `json:"device"`
	User     json.RawMessage `json:"user"`
	Text     json.RawMessage `json:"text"`
	Format   json.RawMessage `json:"format"`
	Data     json.RawMessage `json:"data"`
	Kind     json.RawMessage `json:"kind"`
	Mime     json.RawMessage `json:"mime"`
	Filename json.RawMessage `json:"filename"`
	Caption  json.RawMessage `json:"caption"`
	Part     json.RawMessage `json:"part"`
	Parts    json.RawMessage `json:"parts"`
	PromptID json.RawMessage `json:"prompt_id"`
	OptionID json.RawMessage `json:"option_id"`
	TS       json.RawMessage `json:"ts"`
	Target   json.RawMessage `json:"target"`
	Media    json.RawMessage `json:"media"`
}

// Is reports whether data is a Hermes Mobile first frame: a JSON object
// whose "t" is "hello" in any letter case. The server picks the dialect
// with it.
func Is(data []byte) bool {
	if !mayHaveKeyT(data) {
		return false // every Iris hello: no decode on each handshake's path
	}
	var probe struct {
		T *string `json:"t"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.T != nil && strings.EqualFold(*probe.T, "hello")
}

// mayHaveKeyT is false only when data cannot hold a member that
// encoding/json reads as "t": its key, matched in any case, is written
// "t" or "T" unless it is escaped, and an escape needs a backslash.
func mayHaveKeyT(data []byte) bool {
	return bytes.Contains(data, []byte(`"t"`)) || bytes.Contains(data, []byte(`"T"`)) || bytes.IndexByte(data, '\\') >= 0
}

// Looks reports whether data is a JSON object with a string "t" and no
// "type": a Hermes Mobile frame, though perhaps not a hello. Such a first
// frame is answered in this dialect (bad_frame) rather than dropped.
func Looks(data []byte) bool {
	var probe struct {
		T    *string         `json:"t"`
		Type json.RawMessage `json:"type"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.T != nil && probe.Type == nil
}

// Decode reads a frame's type and id. Anything that is not a UTF-8 JSON
// object with a string t is bad_frame.
func Decode(data []byte) (*Frame, *Error) {
	if !utf8.Valid(data) {
		return nil, errorf(CodeBadFrame, "frame is not valid UTF-8")
	}
	if jsontext.LoneSurrogate(data) {
		// Decoded, it would be U+FFFD: stored as what the device never wrote.
		return nil, errorf(CodeBadFrame, `frame holds a lone UTF-16 surrogate escape (a \uD800-\uDFFF without its pair)`)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errorf(CodeBadFrame, "frame is not a JSON object")
	}
	f := &Frame{}
	if err := json.Unmarshal(data, &f.m); err != nil {
		return nil, errorf(CodeBadFrame, "malformed frame: %s", jsonError(err))
	}
	id, e := readID(f.m.ID)
	if e != nil {
		return nil, e
	}
	f.ID = id
	if isNull(f.m.T) {
		return nil, errorf(CodeBadFrame, "frame has no t")
	}
	t, e := optString(f.m.T, "t")
	if e != nil {
		return nil, e
	}
	f.T = strings.ToLower(strings.TrimSpace(*t))
	if f.T == "" {
		return nil, errorf(CodeBadFrame, "t is empty")
	}
	return f, nil
}

// readID reads an id: a string (or, leniently, a number), truncated to
// MaxIDChars characters; absent and null are "".
func readID(raw json.RawMessage) (string, *Error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return "", errorf(CodeBadFrame, "id must be a string")
		}
		s = n.String()
	}
	return Truncate(s, MaxIDChars), nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return te.Field + " must be " + jsonKind(te.Type.Kind().String())
		}
		return "the frame is not a JSON object"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "not JSON (" + se.Error() + " at offset " + strconv.FormatInt(se.Offset, 10) + ")"
	}
	return err.Error()
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "of another type"
	}
	return "a " + k
}

// optString reads an optional string member: nil when absent or null.
// Strings without escapes (base64 data, mostly) are taken as they are,
// without a second scan.
func optString(raw json.RawMessage, field string) (*string, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 {
		// The frame was valid JSON, so this is a whole string literal.
		s := string(raw[1 : n-1])
		return &s, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, errorf(CodeBadFrame, "%s must be a string", field)
	}
	return &s, nil
}

// optInt reads an optional integer member.
func optInt(raw json.RawMessage, field string) (*int, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	var n int
	if json.Unmarshal(raw, &n) != nil {
		return nil, errorf(CodeBadFrame, "%s must be an integer", field)
	}
	return &n, nil
}

// object decodes an optional object member into v; false when absent.
func object(raw json.RawMessage, field string, v any) (bool, *Error) {
	if isNull(raw) {
		return false, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return false, errorf(CodeBadFrame, "%s must be an object", field)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, errorf(CodeBadFrame, "malformed %s: %s", field, jsonError(err))
	}
	return true, nil
}

// reader reads members, keeping the first error.
type reader struct{ e *Error }

func (r *reader) str(raw json.RawMessage, field string) *string {
	if r.e != nil {
		return nil
	}
	s, e := optString(raw, field)
	r.e = e
	return s
}

func (r *reader) int(raw json.RawMessage, field string) *int {
	if r.e != nil {
		return nil
	}
	n, e := optInt(raw, field)
	r.e = e
	return n
}

func (r *reader) obj(raw json.RawMessage, field string, v any) bool {
	if r.e != nil {
		return false
	}
	ok, e := object(raw, field, v)
	r.e = e
	return ok
}

// Truncate cuts s to n characters.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

func chars(s string) int { return utf8.RuneCountInString(s) }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// checkText enforces MAX_TEXT_CHARS on a field.
func checkText(field, s string) *Error {
	if n := chars(s); n > MaxTextChars {
		return errorf(CodeTooBig, "%s is %d characters, the limit is %d", field, n, MaxTextChars)
	}
	return nil
}

// B64Size is the exact number of bytes s decodes to, computed from its
// length alone (line breaks, which the decoder skips, are not counted):
// limits are enforced before anything is allocated.
func B64Size(s string) int {
	n := len(s) - strings.Count(s, "\n") - strings.Count(s, "\r")
	if n%4 != 0 { // unpadded
		return n * 6 / 8
	}
	pad := 0
	for i := len(s) - 1; i >= 0 && pad < 2; i-- {
		if s[i] == '=' {
			pad++
		} else if s[i] != '\n' && s[i] != '\r' {
			break
		}
	}
	return n/4*3 - pad
}

// DecodeB64 decodes standard base64, padded or not, into a buffer of the
// size B64Size promised.
func DecodeB64(field, s string) ([]byte, *Error) {
	size := B64Size(s)
	enc := base64.StdEncoding
	if n := len(s) - strings.Count(s, "\n") - strings.Count(s, "\r"); n%4 != 0 {
		enc = base64.RawStdEncoding
	}
	buf := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(buf, []byte(s))
	if err != nil || n != size {
		return nil, errorf(CodeBadFrame, "%s is not valid base64", field)
	}
	return buf[:n], nil
}

// Device → server frames, after Decode.

// Hello is a hello's members, trimmed and truncated.
type Hello struct {
	Token      string
	DeviceID   string
	DeviceName string
	Platform   string
	AppVersion string
	UserID     string
	UserName   string
}

// Hello reads a hello.
func (f *Frame) Hello() (Hello, *Error) {
	var r reader
	h := Hello{Token: str(r.str(f.m.Token, "token"))}
	var dev struct {
		ID         json.RawMessage `json:"id"`
		Name       json.RawMessage `json:"name"`
		Platform   json.RawMessage `json:"platform"`
		AppVersion json.RawMessage `json:"app_version"`
	}
	if r.obj(f.m.Device, "device", &dev) {
		h.DeviceID = Truncate(strings.TrimSpace(str(r.str(dev.ID, "device.id"))), MaxDeviceField)
		h.DeviceName = Truncate(strings.TrimSpace(str(r.str(dev.Name, "device.name"))), MaxDeviceField)
		h.Platform = Truncate(str(r.str(dev.Platform, "device.platform")), MaxDeviceField)
		h.AppVersion = Truncate(str(r.str(dev.AppVersion, "device.app_version")), MaxDeviceField)
	}
	var user struct {
		ID   json.RawMessage `json:"id"`
		Name json.RawMessage `json:"name"`
	}
	if r.obj(f.m.User, "user", &user) {
		h.UserID = Truncate(str(r.str(user.ID, "user.id")), MaxDeviceField)
		h.UserName = Truncate(str(r.str(user.Name, "user.name")), MaxDeviceField)
	}
	if r.e != nil {
		return Hello{}, r.e
	}
	return h, nil
}

// Text reads a text frame's message.
func (f *Frame) Text() (string, *Error) {
	var r reader
	text := r.str(f.m.Text, "text")
	switch {
	case r.e != nil:
		return "", r.e
	case f.ID == "":
		return "", errorf(CodeBadFrame, "text needs an id")
	case text == nil:
		return "", errorf(CodeBadFrame, "text needs text")
	case strings.TrimSpace(*text) == "":
		return "", errorf(CodeBadFrame, "empty message")
	}
	if err := checkText("text", *text); err != nil {
		return "", err
	}
	return *text, nil
}

// Audio is a voice message.
type Audio struct {
	Format string
	Data   string // base64, size checked
	Size   int
	Text   string
}

// Audio reads an audio frame.
func (f *Frame) Audio() (Audio, *Error) {
	var r reader
	format, data, text := r.str(f.m.Format, "format"), r.str(f.m.Data, "data"), r.str(f.m.Text, "text")
	switch {
	case r.e != nil:
		return Audio{}, r.e
	case f.ID == "":
		return Audio{}, errorf(CodeBadFrame, "audio needs an id")
	case format == nil:
		return Audio{}, errorf(CodeBadFrame, "audio needs a format")
	}
	a := Audio{Format: strings.ToLower(strings.TrimSpace(*format)), Data: str(data), Text: str(text)}
	if a.Format != "wav" && a.Format != "ogg" {
		return Audio{}, errorf(CodeUnsupportedFrame, "audio format %q is not supported: use wav or ogg", Truncate(*format, 32))
	}
	if a.Data == "" {
		return Audio{}, errorf(CodeBadFrame, "audio needs data")
	}
	if a.Size = B64Size(a.Data); a.Size > MaxAudioBytes {
		return Audio{}, errorf(CodeTooBig, "audio is %d bytes, the limit is %d", a.Size, MaxAudioBytes)
	}
	if err := checkText("text", a.Text); err != nil {
		return Audio{}, err
	}
	return a, nil
}

// MediaChunk is one part of a file a device sends.
type MediaChunk struct {
	Kind, Mime, Filename, Caption string
	Data                          string // base64, size checked
	Size                          int    // decoded size of this chunk
	Part, Parts                   int
}

// Media reads a media frame.
func (f *Frame) Media() (MediaChunk, *Error) {
	var r reader
	kind := r.str(f.m.Kind, "kind")
	m := MediaChunk{
		Mime:     Truncate(strings.TrimSpace(str(r.str(f.m.Mime, "mime"))), MaxFilenameChars),
		Filename: Truncate(str(r.str(f.m.Filename, "filename")), MaxFilenameChars), Caption: str(r.str(f.m.Caption, "caption")),
		Data: str(r.str(f.m.Data, "data")), Parts: 1,
	}
	part, parts := r.int(f.m.Part, "part"), r.int(f.m.Parts, "parts")
	switch {
	case r.e != nil:
		return MediaChunk{}, r.e
	case f.ID == "":
		return MediaChunk{}, errorf(CodeBadFrame, "media needs an id")
	case kind == nil:
		return MediaChunk{}, errorf(CodeBadFrame, "media needs a kind")
	}
	m.Kind = strings.ToLower(strings.TrimSpace(*kind))
	if !contains(MediaInKinds, m.Kind) {
		return MediaChunk{}, errorf(CodeUnsupportedFrame, "media kind %q is not supported: use %s", Truncate(*kind, 32), strings.Join(MediaInKinds, ", "))
	}
	if part != nil {
		m.Part = *part
	}
	if parts != nil {
		m.Parts = *parts
	}
	if m.Parts < 1 || m.Parts > MaxMediaParts {
		return MediaChunk{}, errorf(CodeBadFrame, "parts must be between 1 and %d", MaxMediaParts)
	}
	if m.Part < 0 || m.Part >= m.Parts {
		return MediaChunk{}, errorf(CodeBadFrame, "part must be between 0 and parts-1 (%d)", m.Parts-1)
	}
	if m.Data == "" {
		return MediaChunk{}, errorf(CodeBadFrame, "media needs data")
	}
	if m.Size = B64Size(m.Data); m.Size > MaxMediaBytes {
		return MediaChunk{}, errorf(CodeTooBig, "the file is larger than %d bytes: compress it", MaxMediaBytes)
	}
	if err := checkText("caption", m.Caption); err != nil {
		return MediaChunk{}, err
	}
	return m, nil
}

// PromptAnswer answers a card.
type PromptAnswer struct {
	PromptID, OptionID, Text string
}

// Prompt reads a prompt frame: a card's answer.
func (f *Frame) Prompt() (PromptAnswer, *Error) {
	var r reader
	a := PromptAnswer{PromptID: str(r.str(f.m.PromptID, "prompt_id")), OptionID: strings.TrimSpace(str(r.str(f.m.OptionID, "option_id"))),
		Text: str(r.str(f.m.Text, "text"))}
	switch {
	case r.e != nil:
		return PromptAnswer{}, r.e
	case a.PromptID == "":
		return PromptAnswer{}, errorf(CodeBadFrame, "prompt needs a prompt_id")
	case a.OptionID == "" && strings.TrimSpace(a.Text) == "":
		return PromptAnswer{}, errorf(CodeBadFrame, "prompt needs an option_id or a non-empty text")
	}
	if err := checkText("text", a.Text); err != nil {
		return PromptAnswer{}, err
	}
	return a, nil
}

// maxTS bounds the ts a pong echoes: a timestamp is a few bytes, and a
// huge one would only fill the device's own send queue.
const maxTS = 256

// PingTS is the ts a pong echoes (any JSON value up to maxTS bytes; nil
// for none).
func (f *Frame) PingTS() json.RawMessage {
	if isNull(f.m.TS) || len(f.m.TS) > maxTS {
		return nil
	}
	return f.m.TS
}

// Delivery is a service's deliver frame.
type Delivery struct {
	Target string
	Text   string
	Media  *MediaChunk // Part 0 of 1; Size checked
}

// Deliver reads a deliver frame.
func (f *Frame) Deliver() (Delivery, *Error) {
	var r reader
	d := Delivery{Target: strings.TrimSpace(str(r.str(f.m.Target, "target"))), Text: str(r.str(f.m.Text, "text"))}
	var mm struct {
		Kind     json.RawMessage `json:"kind"`
		Mime     json.RawMessage `json:"mime"`
		Filename json.RawMessage `json:"filename"`
		Caption  json.RawMessage `json:"caption"`
		Data     json.RawMessage `json:"data"`
	}
	var mc *MediaChunk
	if r.obj(f.m.Media, "media", &mm) {
		mc = &MediaChunk{
			Kind: strings.ToLower(strings.TrimSpace(str(r.str(mm.Kind, "media.kind")))), Mime: Truncate(strings.TrimSpace(str(r.str(mm.Mime, "media.mime"))), MaxFilenameChars),
			Filename: Truncate(str(r.str(mm.Filename, "media.filename")), MaxFilenameChars), Caption: str(r.str(mm.Caption, "media.caption")),
			Data: str(r.str(mm.Data, "media.data")), Parts: 1,
		}
	}
	if r.e != nil {
		return Delivery{}, r.e
	}
	if err := checkText("text", d.Text); err != nil {
		return Delivery{}, err
	}
	if mc != nil {
		if !contains(MediaOutKinds, mc.Kind) {
			return Delivery{}, errorf(CodeUnsupportedFrame, "media kind %q is not supported: use %s", Truncate(mc.Kind, 32), strings.Join(MediaOutKinds, ", "))
		}
		if mc.Data == "" {
			return Delivery{}, errorf(CodeBadFrame, "deliver media needs data")
		}
		if mc.Size = B64Size(mc.Data); mc.Size > MaxMediaBytes {
			return Delivery{}, errorf(CodeTooBig, "the file is larger than %d bytes", MaxMediaBytes)
		}
		if err := checkText("caption", mc.Caption); err != nil {
			return Delivery{}, err
		}
		d.Media = mc
	}
	if strings.TrimSpace(d.Text) == "" && d.Media == nil {
		return Delivery{}, errorf(CodeBadFrame, "deliver needs text or media")
	}
	return d, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
