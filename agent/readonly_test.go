package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/irisgate/irisgate/sandbox"
)

func TestReadOnly(t *testing.T) {
	for _, c := range []string{
		"ls", "ls -la", "cat note.txt", "git status", "git status --short", "git log --oneline -5", "git diff HEAD~1",
		"grep -rn 'a|b' .", `grep -n "func main" main.go`, "ls | wc -l", "cat go.mod | head -3", "find . -name '*.go'",
		"sort names.txt | uniq -c", "echo hi", "pwd", "env", "go version", "wc -l src/a.go",
	} {
		if !ReadOnly(c) {
			t.Errorf("%q: not read-only", c)
		}
	}
	for _, c := range []string{
		"", "rm x", "echo hi > out.txt", "cat a; rm b", "cat a && rm b", "cat $(echo x)", "cat `x`", "cat $HOME/x",
		"cat /etc/passwd", "cat ../x", "cat ~/.ssh/id_rsa", "ls *", "find . -delete", "find . -exec rm {} ;",
		"sort -o out.txt in.txt", "sort -uo out in", "uniq in out", "git push", "git branch -D main", "git -c core.pager=x log",
		"git diff --output=x", "rg --pre ./evil x", "tree -o out", "env rm -rf .", "X=1 ls", "grep --file=/etc/x y",
		"cat a | sh", "ls || rm x", "| ls", "ls |", "echo 'unterminated", `echo "$(id)"`, "go env -w GOFLAGS=x", "date -s 2020-01-01",
		"cat\na", "ls &", "python3 -c 'print(1)'",
	} {
		if ReadOnly(c) {
			t.Errorf("%q: read-only", c)
		}
	}
}

func TestParseApprovalMode(t *testing.T) {
	for in, want := range map[string]ApprovalMode{"ask": AskAll, "AUTO": AskOutside, "": AskOutside, "yolo": AskNever, "never": AskNever} {
		if got, err := ParseApprovalMode(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseApprovalMode("sometimes"); err == nil {
		t.Error("an unknown mode parsed")
	}
}

// FuzzReadOnly: any line is judged without a panic, and a line judged
// read-only runs only listed commands.
func FuzzReadOnly(f *testing.F) {
	for _, s := range []string{"ls -la", "cat a | grep 'x|y'", `echo "a b"`, "git log HEAD~2", "rm -rf /", "a'b", "|", "x\x00y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if !ReadOnly(line) {
			return
		}
		segs, ok := splitPipeline(line)
		if !ok {
			t.Fatalf("%q is read-only but does not split", line)
		}
		for _, words := range segs {
			if _, listed := readOnlyTools[words[0]]; !listed {
				t.Fatalf("%q runs %q", line, words[0])
			}
		}
	})
}

// TestReadOnlyWithoutAWall: without a wall the list asks more: no git, no
// go, no argument that resolves out of the working directory or into the
// data directory lying in it, no recursive read over that.
func TestReadOnlyWithoutAWall(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "irisgate-data")
	os.MkdirAll(filepath.Join(data, "media"), 0o700)
	os.WriteFile(filepath.Join(work, "notes.txt"), []byte("x"), 0o644)
	os.Symlink("irisgate-data", filepath.Join(work, "innocent"))
	os.Symlink("/etc", filepath.Join(work, "etc"))
	sb, err := sandbox.New(sandbox.Config{Temp: t.TempDir(), Hide: []string{data}, Expose: []string{filepath.Join(data, "media")}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &Tools{Sandbox: sb}
	for _, c := range []string{"ls", "cat notes.txt", "grep -n x notes.txt", "wc -l notes.txt new.txt", "ls irisgate-data/media", "find . -name '*.go'"} {
		if !ts.readOnlyHere(work, c, false) {
			t.Errorf("%q: not read-only without a wall", c)
		}
	}
	for _, c := range []string{"git status", "git log", "go version", "cat irisgate-data/vapid.json", "cat innocent/vapid.json", "head -n 1 irisgate-data/x",
		"grep -r PRIVATE", "grep -rn PRIVATE .", "rg PRIVATE", "diff -r . notes.txt", "cat etc/passwd", "grep --file=irisgate-data/x notes.txt"} {
		if ts.readOnlyHere(work, c, false) {
			t.Errorf("%q: read-only without a wall", c)
		}
		if ReadOnly(c) && !ts.readOnlyHere(work, c, true) {
			t.Errorf("%q: behind a wall the list is the list", c)
		}
	}
}
