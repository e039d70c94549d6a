package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/fill"
)

var update = flag.Bool("update", false, "write testdata/v1 from the encoders (only when adding a golden)")

func readGolden(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// v1Golden compares an encoding with testdata/v1: the format of version 1
// is fixed, so a renamed JSON member fails here.
func v1Golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "v1", name)
	if *update {
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s exists: the v1 format does not change; delete it by hand only for a golden that is new in this commit", path)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: encoding changed\n got %s\nwant %s", name, got, want)
	}
}

// upgrade is the migration's path for a version 0 golden: it must change,
// its output must be testdata/v1's, and the decoders must refuse the v0
// body itself.
func upgrade(t *testing.T, kind, name string) []byte {
	t.Helper()
	v0 := readGolden(t, "v0", name)
	if v, err := VersionOf(kind, v0); err != nil || v != 0 {
		t.Fatalf("%s: version %d, %v", name, v, err)
	}
	v1, changed, err := Upgrade(kind, v0)
	if err != nil || !changed {
		t.Fatalf("%s: upgrade %v (changed %v)", name, err, changed)
	}
	v1Golden(t, name, v1)
	if len(v1) >= len(v0) && kind == KindEvent {
		t.Errorf("%s: v1 is %d bytes, v0 %d: v1 leaves empty fields out and should be smaller", name, len(v1), len(v0))
	}
	// Upgrading again changes nothing.
	if again, changed, err := Upgrade(kind, v1); err != nil || changed || !bytes.Equal(again, v1) {
		t.Errorf("%s: second upgrade %s %v %v", name, again, changed, err)
	}
	return v1
}

func refusesV0[T any](t *testing.T, name string, decode func([]byte) (T, error)) {
	t.Helper()
	var ve *VersionError
	if _, err := decode(readGolden(t, "v0", name)); !errors.As(err, &ve) || ve.Got != 0 {
		t.Errorf("%s: a reader took the v0 body (%v): only the migration may", name, err)
	}
}

func TestUpgradesV0Events(t *testing.T) {
	for name, want := range goldenEvents {
		t.Run(name, func(t *testing.T) {
			v1 := upgrade(t, KindEvent, name)
			got, err := DecodeEvent(v1)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded\n %+v, %v\nwant\n %+v", got, err, want)
			}
			if enc, _ := EncodeEvent(got); !bytes.Equal(enc, v1) {
				t.Fatalf("re-encoded %s, upgraded %s", enc, v1)
			}
			refusesV0(t, name, DecodeEvent)
		})
	}
}

func TestUpgradesV0Columns(t *testing.T) {
	str := func(f func(string) (any, error)) func([]byte) (any, error) {
		return func(b []byte) (any, error) { return f(string(b)) }
	}
	for name, want := range goldenMedia {
		got, err := DecodeMedia(string(upgrade(t, KindMedia, name)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
		refusesV0(t, name, str(func(s string) (any, error) { return DecodeMedia(s) }))
	}
	for name, want := range goldenRuntime {
		got, err := DecodeRuntime(string(upgrade(t, KindRuntime, name)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
		refusesV0(t, name, str(func(s string) (any, error) { return DecodeRuntime(s) }))
	}
	for name, want := range goldenConversation {
		got, err := DecodeConversation(upgrade(t, KindConversation, name))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
		refusesV0(t, name, DecodeConversation)
	}
	for name, want := range goldenLaneSettings {
		got, err := DecodeLaneSettings(upgrade(t, KindLaneSettings, name))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
		refusesV0(t, name, DecodeLaneSettings)
	}
	for name, want := range goldenWebPush {
		got, err := DecodeWebPush(upgrade(t, KindWebPush, name))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
		refusesV0(t, name, DecodeWebPush)
	}
}

// What the migration cannot rewrite it is told, with an error it can
// quarantine the row with.
func TestUpgradeRefusesWhatIsNotARecord(t *testing.T) {
	var de *DecodeError
	var ve *VersionError
	for _, c := range []struct{ kind, body string }{
		{KindEvent, `{"Type":"","Lane":{}}`}, {KindEvent, `{"Type":"message","Message":7}`}, {KindEvent, `{"v":1,"type":""}`}, {KindEvent, `nope`},
		{KindMedia, `[{"ID":5}]`}, {KindMedia, `{"ID":"x"}`}, {KindRuntime, `[]`}, {KindRuntime, `{"Model":1}`},
		{KindConversation, `{"Content":"no role"}`}, {KindConversation, `{"Role":`},
		{KindLaneSettings, `null`}, {KindLaneSettings, `{"fast":"yes"}`},
		{KindWebPush, `{"endpoint":"http://plain","keys":{"p256dh":"a","auth":"b"}}`}, {KindWebPush, `{"endpoint":"https://x"}`},
		{"nothing", `{}`},
	} {
		if _, _, err := Upgrade(c.kind, []byte(c.body)); err == nil || (c.kind != "nothing" && !errors.As(err, &de)) {
			t.Errorf("%s %s: %v", c.kind, c.body, err)
		}
	}
	if _, _, err := Upgrade(KindEvent, []byte(`{"v":2,"type":"message"}`)); !errors.As(err, &ve) || ve.Got != 2 {
		t.Errorf("a newer version: %v", err)
	}
}

// notStored are the fields of core.Event an outbox body leaves out, each
// for a reason: the cursor is the row's key, a replay answers no request,
// picker.closed is never durable, a file's path is this machine's.
var notStored = []string{"Cursor", "ReplyTo", "Closed", "Message.Media.Path", "Media.Path"}

func TestEveryCoreFieldIsStored(t *testing.T) {
	ev := new(core.Event)
	if err := fill.Fill(ev, notStored...); err != nil {
		t.Fatal(err)
	}
	b, err := EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("a field of core.Event (or a type in it) is lost in the outbox record: add it to record.Event\n got %+v\nwant %+v\nbody %s", got, ev, b)
	}
	// And what is left out stays out.
	ev.Cursor, ev.ReplyTo, ev.Closed = 7, &core.ReplyAddr{ConnID: 1, ReqID: 2}, &core.PickerClosed{ID: "p"}
	ev.Media.Path, ev.Message.Media[0].Path = "/secret", "/secret"
	b2, _ := EncodeEvent(ev)
	if !bytes.Equal(b, b2) || bytes.Contains(b2, []byte("/secret")) {
		t.Fatalf("a field that must not be stored was: %s", b2)
	}
}

func TestEveryColumnFieldIsStored(t *testing.T) {
	var ms []core.Media
	if err := fill.Fill(&ms, "Path"); err != nil {
		t.Fatal(err)
	}
	s, _ := EncodeMedia(ms)
	if got, err := DecodeMedia(s); err != nil || !reflect.DeepEqual(got, ms) {
		t.Errorf("media: %+v, %v", got, err)
	}
	rt := new(core.Runtime)
	fill.Fill(rt)
	s, _ = EncodeRuntime(rt)
	if got, err := DecodeRuntime(s); err != nil || !reflect.DeepEqual(got, rt) {
		t.Errorf("runtime: %+v, %v", got, err)
	}
	var e ConversationEntry
	fill.Fill(&e, "V")
	e.V = Version
	b, _ := EncodeConversation(e)
	if got, err := DecodeConversation(b); err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("conversation: %+v, %v", got, err)
	}
	var ls LaneSettings
	fill.Fill(&ls, "V")
	ls.V = Version
	b, _ = EncodeLaneSettings(ls)
	if got, err := DecodeLaneSettings(b); err != nil || !reflect.DeepEqual(got, ls) {
		t.Errorf("lane settings: %+v, %v", got, err)
	}
}

func TestEmptyColumns(t *testing.T) {
	if s, err := EncodeMedia(nil); s != "" || err != nil {
		t.Errorf("no media: %q %v", s, err)
	}
	if s, err := EncodeRuntime(nil); s != "" || err != nil {
		t.Errorf("no runtime: %q %v", s, err)
	}
	if m, err := DecodeMedia(""); m != nil || err != nil {
		t.Errorf("empty media column: %v %v", m, err)
	}
	if r, err := DecodeRuntime(""); r != nil || err != nil {
		t.Errorf("empty runtime column: %v %v", r, err)
	}
}

func TestRejectsWhatIsNotARecord(t *testing.T) {
	var de *DecodeError
	var ve *VersionError
	for _, c := range []struct {
		body    string
		version bool // a *VersionError, else a *DecodeError
	}{
		{``, false}, {`null`, false}, {`[]`, false}, {`"text"`, false}, {`{}`, true}, {`{"Type":""}`, true},
		{`{"v":1}`, false}, {`{"v":1,"type":`, false}, {`{"v":0,"type":"message"}`, false}, {`{"v":-3}`, false},
		{`{"v":1,"type":"message","message":"no"}`, false}, {`{"Type":"message","Message":7}`, true}, // v0: the migration's
		{`{"v":2,"type":"message"}`, true}, {`{ "type": "message", "v": 9 }`, true},
	} {
		_, err := DecodeEvent([]byte(c.body))
		switch {
		case c.version && !errors.As(err, &ve):
			t.Errorf("%s: %v, want a VersionError", c.body, err)
		case !c.version && !errors.As(err, &de):
			t.Errorf("%s: %v, want a DecodeError", c.body, err)
		}
	}
	for _, body := range []string{`{"v":1}`, `null`, `{"v":1,"role":""}`, `{"v":1,"role":5}`} {
		if _, err := DecodeConversation([]byte(body)); !errors.As(err, &de) {
			t.Errorf("conversation %s: %v", body, err)
		}
	}
	for _, body := range []string{`{"v":1}`, `{"v":1,"endpoint":"http://x","keys":{"p256dh":"a","auth":"b"}}`, `{"v":1,"endpoint":"https://x","keys":{}}`} {
		if _, err := DecodeWebPush([]byte(body)); !errors.As(err, &de) {
			t.Errorf("webpush %s: %v", body, err)
		}
	}
	for _, body := range []string{`{"Model":1}`, `[1]`, `true`} {
		if _, err := DecodeRuntime(body); err == nil {
			t.Errorf("runtime %s decoded", body)
		}
	}
	for _, body := range []string{`{"ID":"x"}`, `[1]`, `{"v":1,"media":7}`} {
		if _, err := DecodeMedia(body); err == nil {
			t.Errorf("media %s decoded", body)
		}
	}
	if _, err := EncodeEvent(&core.Event{}); err == nil {
		t.Error("an event without a type was encoded")
	}
	if _, err := EncodeConversation(ConversationEntry{}); err == nil {
		t.Error("a conversation entry without a role was encoded")
	}
	if _, err := EncodeWebPush(WebPush{Endpoint: "http://x"}); err == nil {
		t.Error("an unusable subscription was encoded")
	}
}

// Another writer (a Postgres jsonb column, a hand repair) may order and
// space members its own way: the version is still read.
func TestVersionOfOtherSpellings(t *testing.T) {
	for body, want := range map[string]int{
		`{"v":1,"type":"x"}`: 1, `{"v":1}`: 1, `{"type":"x","v":1}`: 1, ` { "v" : 1 }`: 1, `{"v":12}`: 12,
		`{"Type":"x"}`: 0, `[]`: 0,
	} {
		if got, err := VersionOf(KindMedia, []byte(body)); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", body, got, err, want)
		}
	}
	if _, err := VersionOf(KindEvent, []byte(`[]`)); err == nil {
		t.Error("an array is a version 0 event")
	}
}

func TestV1IsSnakeCase(t *testing.T) {
	ev := new(core.Event)
	fill.Fill(ev, notStored...)
	b, _ := EncodeEvent(ev)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k != strings.ToLower(k) {
					t.Errorf("member %q is not snake_case", k)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var m any
	json.Unmarshal(b, &m)
	walk(m)
}

func FuzzDecodeEvent(f *testing.F) {
	for name := range goldenEvents {
		b, err := os.ReadFile(filepath.Join("testdata", "v0", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if v1, err := os.ReadFile(filepath.Join("testdata", "v1", name)); err == nil {
			f.Add(v1)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err != nil {
			var de *DecodeError
			var ve *VersionError
			if !errors.As(err, &de) && !errors.As(err, &ve) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		out, err := EncodeEvent(ev)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", b, err)
		}
		r := FromEvent(ev)
		if want, _ := json.Marshal(&r); !bytes.Equal(out, want) {
			t.Fatalf("encoder and record differ\n got %s\nwant %s", out, want)
		}
		again, err := DecodeEvent(out)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", out, err)
		}
		out2, _ := EncodeEvent(again)
		if !bytes.Equal(out, out2) {
			t.Fatalf("unstable: %s then %s", out, out2)
		}
	})
}

// The migration meets whatever the old database holds.
func FuzzUpgradeEvent(f *testing.F) {
	for name := range goldenEvents {
		b, err := os.ReadFile(filepath.Join("testdata", "v0", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, changed, err := Upgrade(KindEvent, b)
		if err != nil {
			return
		}
		if _, err := DecodeEvent(out); err != nil {
			t.Fatalf("upgraded %q to %s, which does not decode: %v", b, out, err)
		}
		if again, ch, err := Upgrade(KindEvent, out); err != nil || ch || !bytes.Equal(again, out) {
			t.Fatalf("upgrade of %s is not stable (changed %v, %v); first changed %v", out, ch, err, changed)
		}
	})
}

func FuzzDecodeConversation(f *testing.F) {
	for name := range goldenConversation {
		b, _ := os.ReadFile(filepath.Join("testdata", "v1", name))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeConversation(b)
		if err != nil {
			return
		}
		out, err := EncodeConversation(e)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", b, err)
		}
		if again, err := DecodeConversation(out); err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip of %s: %+v, %v", out, again, err)
		}
	})
}

// The hand-written encoder writes exactly what json.Marshal of the record
// would: the record types are the format's one description.
func TestAppendEventIsMarshal(t *testing.T) {
	evs := []*core.Event{}
	for _, ev := range goldenEvents {
		evs = append(evs, ev)
	}
	filled := new(core.Event)
	fill.Fill(filled, notStored...)
	evs = append(evs, filled,
		&core.Event{Type: "x", Text: "quote \" back \\ ctl \x01\b\f\n\r\t html <a&b> bad \xff\xfe line \u2028\u2029 ok é 🎉"},
		&core.Event{Type: "x", Tool: &core.Tool{Duration: 1e-7, Args: map[string]any{"b": 1.0, "a": []any{"<"}}}},
		&core.Event{Type: "x", Tool: &core.Tool{Duration: 1e21}},
		&core.Event{Type: "x", Tool: &core.Tool{Duration: -0.000001}},
		&core.Event{Type: "x", Message: &core.Message{Runtime: &core.Runtime{Latency: ptr(123456789.125), Cost: ptr(0.0)}}},
		&core.Event{Type: "x", Channel: &core.Channel{}, Picker: &core.Picker{Providers: []core.Provider{{}}}},
	)
	for _, ev := range evs {
		got, err := EncodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		r := FromEvent(ev)
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("encoder and record differ\n got %s\nwant %s", got, want)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := EncodeEvent(&core.Event{Type: "x", Tool: &core.Tool{Duration: bad}}); err == nil {
			t.Errorf("%v was encoded", bad)
		}
	}
}
