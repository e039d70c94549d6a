package irisschema

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/docs"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// TestPayloadsAgreeWithSchema checks proto/irisv1's payload types against
// docs/iris-v1.schema.json: the tables and the schema list the same frame
// types per direction; every JSON member of a Go payload type, nested
// objects and arrays included, is a property of its schema node, of a
// matching JSON type; a member the schema requires is in the Go type and
// never omitempty; and an example of every payload with every member
// filled validates against the schema and decodes back to itself.
func TestPayloadsAgreeWithSchema(t *testing.T) {
	var own map[string]any
	if err := json.Unmarshal(docs.IrisSchema, &own); err != nil {
		t.Fatal(err)
	}
	v, err := Own()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		dir   string
		table map[irisv1.FrameType]func() any
		valid func([]byte) error
	}{
		{"server_to_app", irisv1.ServerToApp, v.Server},
		{"app_to_server", irisv1.AppToServer, v.Client},
	} {
		frames := obj(obj(own["frame_types"])[d.dir])
		if got, want := slices.Sorted(maps.Keys(d.table)), keys(frames); !slices.Equal(got, want) {
			t.Errorf("%s: irisv1 has %v\nthe schema has %v", d.dir, got, want)
		}
		for _, typ := range keys(frames) {
			mk := d.table[typ]
			if mk == nil {
				continue
			}
			p := mk()
			node := obj(frames[typ])["payload"]
			for _, e := range payloadDrift(own, d.dir+" "+typ, reflect.TypeOf(p).Elem(), node) {
				t.Error(e)
			}
			fill(own, reflect.ValueOf(p).Elem(), node)
			frame, err := irisv1.Marshal(irisv1.Envelope{V: irisv1.Version, ID: 1, Type: typ, ChatID: "default"}, p)
			if err != nil {
				t.Fatalf("%s %s: %v", d.dir, typ, err)
			}
			if err := d.valid(frame); err != nil {
				t.Errorf("%s %s: a filled example breaks the schema: %v", d.dir, typ, err)
			}
			var env irisv1.Envelope
			back := mk()
			if err := json.Unmarshal(frame, &env); err != nil || json.Unmarshal(env.Payload, back) != nil || !reflect.DeepEqual(back, p) {
				t.Errorf("%s %s: %s does not decode back to %+v (got %+v)", d.dir, typ, frame, p, back)
			}
		}
	}
}

// TestPayloadDriftIsCaught checks the check: a member the schema does not
// have, a required member that is omitempty or missing, a JSON type that
// does not match, and the same inside a nested array are each reported.
func TestPayloadDriftIsCaught(t *testing.T) {
	var own map[string]any
	if err := json.Unmarshal(docs.IrisSchema, &own); err != nil {
		t.Fatal(err)
	}
	type hit struct {
		MessageID int    `json:"message_id"`
		Extra     string `json:"extra"`
	}
	type results struct {
		Query string `json:"query,omitempty"`
		Hits  []hit  `json:"hits"`
		Who   string `json:"who"`
	}
	node := obj(obj(obj(own["frame_types"])["server_to_app"])["search.results"])["payload"]
	got := strings.Join(payloadDrift(own, "search.results", reflect.TypeOf(results{}), node), "\n")
	for _, want := range []string{
		"search.results.query: required by the schema, but omitempty",
		"search.results.hits[].message_id: integer in Go, the schema says [string]",
		"search.results.hits[].extra: not in the schema",
		"search.results.who: not in the schema",
		"search.results.scope: required by the schema, not in the Go type",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("not reported: %q; the check said:\n%s", want, got)
		}
	}
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	nullable   = reflect.TypeFor[irisv1.Nullable]()
)

// payloadDrift compares Go type t with schema node n (resolved through
// $ref and allOf) and lists the differences.
func payloadDrift(doc map[string]any, path string, t reflect.Type, n any) []string {
	var out []string
	say := func(format string, args ...any) { out = append(out, path+fmt.Sprintf(format, args...)) }
	node := (&comparer{}).resolve(doc, obj(n))
	if node == nil {
		return []string{path + ": no schema node"}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	want := types(node["type"])
	kind := jsonKind(t)
	if kind != "" && want != nil && !slices.Contains(want, kind) && !(kind == "integer" && slices.Contains(want, "number")) {
		say(": %s in Go, the schema says %v", kind, want)
		return out
	}
	switch {
	case t == rawMessage, t == nullable:
		if t == nullable && !slices.Contains(want, "null") {
			say(": Nullable in Go, the schema says %v", want)
		}
	case t.Kind() == reflect.Struct:
		props := obj(node["properties"])
		required := map[string]bool{}
		for _, r := range list(node["required"]) {
			required[r.(string)] = true
		}
		seen := map[string]bool{}
		for f := range t.Fields() {
			name, omitempty := jsonName(f)
			if name == "" {
				continue
			}
			seen[name] = true
			if props[name] == nil {
				out = append(out, fmt.Sprintf("%s.%s: not in the schema", path, name))
				continue
			}
			if required[name] && omitempty {
				out = append(out, fmt.Sprintf("%s.%s: required by the schema, but omitempty", path, name))
			}
			out = append(out, payloadDrift(doc, path+"."+name, f.Type, props[name])...)
		}
		for _, r := range list(node["required"]) {
			if name := r.(string); !seen[name] {
				out = append(out, fmt.Sprintf("%s.%s: required by the schema, not in the Go type", path, name))
			}
		}
	case t.Kind() == reflect.Slice:
		out = append(out, payloadDrift(doc, path+"[]", t.Elem(), node["items"])...)
	}
	return out
}

// jsonKind is the JSON type encoding/json writes for t ("" where it is not
// one type: interfaces, raw messages).
func jsonKind(t reflect.Type) string {
	if t == rawMessage || t == nullable {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return ""
}

// jsonName is a field's JSON member name ("" when it has none) and
// whether it is omitempty.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag, ok := f.Tag.Lookup("json")
	if tag == "-" {
		return "", false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if !ok || name == "" {
		name = f.Name
	}
	return name, slices.Contains(strings.Split(opts, ","), "omitempty")
}

// fill sets every member of v to a value its schema node n allows: the
// first of an enum, one element in an array.
func fill(doc map[string]any, v reflect.Value, n any) {
	node := (&comparer{}).resolve(doc, obj(n))
	t := v.Type()
	switch {
	case t == rawMessage:
		if slices.Contains(types(node["type"]), "object") {
			v.SetBytes([]byte(`{"k":"v"}`))
		} else {
			v.SetBytes([]byte(`"text"`))
		}
		return
	case t == nullable:
		v.SetBytes(irisv1.NullableString("value"))
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		fill(doc, v.Elem(), n)
	case reflect.Struct:
		props := obj(node["properties"])
		for i := range t.NumField() {
			if name, _ := jsonName(t.Field(i)); name != "" {
				fill(doc, v.Field(i), props[name])
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(t, 1, 1)
		fill(doc, s.Index(0), node["items"])
		v.Set(s)
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]any{"k": "v"}))
	case reflect.String:
		if e := list(node["enum"]); len(e) > 0 {
			v.SetString(e[0].(string))
		} else {
			v.SetString("x")
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	}
}
