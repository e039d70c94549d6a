package irisv1

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/irisschema"
)

// FuzzDecodeRequest fuzzes the request decoder and every request payload
// type. The seed corpus (testdata/fuzz/FuzzDecodeRequest, shared with
// wire/iris's FuzzDecode) has valid frames of every request type, null
// fields, huge numbers, wrong types, deep nesting, invalid UTF-8 and
// broken JSON. Invariants: no panic; every refusal is a *DecodeError; one
// whose input has a readable id and whose envelope members have their
// types carries that id; invalid JSON is refused; an accepted frame has a
// type and version 1 (or none); a payload refusal names the frame type.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"v":1,"id":3,"type":"channel.icon","payload":{"icon":null,"color":"#abcdef"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeRequest(%q) = %v, not a *DecodeError", data, err)
			}
			var shape struct {
				V        *int    `json:"v"`
				Type     string  `json:"type"`
				ChatID   *string `json:"chat_id"`
				ThreadID *string `json:"thread_id"`
			}
			if rid, ok := irisschema.ReadableID(data); ok && json.Unmarshal(data, &shape) == nil && de.ID != rid {
				t.Fatalf("DecodeRequest(%q) refused it with id %d, want %d: %v", data, de.ID, rid, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("DecodeRequest accepted invalid JSON %q", data)
		}
		if r.Type == "" || r.V != Version {
			t.Fatalf("DecodeRequest(%q) = %+v", data, r.Envelope)
		}
		var v struct {
			V *json.Number `json:"v"`
		}
		if json.Unmarshal(data, &v) == nil && v.V != nil && v.V.String() != "1" {
			t.Fatalf("DecodeRequest accepted version %s: %q", *v.V, data)
		}
		if rid, ok := irisschema.ReadableID(data); ok && rid != r.ID {
			t.Fatalf("DecodeRequest read id %d from %q, want %d", r.ID, data, rid)
		}
		for typ, mk := range AppToServer {
			r.Type = typ
			if err := DecodePayload(r, mk()); err != nil && !strings.HasPrefix(err.Error(), "malformed "+typ+" payload: ") {
				t.Fatalf("DecodePayload(%s) of %q = %v", typ, data, err)
			}
		}
	})
}

// FuzzAppendFrame checks AppendFrame against encoding/json for any
// envelope strings (ASCII or not, valid UTF-8 or not) and ids.
func FuzzAppendFrame(f *testing.F) {
	f.Add(int64(0), "message.update", "default", "", int64(0), "hello")
	f.Add(int64(42), "history", "chan_\"<x>\"", "t_\u2028", int64(9), "\xff&")
	f.Fuzz(func(t *testing.T, id int64, typ, chatID, threadID string, cursor int64, text string) {
		payload, _ := json.Marshal(map[string]string{"text": text})
		env := Envelope{V: Version, ID: id, Type: typ, ChatID: chatID, ThreadID: threadID, Cursor: cursor}
		got := AppendFrame(nil, env, payload)
		env.Payload = payload
		want, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}
