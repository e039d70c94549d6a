package sandbox_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/irisgate/irisgate/sandbox"
)

// TestFileToolsStayInside: the file tools' opening follows no link out of
// the working directory, never reaches the data directory lying inside
// it (but its media, to read), never /proc, and never hangs on a FIFO.
func TestFileToolsStayInside(t *testing.T) {
	l := newLayout(t, true)
	sb, err := sandbox.New(sandbox.Config{Temp: l.temp, Hide: []string{l.data}, Expose: []string{l.media}})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(l.work, "notes.txt"), "inside")
	for _, link := range [][2]string{
		{l.outside, "esc"}, // a directory outside
		{filepath.Join(l.outside, "keep.txt"), "last"}, // a file outside
		{"../outside/keep.txt", "rel"},                 // relatively
		{"irisgate-data", "data"},                      // the data directory, inside
		{"irisgate-data/vapid.json", "key"},            // a hidden file, inside
		{"notes.txt", "alias"},                         // a file inside: fine
	} {
		if err := os.Symlink(link[0], filepath.Join(l.work, link[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(l.work, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(name string) (string, error) {
		p, err := sandbox.Locate(l.work, name)
		if err != nil {
			return "", err
		}
		f, err := sb.OpenRead(l.work, p)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		return string(b), err
	}
	if s, err := read("notes.txt"); s != "inside" || err != nil {
		t.Fatalf("notes.txt: %q %v", s, err)
	}
	if s, err := read("alias"); s != "inside" || err != nil {
		t.Fatalf("a link inside: %q %v", s, err)
	}
	for _, name := range []string{"esc/keep.txt", "last", "rel"} {
		if _, err := read(name); !errors.Is(err, sandbox.ErrOutside) {
			t.Errorf("read %s: %v, want ErrOutside", name, err)
		}
	}
	for _, name := range []string{"irisgate-data/vapid.json", "data/vapid.json", "key"} {
		if s, err := read(name); err == nil || strings.Contains(s, "PRIVATE") || !strings.Contains(err.Error(), "gateway's own data") {
			t.Errorf("read %s: %q %v, want refused", name, s, err)
		}
	}
	if s, err := read("irisgate-data/media/ab/cd/abcd1234"); s != "a photo" || err != nil {
		t.Errorf("an exposed media file: %q %v", s, err)
	}
	if _, err := read("fifo"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo: %v", err)
	}
	for _, abs := range []string{"/proc/self/environ", filepath.Join(l.data, "vapid.json")} {
		if err := sb.Refuses(abs); err == nil {
			t.Errorf("Refuses(%s) = nil", abs)
		}
		if _, err := read(abs); err == nil {
			t.Errorf("read %s outside: no error", abs)
		}
	}
	if s, err := read(filepath.Join(l.outside, "keep.txt")); s != "precious" || err != nil {
		t.Errorf("an approved read outside: %q %v", s, err)
	}

	writeIn := func(name, data string) error {
		p, err := sandbox.Locate(l.work, name)
		if err != nil {
			return err
		}
		if p, err = sb.ResolveInside(l.work, p); err != nil {
			return err
		}
		return sb.WriteInside(l.work, p, []byte(data))
	}
	if err := writeIn("new.txt", "made"); err != nil {
		t.Fatal(err)
	}
	if err := writeIn("alias", "through a link inside"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(l.work, "notes.txt")); string(b) != "through a link inside" {
		t.Fatalf("notes.txt after writing its alias: %q", b)
	}
	for _, name := range []string{"esc/x", "esc/keep.txt", "last", "rel", "../outside/keep.txt", filepath.Join(l.outside, "keep.txt")} {
		if err := writeIn(name, "pwned"); !errors.Is(err, sandbox.ErrOutside) {
			t.Errorf("write %s: %v, want ErrOutside", name, err)
		}
	}
	for _, name := range []string{"irisgate-data/vapid.json", "data/x", "key", "irisgate-data/media/ab/cd/abcd1234"} {
		if err := writeIn(name, "pwned"); err == nil {
			t.Errorf("write %s: no error", name)
		}
	}
	if err := writeIn("fifo", "x"); err == nil {
		t.Error("write to a fifo: no error")
	}
	for p, want := range map[string]string{
		filepath.Join(l.outside, "keep.txt"):           "precious",
		filepath.Join(l.data, "vapid.json"):            "PRIVATE-KEY",
		filepath.Join(l.media, "ab", "cd", "abcd1234"): "a photo",
	} {
		if b, err := os.ReadFile(p); string(b) != want || err != nil {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	for _, p := range []string{filepath.Join(l.outside, "x"), filepath.Join(l.data, "x")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// TestResolvedPathsHold: a write lands where ResolveInside said, by the
// canonical name (a link as the last element or on the way resolved), and
// a path changed since (a link put in its place) is not written; a read
// outside opens the file ResolveOutside named, not another put there.
func TestResolvedPathsHold(t *testing.T) {
	l := newLayout(t, false)
	sb, err := sandbox.New(sandbox.Config{Temp: l.temp, Hide: []string{l.data}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(l.work, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink(".git/hooks/pre-commit", filepath.Join(l.work, "innocent"))
	os.Symlink(".git/hooks", filepath.Join(l.work, "hooks"))
	for name, want := range map[string]string{"innocent": ".git/hooks/pre-commit", "hooks/x": ".git/hooks/x", "plain": "plain"} {
		p, _ := sandbox.Locate(l.work, name)
		q, err := sb.ResolveInside(l.work, p)
		if err != nil || q.Rel != want || q.Abs != filepath.Join(l.work, want) {
			t.Errorf("ResolveInside(%s) = %+v %v, want %s", name, q, err, want)
		}
	}
	p, _ := sandbox.Locate(l.work, "plain")
	q, _ := sb.ResolveInside(l.work, p)
	os.Symlink("notes", filepath.Join(l.work, "plain")) // swapped in after the approval
	if err := sb.WriteInside(l.work, q, []byte("x")); !errors.Is(err, sandbox.ErrChanged) {
		t.Errorf("a link put in the approved place: %v, want ErrChanged", err)
	}

	link := filepath.Join(l.outside, "link")
	os.Symlink("keep.txt", link)
	r, err := sb.ResolveOutside(link)
	if err != nil || r.Abs != filepath.Join(l.outside, "keep.txt") {
		t.Fatalf("ResolveOutside: %+v %v", r, err)
	}
	write(t, filepath.Join(l.outside, "other"), "another file")
	if err := os.Rename(filepath.Join(l.outside, "other"), r.Abs); err != nil {
		t.Fatal(err)
	}
	if f, err := sb.OpenRead(l.work, r); !errors.Is(err, sandbox.ErrChanged) {
		if f != nil {
			f.Close()
		}
		t.Errorf("another file where the approved one was: %v, want ErrChanged", err)
	}
}

// TestLocate: relative names are in the working directory, ~ is home, and
// only names in it count as inside.
func TestLocate(t *testing.T) {
	home, _ := os.UserHomeDir()
	for name, want := range map[string]sandbox.Path{
		"a/b.txt":         {Abs: "/w/a/b.txt", Rel: "a/b.txt"},
		"out/../made.txt": {Abs: "/w/made.txt", Rel: "made.txt"},
		"../x":            {Abs: "/x"},
		"/w/y":            {Abs: "/w/y", Rel: "y"},
		"/etc/passwd":     {Abs: "/etc/passwd"},
		"~/f":             {Abs: filepath.Join(home, "f")},
	} {
		if got, err := sandbox.Locate("/w", name); err != nil || got != want {
			t.Errorf("Locate(%q) = %+v %v, want %+v", name, got, err, want)
		}
	}
	if _, err := sandbox.Locate("/w", "a\x00b"); err == nil {
		t.Error("a NUL in a path")
	}
}
