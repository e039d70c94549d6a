// Package irisschema validates Iris frames against irisgate's own schema
// of them (docs/iris-v1.schema.json), with one compiled validator per
// frame type. Tests run every frame the gateway emits through it.
//
// The specification's schema (shared/spec/iris-wire-protocol.schema.json)
// is not needed to build or test; where it is present, drift.go compares
// the two frame by frame.
package irisschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/irisgate/irisgate/docs"
)

// Validator checks frames.
type Validator struct {
	server map[string]*jsonschema.Schema // server_to_app types
	client map[string]*jsonschema.Schema // app_to_server types
}

// document is the layout both schemas share: an envelope, frame types by
// direction with a payload each, and shared definitions.
type document struct {
	Envelope   json.RawMessage `json:"envelope"`
	FrameTypes struct {
		ServerToApp map[string]frameType `json:"server_to_app"`
		AppToServer map[string]frameType `json:"app_to_server"`
	} `json:"frame_types"`
	Definitions map[string]json.RawMessage `json:"definitions"`
	Planned     []struct {
		Name      string `json:"name"`
		Direction string `json:"direction"`
	} `json:"x-planned-frames"`
}

type frameType struct {
	Payload json.RawMessage `json:"payload"`
}

var (
	ownOnce sync.Once
	own     *Validator
	ownErr  error
)

// Own returns the validator of irisgate's schema, compiled once.
func Own() (*Validator, error) {
	ownOnce.Do(func() { own, ownErr = compile(docs.IrisSchema, false) })
	return own, ownErr
}

// compile builds a validator from a schema document. In the
// specification's layout (spec true) a payload is a map of properties (or
// one $ref); in irisgate's, it is a schema of its own.
func compile(raw []byte, spec bool) (*Validator, error) {
	var d document
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("irisschema: %w", err)
	}
	frames := map[string]any{}
	add := func(prefix string, types map[string]frameType) error {
		for name, t := range types {
			var payload any
			if err := json.Unmarshal(t.Payload, &payload); err != nil {
				return fmt.Errorf("irisschema: payload of %s: %w", name, err)
			}
			if spec {
				payload = specPayload(payload.(map[string]any))
			}
			frames[prefix+name] = map[string]any{
				"allOf": []any{
					map[string]any{"$ref": "#/envelope"},
					map[string]any{"required": []any{"payload"}, "properties": map[string]any{"payload": payload, "type": map[string]any{"const": name}}},
				},
			}
		}
		return nil
	}
	if err := add("s:", d.FrameTypes.ServerToApp); err != nil {
		return nil, err
	}
	if err := add("c:", d.FrameTypes.AppToServer); err != nil {
		return nil, err
	}
	doc := map[string]any{
		"$schema":     "http://json-schema.org/draft-07/schema#",
		"envelope":    d.Envelope,
		"definitions": d.Definitions,
		"frames":      frames,
	}
	c := jsonschema.NewCompiler()
	const url = "mem:///iris.json"
	if err := c.AddResource(url, roundTrip(doc)); err != nil {
		return nil, err
	}
	v := &Validator{server: map[string]*jsonschema.Schema{}, client: map[string]*jsonschema.Schema{}}
	for key := range frames {
		s, err := c.Compile(url + "#/frames/" + strings.ReplaceAll(key, "/", "~1"))
		if err != nil {
			return nil, fmt.Errorf("irisschema: compiling %s: %w", key, err)
		}
		if name, ok := strings.CutPrefix(key, "s:"); ok {
			v.server[name] = s
		} else {
			v.client[strings.TrimPrefix(key, "c:")] = s
		}
	}
	return v, nil
}

// specPayload turns the specification's payload (its members, or one
// $ref) into a schema.
func specPayload(p map[string]any) map[string]any {
	if ref, ok := p["$ref"]; ok && len(p) == 1 {
		return map[string]any{"allOf": []any{map[string]any{"type": "object"}, map[string]any{"$ref": ref}}}
	}
	return map[string]any{"type": "object", "properties": p}
}

// roundTrip turns a Go value into the plain JSON values the compiler wants.
func roundTrip(v any) any {
	b, _ := json.Marshal(v)
	out, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return out
}

// Server validates a frame the gateway sent. A type the schema does not
// define is an error, so a misspelt type is caught.
func (v *Validator) Server(frame []byte) error {
	return v.validate(v.server, frame)
}

// Client validates a frame an app sends.
func (v *Validator) Client(frame []byte) error {
	return v.validate(v.client, frame)
}

func (v *Validator) validate(types map[string]*jsonschema.Schema, frame []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(frame))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("frame is not an object")
	}
	typ, _ := m["type"].(string)
	s := types[typ]
	if s == nil {
		return fmt.Errorf("frame type %q is not in the schema", typ)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%s frame %s: %w", typ, frame, err)
	}
	return nil
}
