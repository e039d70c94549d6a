package irisv1

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scanSeeds are envelopes the fast path takes and ones it leaves to
// encoding/json, each next to a near miss.
var scanSeeds = []string{
	`{"v":1,"id":7,"type":"ping","payload":{"ts":1}}`,
	` {"type":"history","chat_id":"default","payload":{"limit":10}} `,
	`{"v":1,"id":1,"type":"hello","payload":{"token":"t","device_id":"d","caps":{"min_protocol":1,"x":[1,-2.5e3,true,false,null,"\u00e9\n"]}}}`,
	`{}`, `{"type":""}`, `{"payload":null,"type":"x"}`, `{"extra":{"a":[{}]},"type":"x","thread_id":"t"}`,
	`{"Type":"ping"}`, `{"TYPE":"ping","type":"x"}`, `{"type":"ping","type":"pong"}`, `{"typ\u0065":"ping"}`,
	`{"type":"p\u0069ng"}`, `{"type":"caf` + "\xc3\xa9" + `"}`, `{"type":"\xff"}`, `{"type":null}`, `{"type":5}`,
	`{"v":1.0,"type":"x"}`, `{"v":1e0,"type":"x"}`, `{"v":-0,"type":"x"}`, `{"v":01,"type":"x"}`, `{"v":"1","type":"x"}`,
	`{"id":99999999999999999999,"type":"x"}`, `{"id":-5,"type":"x"}`, `{"id":null,"type":"x"}`, `{"id":"5","type":"x"}`,
	`{"type":"x",}`, `{"type":"x"}}`, `{"type":"x"} x`, `{"type":"x","payload":{"a":1,}}`, `{"type":"x","payload":[1 2]}`,
	`{"type":"x","payload":"` + "\x01" + `"}`, `{"type":"x","payload":"\q"}`, `{"type":"x","payload":"\u12"}`,
	`{"type":"x","payload":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	`{"type":"x","payload":-}`, `{"type":"x","payload":1.}`, `{"type":"x","payload":1e}`, `{"type":"x","payload":tru}`,
	`[]`, `null`, ``, `{`, `{"type"`, `{"type":`, `{"type":"x"`, "\ufeff{}", `{"ſ":1}`, `{"K":1,"type":"x"}`,
}

// FuzzScanEnvelope holds the fast path to encoding/json: whatever it
// accepts, encoding/json accepts too and reads the same envelope from;
// HasType answers as encoding/json's probe does. (What it refuses goes to
// encoding/json itself.)
func FuzzScanEnvelope(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	// The request decoder's corpus: every request type, broken ones too.
	if fs, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeRequest", "*")); err == nil {
		for _, p := range fs {
			if b, err := os.ReadFile(p); err == nil {
				if data, ok := corpusBytes(b); ok {
					f.Add(data)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast inEnvelope
		ok := scanEnvelope(data, &fast)
		var probe struct {
			Type *string `json:"type"`
		}
		slowIs := json.Unmarshal(data, &probe) == nil && probe.Type != nil
		if got := HasType(data); got != slowIs {
			t.Fatalf("HasType(%q) = %v, encoding/json's probe says %v", data, got, slowIs)
		}
		if !ok {
			return
		}
		var slow inEnvelope
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("the fast path took %q, encoding/json refuses it: %v", data, err)
		}
		if !sameEnvelope(fast, slow) {
			t.Fatalf("%q: the fast path read %s, encoding/json %s", data, show(fast), show(slow))
		}
	})
}

func sameEnvelope(a, b inEnvelope) bool {
	eqp := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return (a.V == nil) == (b.V == nil) && (a.V == nil || *a.V == *b.V) && bytes.Equal(a.ID, b.ID) && a.Type == b.Type &&
		eqp(a.ChatID, b.ChatID) && eqp(a.ThreadID, b.ThreadID) && bytes.Equal(a.Payload, b.Payload) && (a.Payload == nil) == (b.Payload == nil)
}

func show(e inEnvelope) string {
	s := func(p *string) string {
		if p == nil {
			return "nil"
		}
		return strconv.Quote(*p)
	}
	v := "nil"
	if e.V != nil {
		v = strconv.Itoa(*e.V)
	}
	return "{v:" + v + " id:" + strconv.Quote(string(e.ID)) + " type:" + strconv.Quote(e.Type) + " chat:" + s(e.ChatID) +
		" thread:" + s(e.ThreadID) + " payload:" + strconv.Quote(string(e.Payload)) + "}"
}

// corpusBytes reads a "go test fuzz v1" file of one []byte.
func corpusBytes(b []byte) ([]byte, bool) {
	lines := strings.SplitN(string(b), "\n", 3)
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "[]byte(") {
		return nil, false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	return []byte(s), err == nil
}

// The fast path takes the envelopes apps send, and leaves the rest.
func TestScanEnvelopeTakesPlainEnvelopes(t *testing.T) {
	for _, c := range []struct {
		in   string
		fast bool
	}{
		{`{"v":1,"id":7,"type":"ping","payload":{"ts":1}}`, true},
		{`{"type":"history","chat_id":"default","thread_id":"t1","payload":{"limit":10}}`, true},
		{`{"v":1,"id":2,"type":"message.send","payload":{"text":"caf` + "\xc3\xa9" + ` \"quoted\" \ud83d\ude00"}}`, true},
		{`{"Type":"ping"}`, false},
		{`{"type":"p\u0069ng"}`, false},
		{`{"v":1.0,"type":"x"}`, false},
		{`{"type":"x","type":"y"}`, false},
		{`{"type":"x",}`, false},
	} {
		var env inEnvelope
		if got := scanEnvelope([]byte(c.in), &env); got != c.fast {
			t.Errorf("scanEnvelope(%s) = %v, want %v", c.in, got, c.fast)
		}
	}
}
