// Package irisschema validates Iris frames against the specification's
// draft-07 schema (shared/spec/iris-wire-protocol.schema.json), with one
// compiled validator per frame type. Tests run every frame the gateway
// emits through it.
package irisschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// File is the schema's path below the shared folder.
const File = "spec/iris-wire-protocol.schema.json"

// Locate finds the schema by walking up from the working directory to a
// folder that has shared/ beside or inside it.
func Locate() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		for _, p := range []string{filepath.Join(dir, "shared", File), filepath.Join(dir, "..", "shared", File)} {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("irisschema: %s not found above the working directory", File)
		}
		dir = parent
	}
}

// Validator checks frames.
type Validator struct {
	server  map[string]*jsonschema.Schema // server_to_app types
	client  map[string]*jsonschema.Schema // app_to_server types
	planned map[string]bool               // x-planned-frames, server side
	env     *jsonschema.Schema
}

// Load compiles the schema at path.
func Load(path string) (*Validator, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var spec struct {
		Envelope   any `json:"envelope"`
		FrameTypes struct {
			ServerToApp map[string]struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"server_to_app"`
			AppToServer map[string]struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"app_to_server"`
		} `json:"frame_types"`
		Definitions any `json:"definitions"`
		Planned     []struct {
			Name      string `json:"name"`
			Direction string `json:"direction"`
		} `json:"x-planned-frames"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, err
	}
	frames := map[string]any{}
	add := func(prefix string, types map[string]struct {
		Payload json.RawMessage `json:"payload"`
	}) error {
		for name, t := range types {
			var p map[string]any
			if err := json.Unmarshal(t.Payload, &p); err != nil {
				return fmt.Errorf("payload of %s: %w", name, err)
			}
			payload := map[string]any{"type": "object"}
			if ref, ok := p["$ref"]; ok && len(p) == 1 {
				payload = map[string]any{"allOf": []any{map[string]any{"type": "object"}, map[string]any{"$ref": ref}}}
			} else {
				payload["properties"] = p
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
	if err := add("s:", spec.FrameTypes.ServerToApp); err != nil {
		return nil, err
	}
	if err := add("c:", spec.FrameTypes.AppToServer); err != nil {
		return nil, err
	}
	doc := map[string]any{
		"$schema":     "http://json-schema.org/draft-07/schema#",
		"envelope":    spec.Envelope,
		"definitions": spec.Definitions,
		"frames":      frames,
	}
	c := jsonschema.NewCompiler()
	const url = "mem:///iris.json"
	if err := c.AddResource(url, roundTrip(doc)); err != nil {
		return nil, err
	}
	v := &Validator{server: map[string]*jsonschema.Schema{}, client: map[string]*jsonschema.Schema{}, planned: map[string]bool{}}
	if v.env, err = c.Compile(url + "#/envelope"); err != nil {
		return nil, err
	}
	for key := range frames {
		s, err := c.Compile(url + "#/frames/" + strings.ReplaceAll(key, "/", "~1"))
		if err != nil {
			return nil, fmt.Errorf("compiling %s: %w", key, err)
		}
		if name, ok := strings.CutPrefix(key, "s:"); ok {
			v.server[name] = s
		} else {
			v.client[strings.TrimPrefix(key, "c:")] = s
		}
	}
	for _, p := range spec.Planned {
		if p.Direction == "server_to_app" {
			v.planned[p.Name] = true
		}
	}
	return v, nil
}

// roundTrip turns a Go value into the plain JSON values the compiler wants.
func roundTrip(v any) any {
	b, _ := json.Marshal(v)
	out, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return out
}

// Server validates a frame the gateway sent. A type the schema does not
// define must be one of its planned frames (checked against the envelope
// only); anything else is an error, so a misspelt type is caught.
func (v *Validator) Server(frame []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(frame))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("frame is not an object")
	}
	typ, _ := m["type"].(string)
	s := v.server[typ]
	if s == nil {
		// media.pull is also the header a pull's bytes follow
		// (DECISIONS.md, "Media"); the schema lists it app to server only.
		if !v.planned[typ] && !strings.HasPrefix(typ, "picker.") && typ != "media.pull" {
			return fmt.Errorf("frame type %q is not in the schema", typ)
		}
		s = v.env
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%s frame %s: %w", typ, frame, err)
	}
	return nil
}

// Client validates a frame an app sends.
func (v *Validator) Client(frame []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(frame))
	if err != nil {
		return err
	}
	m, _ := doc.(map[string]any)
	typ, _ := m["type"].(string)
	s := v.client[typ]
	if s == nil {
		s = v.env
	}
	return s.Validate(doc)
}
