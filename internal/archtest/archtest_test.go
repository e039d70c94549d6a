// Package archtest holds the rules of the code's shape that the compiler
// does not: which package may import which (data flows one way: socket →
// dialect → core command → store / agent → events → hub → writer), and
// how long a file may grow. docs/architecture.md explains each rule; a
// rule broken here names the file and the import.
package archtest

import (
	"bufio"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/irisgate/irisgate/"

// root is the repository's top directory.
func root(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// pkg is one package of the module: its path inside it and its imports
// (of non-test files: tests may reach further to build their world).
type pkg struct {
	path    string
	imports []string
}

func packages(t *testing.T) []pkg {
	t.Helper()
	top := root(t)
	var out []pkg
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != top && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		bp, err := build.Default.ImportDir(p, 0)
		if err != nil {
			return nil // no Go files here
		}
		rel, _ := filepath.Rel(top, p)
		out = append(out, pkg{path: filepath.ToSlash(rel), imports: bp.Imports})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("found %d packages: is the walk looking at the repository?", len(out))
	}
	return out
}

// own is an import of this module, as a path inside it ("" if not ours).
func own(imp string) string {
	if r, ok := strings.CutPrefix(imp, module); ok {
		return r
	}
	return ""
}

func stdlib(imp string) bool { return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }

func under(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }

// rule says what a package may not import; why is what docs/architecture.md says.
type rule struct {
	applies func(p string) bool
	refuses func(imp string) bool
	why     string
}

var rules = []rule{
	{
		applies: func(p string) bool { return under(p, "proto") || p == "core" },
		refuses: func(imp string) bool { return !stdlib(imp) && !pure[own(imp)] },
		why:     "the protocol types and the core need the standard library only (directly, or through a package of ours that does): any program may take them",
	},
	{
		applies: func(p string) bool { return p == "store/record" },
		refuses: func(imp string) bool { return !stdlib(imp) && own(imp) != "core" && !pure[own(imp)] },
		why:     "the stored records depend on the core alone (and packages of ours that need the standard library only)",
	},
	{
		applies: func(p string) bool { return under(p, "store") && p != "store/storetest" },
		refuses: func(imp string) bool {
			o := own(imp)
			return under(o, "gateway") || under(o, "hub") || under(o, "wire") || under(o, "proto") || o == "server" || o == "agent"
		},
		why: "a store knows the core and its records, nothing above it",
	},
	{
		applies: func(p string) bool { return under(p, "wire") },
		refuses: func(imp string) bool {
			return under(own(imp), "store") || imp == "database/sql" || strings.HasPrefix(imp, "modernc.org/") || strings.HasPrefix(imp, "github.com/jackc/")
		},
		why: "a dialect knows nothing of SQL: it speaks to the gateway's commands",
	},
	{
		applies: func(p string) bool { return under(p, "gateway") || p == "hub" || p == "core" },
		refuses: func(imp string) bool {
			o := own(imp)
			return under(o, "wire") || under(o, "proto") || o == "server" || o == "client"
		},
		why: "the core and its commands know no wire format: dialects depend on them, not the other way",
	},
	{
		applies: func(p string) bool { return p == "hub" },
		refuses: func(imp string) bool { return under(own(imp), "store") },
		why:     "the hub keeps proofs through its ProofStore, not the store itself",
	},
	{
		// The fleet sits between the commit publisher and the hub: it
		// carries core events between replicas in its own versioned
		// format, so it knows no dialect, and nothing of the gateway's
		// commands (the hub's Relay and Presence are its seams).
		applies: func(p string) bool { return p == "fleet" },
		refuses: func(imp string) bool {
			o := own(imp)
			return under(o, "wire") || under(o, "proto") || under(o, "gateway") || o == "server" || o == "client"
		},
		why: "the fleet relays core events between replicas through the hub's seams: no wire format, no gateway",
	},
	{
		applies: func(p string) bool { return p == "client" },
		refuses: func(imp string) bool { o := own(imp); return o != "" && o != "proto/irisv1" },
		why:     "the Go client is the protocol and a socket: it must not drag the server in",
	},
}

// pure holds the packages of the module whose imports, all the way down,
// are the standard library's (filled by TestImportRules).
var pure = map[string]bool{}

func fillPure(ps []pkg) {
	byPath := map[string]pkg{}
	for _, p := range ps {
		byPath[p.path] = p
	}
	var visit func(path string, seen map[string]bool) bool
	visit = func(path string, seen map[string]bool) bool {
		if ok, done := pure[path]; done {
			return ok
		}
		if seen[path] {
			return false
		}
		seen[path] = true
		p, found := byPath[path]
		ok := found
		for _, imp := range p.imports {
			if !stdlib(imp) && (own(imp) == "" || !visit(own(imp), seen)) {
				ok = false
			}
		}
		pure[path] = ok
		return ok
	}
	for _, p := range ps {
		visit(p.path, map[string]bool{})
	}
}

func TestImportRules(t *testing.T) {
	ps := packages(t)
	fillPure(ps)
	for _, p := range ps {
		for _, r := range rules {
			if !r.applies(p.path) {
				continue
			}
			for _, imp := range p.imports {
				if r.refuses(imp) {
					t.Errorf("%s imports %s: %s", p.path, imp, r.why)
				}
			}
		}
	}
}

// maxLines is how long a file may grow; past it, split it by job. A file
// listed in longer is allowed more, and says why.
const maxLines = 600

var longer = map[string]string{}

func TestFilesStayShort(t *testing.T) {
	top := root(t)
	filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != top && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(top, p)
		rel = filepath.ToSlash(rel)
		if n := lines(t, p); n > maxLines && longer[rel] == "" {
			t.Errorf("%s has %d lines (at most %d): split it by job", rel, n, maxLines)
		}
		return nil
	})
}

func lines(t *testing.T, path string) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

// The rules bite: each refuses the import it was written against.
func TestRulesBite(t *testing.T) {
	fillPure([]pkg{{path: "internal/jsontext"}, {path: "internal/leaky", imports: []string{"github.com/coder/websocket"}}})
	for _, c := range []struct{ pkg, imp string }{
		{"proto/irisv1", "github.com/coder/websocket"},
		{"proto/mobilev1", module + "internal/leaky"},
		{"core", module + "store"},
		{"store/record", module + "store"},
		{"store", module + "gateway"},
		{"store/postgres", module + "hub"},
		{"wire/iris", module + "store"},
		{"wire/mobile", "database/sql"},
		{"gateway", module + "wire/iris"},
		{"gateway/turn", module + "proto/irisv1"},
		{"hub", module + "store"},
		{"client", module + "server"},
		{"fleet", module + "wire/iris"},
		{"fleet", module + "gateway/commit"},
	} {
		refused := false
		for _, r := range rules {
			if r.applies(c.pkg) && r.refuses(c.imp) {
				refused = true
			}
		}
		if !refused {
			t.Errorf("no rule refuses %s importing %s", c.pkg, c.imp)
		}
	}
	for _, c := range []struct{ pkg, imp string }{
		{"proto/mobilev1", module + "internal/jsontext"},
		{"gateway", module + "store"},
		{"wire/iris", module + "gateway"},
		{"client", module + "proto/irisv1"},
		{"fleet", module + "hub"},
		{"fleet", module + "store/record"},
	} {
		for _, r := range rules {
			if r.applies(c.pkg) && r.refuses(c.imp) {
				t.Errorf("%s importing %s is refused (%s), but is the design", c.pkg, c.imp, r.why)
			}
		}
	}
}

// README's "How the code is laid out" names every package, so a
// newcomer's map has no blank.
func TestReadmeListsEveryPackage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## How the code is laid out")
	if !ok {
		t.Fatal(`README.md has no "How the code is laid out" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	for _, p := range packages(t) {
		if p.path == "." {
			continue
		}
		if !strings.Contains(section, "`"+p.path+"`") {
			t.Errorf("README's package table does not list `%s`", p.path)
		}
	}
}
