package core_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The catalogue is read from the source, not from core.Kinds(): a test
// binary links only the packages it imports, while these tests must see
// every kind of every package.

var update = flag.Bool("update", false, "rewrite docs/errors.md's catalogue from the code")

const (
	modulePath = "github.com/irisgate/irisgate"
	corePath   = modulePath + "/core"
	root       = ".." // the module, from core/
	docFile    = "../docs/errors.md"
	docStart   = "<!-- catalogue: start (go test ./core -run TestErrorsDocumented -update rewrites it) -->"
	docEnd     = "<!-- catalogue: end -->"
)

// kindDecl is one core.NewKind in the source.
type kindDecl struct {
	pkg, v      string // package directory (from the module root) and variable
	name, code  string
	format, pos string
	formatVerbs int
}

// srcFile is a parsed non-test file.
type srcFile struct {
	pkg  string // directory from the module root
	path string
	f    *ast.File
	core string // the name core is imported as ("" when it is not)
}

func parseModule(t *testing.T) (*token.FileSet, []srcFile) {
	t.Helper()
	fset := token.NewFileSet()
	var files []srcFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		sf := srcFile{pkg: filepath.ToSlash(rel), path: path, f: f}
		if sf.pkg == "core" {
			sf.core = "."
		}
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == corePath {
				sf.core = "core"
				if im.Name != nil {
					sf.core = im.Name.Name
				}
			}
		}
		files = append(files, sf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

// coreCall reports whether call is core.<fn> (or <fn> inside core).
func coreCall(sf srcFile, call *ast.CallExpr, fn string) bool {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return sf.core == "." && f.Name == fn
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && sf.core != "" && sf.core != "." && x.Name == sf.core && f.Sel.Name == fn
	}
	return false
}

// stringLit is the value of a string literal, or of literals joined by +.
func stringLit(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringLit(e.X)
		b, ok2 := stringLit(e.Y)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return stringLit(e.X)
	}
	return "", false
}

// verbs counts the arguments a format takes.
func verbs(format string) int {
	n := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			i++
			continue
		}
		n++
	}
	return n
}

// codeValues reads core's Code constants from its source.
func codeValues(t *testing.T, files []srcFile) map[string]string {
	vals := map[string]string{}
	for _, sf := range files {
		if sf.pkg != "core" {
			continue
		}
		ast.Inspect(sf.f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if strings.HasPrefix(name.Name, "Code") && i < len(vs.Values) {
					if v, ok := stringLit(vs.Values[i]); ok {
						vals[name.Name] = v
					}
				}
			}
			return true
		})
	}
	if len(vals) == 0 {
		t.Fatal("no Code constants found in core")
	}
	return vals
}

// kinds finds every core.NewKind, which must be a package variable's value
// with literal arguments, so that this test (and a reader) can see it.
func kinds(t *testing.T, fset *token.FileSet, files []srcFile) []kindDecl {
	t.Helper()
	codes := codeValues(t, files)
	var out []kindDecl
	for _, sf := range files {
		if sf.core == "" {
			continue
		}
		declared := map[*ast.CallExpr]bool{}
		for _, d := range sf.f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, val := range vs.Values {
					call, ok := val.(*ast.CallExpr)
					if !ok || !coreCall(sf, call, "NewKind") {
						continue
					}
					declared[call] = true
					pos := fset.Position(call.Pos()).String()
					if len(call.Args) != 3 {
						t.Errorf("%s: NewKind needs a name, a code and a format", pos)
						continue
					}
					name, ok1 := stringLit(call.Args[0])
					format, ok2 := stringLit(call.Args[2])
					var codeName string
					switch c := call.Args[1].(type) {
					case *ast.SelectorExpr:
						codeName = c.Sel.Name
					case *ast.Ident:
						codeName = c.Name
					}
					code, ok3 := codes[codeName]
					if !ok1 || !ok2 || !ok3 {
						t.Errorf("%s: NewKind's name and format must be string literals, its code a core.Code constant", pos)
						continue
					}
					out = append(out, kindDecl{pkg: sf.pkg, v: vs.Names[i].Name, name: name, code: code, format: format, pos: pos, formatVerbs: verbs(format)})
				}
			}
		}
		ast.Inspect(sf.f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && coreCall(sf, call, "NewKind") && !declared[call] {
				t.Errorf("%s: a kind is made in a package-level var, not in a function", fset.Position(call.Pos()))
			}
			return true
		})
	}
	seen := map[string]string{}
	for _, k := range out {
		if p, dup := seen[k.name]; dup {
			t.Errorf("%s: the kind name %q is taken by %s", k.pos, k.name, p)
		}
		seen[k.name] = k.pos
	}
	slices.SortFunc(out, func(a, b kindDecl) int {
		if c := strings.Compare(a.pkg, b.pkg); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// catalogue renders the kinds as docs/errors.md lists them.
func catalogue(ks []kindDecl) string {
	var b strings.Builder
	b.WriteString(docStart + "\n")
	pkg := ""
	for _, k := range ks {
		if k.pkg != pkg {
			pkg = k.pkg
			fmt.Fprintf(&b, "\n### %s\n\n| name | code | message |\n|---|---|---|\n", pkg)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k.name, k.code, codeSpan(k.format))
	}
	b.WriteString("\n" + docEnd)
	return b.String()
}

func codeSpan(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// docs/errors.md lists every kind: its name, its code and its message.
func TestErrorsDocumented(t *testing.T) {
	fset, files := parseModule(t)
	want := catalogue(kinds(t, fset, files))
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, docStart), strings.Index(s, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no catalogue between %q and %q", docFile, docStart, docEnd)
	}
	got := s[i : j+len(docEnd)]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(docFile, []byte(s[:i]+want+s[j+len(docEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s lists other kinds than the code has: run go test ./core -run TestErrorsDocumented -update\n%s", docFile, want)
}

// kindHelpers are functions called as f(err, kind, args...).
var kindHelpers = map[string]bool{"notFound": true, "lookupErr": true}

// An error's arguments match its kind's format: core.Kind.New cannot be
// checked by go vet's printf check.
func TestKindArguments(t *testing.T) {
	fset, files := parseModule(t)
	byVar := map[string]kindDecl{} // "pkg.Var"
	for _, k := range kinds(t, fset, files) {
		byVar[k.pkg+"."+k.v] = k
	}
	checked := 0
	for _, sf := range files {
		imports := map[string]string{} // local name → package directory
		for _, im := range sf.f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			dir, ok := strings.CutPrefix(p, modulePath+"/")
			if !ok {
				continue
			}
			name := filepath.Base(dir)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = dir
		}
		ast.Inspect(sf.f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || call.Ellipsis.IsValid() {
				return true
			}
			ref := func(e ast.Expr) (kindDecl, bool) {
				var key string
				switch x := e.(type) {
				case *ast.Ident:
					key = sf.pkg + "." + x.Name
				case *ast.SelectorExpr:
					if pk, ok := x.X.(*ast.Ident); ok && imports[pk.Name] != "" {
						key = imports[pk.Name] + "." + x.Sel.Name
					}
				}
				k, ok := byVar[key]
				return k, ok
			}
			var (
				k    kindDecl
				args int
			)
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr: // Kind.New(args...), Kind.Wrap(cause, args...)
				if fn.Sel.Name != "New" && fn.Sel.Name != "Wrap" {
					return true
				}
				if k, ok = ref(fn.X); !ok {
					return true
				}
				args = len(call.Args)
				if fn.Sel.Name == "Wrap" {
					args--
				}
			case *ast.Ident: // the helpers that take a kind and its arguments
				if !kindHelpers[fn.Name] || len(call.Args) < 2 {
					return true
				}
				if k, ok = ref(call.Args[1]); !ok {
					return true
				}
				args = len(call.Args) - 2
			default:
				return true
			}
			if args != k.formatVerbs {
				t.Errorf("%s: %s takes %d arguments (%q), not %d", fset.Position(call.Pos()), k.name, k.formatVerbs, k.format, args)
			}
			checked++
			return true
		})
	}
	if checked == 0 {
		t.Error("no use of a kind was found: the scan is broken")
	}
}

// No package but core makes an error without a kind: no core.Errorf and no
// core.Error literal outside core (its tests aside).
func TestNoAdHocErrors(t *testing.T) {
	fset, files := parseModule(t)
	for _, sf := range files {
		if sf.pkg == "core" || sf.core == "" {
			continue
		}
		ast.Inspect(sf.f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if coreCall(sf, n, "Errorf") {
					t.Errorf("%s: core.Errorf: make the error a kind (core.NewKind) and use its New", fset.Position(n.Pos()))
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == sf.core {
						t.Errorf("%s: a core.Error literal: make the error a kind", fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
	}
}
