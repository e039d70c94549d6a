package irisschema

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/docs"
)

// specFile is the specification's schema below a shared/ folder.
const specFile = "spec/iris-wire-protocol.schema.json"

// locateSpec finds the specification's schema in a shared/ folder beside
// or inside the working directory or one of its parents.
func locateSpec() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		for _, p := range []string{filepath.Join(dir, "shared", specFile), filepath.Join(dir, "..", "shared", specFile)} {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// TestAgreesWithSpec compares irisgate's schema with the specification's
// frame by frame, where the specification is at hand: every frame type,
// member, type and enum the specification names must be in ours the same;
// a member or frame ours adds must say why (x-irisgate) or be one the
// specification plans.
func TestAgreesWithSpec(t *testing.T) {
	p, err := locateSpec()
	if err != nil {
		t.Skip("the specification (shared/" + specFile + ") is not beside this checkout; nothing to compare with")
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compile(raw, true); err != nil {
		t.Fatalf("the specification's schema does not compile: %v", err)
	}
	var spec, own map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(docs.IrisSchema, &own); err != nil {
		t.Fatal(err)
	}
	for _, d := range drift(spec, own) {
		t.Error(d)
	}
}

// drift lists the differences between the specification's schema and ours.
func drift(spec, own map[string]any) []string {
	c := &comparer{spec: spec, own: own}
	c.node("envelope", spec["envelope"], own["envelope"])
	planned := map[string]bool{}
	for _, p := range list(spec["x-planned-frames"]) {
		m := obj(p)
		planned[m["direction"].(string)+" "+m["name"].(string)] = true
	}
	for _, dir := range []string{"server_to_app", "app_to_server"} {
		sf, of := obj(obj(spec["frame_types"])[dir]), obj(obj(own["frame_types"])[dir])
		for _, name := range keys(sf) {
			f := obj(of[name])
			if f == nil {
				c.say("%s %s: in the specification, not in ours", dir, name)
				continue
			}
			c.node(dir+" "+name, specPayload(obj(obj(sf[name])["payload"])), f["payload"])
		}
		for _, name := range keys(of) {
			if sf[name] == nil && !planned[dir+" "+name] && obj(of[name])["x-irisgate"] == nil {
				c.say("%s %s: ours only, and neither planned by the specification nor explained (x-irisgate)", dir, name)
			}
		}
	}
	for k := range planned {
		dir, name, _ := strings.Cut(k, " ")
		if obj(obj(own["frame_types"])[dir])[name] == nil {
			c.say("%s %s: planned by the specification, not defined in ours", dir, name)
		}
	}
	return c.out
}

type comparer struct {
	spec, own map[string]any
	out       []string
}

func (c *comparer) say(format string, args ...any) {
	c.out = append(c.out, fmt.Sprintf(format, args...))
}

// node compares one schema node of the specification with ours.
func (c *comparer) node(path string, s, o any) {
	sn, on := c.resolve(c.spec, obj(s)), c.resolve(c.own, obj(o))
	if sn == nil {
		return
	}
	if on == nil {
		c.say("%s: missing in ours", path)
		return
	}
	if st, ot := types(sn["type"]), types(on["type"]); st != nil && !slices.Equal(st, ot) {
		c.say("%s: type %v in the specification, %v in ours", path, st, ot)
	}
	if se, oe := enum(sn["enum"]), enum(on["enum"]); !slices.Equal(se, oe) {
		c.say("%s: enum %v in the specification, %v in ours", path, se, oe)
	}
	if fmt.Sprint(sn["const"]) != fmt.Sprint(on["const"]) {
		c.say("%s: const %v in the specification, %v in ours", path, sn["const"], on["const"])
	}
	sp, op := obj(sn["properties"]), obj(on["properties"])
	for _, k := range keys(sp) {
		c.node(path+"."+k, sp[k], op[k])
	}
	for _, k := range keys(op) {
		if sp[k] == nil && obj(op[k])["x-irisgate"] == nil {
			c.say("%s.%s: ours only, with no x-irisgate saying why", path, k)
		}
	}
	if sn["items"] != nil {
		c.node(path+"[]", sn["items"], on["items"])
	}
}

// resolve follows a node's $ref into its document's definitions, and an
// allOf wrapper of an object type and one $ref (specPayload's form).
func (c *comparer) resolve(doc, n map[string]any) map[string]any {
	for range 8 {
		if all := list(n["allOf"]); len(all) == 2 {
			n = obj(all[1])
			continue
		}
		ref, ok := n["$ref"].(string)
		if !ok {
			return n
		}
		n = obj(obj(doc["definitions"])[strings.TrimPrefix(ref, "#/definitions/")])
	}
	return n
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// types is a node's type as a sorted set.
func types(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, fmt.Sprint(x))
		}
		sort.Strings(out)
		return out
	}
	return nil
}

func enum(v any) []string {
	out := types(v)
	if _, ok := v.(string); ok {
		return nil
	}
	return out
}

// TestDriftIsCaught checks the comparison itself: a member the
// specification has and ours lacks, a changed enum, and an unexplained
// addition are each reported.
func TestDriftIsCaught(t *testing.T) {
	var own map[string]any
	if err := json.Unmarshal(docs.IrisSchema, &own); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{
		"envelope": own["envelope"],
		"frame_types": map[string]any{
			"server_to_app": map[string]any{
				"typing": map[string]any{"payload": map[string]any{"on": map[string]any{"type": "boolean"}, "who": map[string]any{"type": "string"}}},
				"status": map[string]any{"payload": map[string]any{"state": map[string]any{"type": "string", "enum": []any{"online"}}}},
			},
			"app_to_server": map[string]any{},
		},
		"definitions": own["definitions"],
	}
	got := strings.Join(drift(spec, own), "\n")
	for _, want := range []string{"server_to_app typing.who: missing in ours", "server_to_app status.state: enum [online]", "server_to_app message: ours only"} {
		if !strings.Contains(got, want) {
			t.Errorf("drift did not report %q; it said:\n%s", want, got)
		}
	}
}
