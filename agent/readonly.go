package agent

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/irisgate/irisgate/sandbox"
)

// ReadOnly reports whether a command line is on the short read-only list
// that runs without asking where everything else asks (no sandbox on this
// machine, or the lane chose "ask"): a pipeline of listed commands with
// plain arguments that stay in the working directory. The check is an
// allow-list that fails closed: any shell syntax it does not know (a
// redirection, a substitution, a variable, a glob, a second command)
// makes the line not read-only. It is a convenience, not the wall.
func ReadOnly(line string) bool {
	segs, ok := splitPipeline(line)
	if !ok {
		return false
	}
	for _, words := range segs {
		if len(words) == 0 || !readOnlyCommand(words[0], words[1:]) {
			return false
		}
	}
	return true
}

// readOnlyHere is ReadOnly for a command run in cwd behind wall (walled)
// or without one. Without a wall nothing but the allow-list's answer
// stands between the line and the gateway's user, so it asks more of it:
// git and go are not read-only (a repository's config or a module's
// toolchain line can run code; git status runs core.fsmonitor), and every
// argument, resolved through its links, must stay in the working
// directory and away from what tools never see (the data directory lying
// inside it, in the defaults' layout). A recursive read (grep -r, rg,
// diff -r) may not even pass over one.
func (ts *Tools) readOnlyHere(cwd, line string, walled bool) bool {
	if !ReadOnly(line) {
		return false
	}
	if walled {
		return true // the wall keeps what the list would
	}
	segs, _ := splitPipeline(line)
	dir := sandbox.ResolveExisting(cwd)
	for _, words := range segs {
		name, args := words[0], words[1:]
		if name == "git" || name == "go" {
			return false
		}
		deep := recursive(name, args)
		var paths []string
		for _, a := range args {
			if strings.HasPrefix(a, "-") {
				if _, v, ok := strings.Cut(a, "="); ok {
					paths = append(paths, v)
				}
				continue
			}
			paths = append(paths, a)
		}
		if len(paths) == 0 || deep {
			paths = append(paths, ".") // what they read when named nothing
		}
		for _, p := range paths {
			abs := sandbox.ResolveExisting(filepath.Join(cwd, p))
			if !within(abs, dir) || ts.Sandbox.Conceals(abs, deep) {
				return false
			}
		}
	}
	return true
}

// recursive reports whether a read-only command reads the files beneath
// the directories it is given.
func recursive(name string, args []string) bool {
	switch name {
	case "rg":
		return true
	case "grep", "egrep", "fgrep", "diff":
		for _, a := range args {
			if a == "--recursive" || a == "--dereference-recursive" || strings.HasPrefix(a, "--directories") ||
				strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a, "rRd") {
				return true
			}
		}
	}
	return false
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// splitPipeline splits a line into the words of each command of a
// pipeline, taking quotes off; ok is false on anything but plain words,
// quotes and single pipes.
func splitPipeline(line string) (segs [][]string, ok bool) {
	var words []string
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '|':
			end()
			if len(words) == 0 {
				return nil, false // "||" or a leading pipe
			}
			segs = append(segs, words)
			words = nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 || strings.ContainsAny(line[i+1:i+1+j], "$`\\!") {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case plainByte(c):
			w.WriteByte(c)
			inWord = true
		case c == '~' && inWord && i > 0 && isAlnum(line[i-1]):
			w.WriteByte(c) // HEAD~1: a tilde expands only at a word's start

		default:
			return nil, false
		}
	}
	end()
	if len(words) == 0 {
		return nil, false
	}
	return append(segs, words), true
}

func plainByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("_./:=@%+,^-", c) >= 0
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// readOnlyTools are the commands that only read, with the arguments that
// would make them write or run something else.
var readOnlyTools = map[string]func(args []string) bool{
	"ls": any_, "cat": any_, "head": any_, "tail": any_, "wc": any_, "pwd": any_, "echo": any_,
	"grep": any_, "egrep": any_, "fgrep": any_, "stat": any_, "file": any_, "du": any_, "df": any_,
	"which": any_, "whoami": any_, "id": any_, "date": noFlags("-s", "--set"), "uname": any_, "true": any_, "false": any_,
	"diff": any_, "cmp": any_, "cut": any_, "tr": any_, "nl": any_, "basename": any_, "dirname": any_,
	"realpath": any_, "readlink": any_, "md5sum": any_, "sha1sum": any_, "sha256sum": any_,
	"printenv": none, "env": none,
	"rg":   noFlags("--pre"),
	"tree": noFlags("-o"),
	"find": noFlags("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
	"sort": func(args []string) bool {
		for _, a := range args {
			if strings.HasPrefix(a, "--") {
				if strings.HasPrefix(a, "--output") || strings.HasPrefix(a, "--compress") || strings.HasPrefix(a, "--temporary") {
					return false
				}
			} else if strings.HasPrefix(a, "-") && strings.ContainsAny(a, "oT") {
				return false
			}
		}
		return true
	},
	"uniq": func(args []string) bool { return positional(args) <= 1 }, // a second one is a file it writes
	"git": func(args []string) bool {
		if len(args) == 0 {
			return false
		}
		sub, rest := args[0], args[1:]
		for _, a := range rest {
			if strings.HasPrefix(a, "--output") || a == "--ext-diff" {
				return false
			}
		}
		switch sub {
		case "status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "describe":
			return true
		case "branch":
			return positional(rest) == 0 && noFlags("-d", "-D", "-m", "-M", "-c", "-C", "--delete", "--move", "--copy", "-u", "--set-upstream-to", "--unset-upstream", "--edit-description", "-f", "--force")(rest)
		}
		return false
	},
	"go": func(args []string) bool {
		return len(args) >= 1 && (args[0] == "version" || args[0] == "env" && noFlags("-w", "-u")(args[1:]))
	},
}

func any_(args []string) bool { return true }

func none(args []string) bool { return len(args) == 0 }

// noFlags refuses the listed flags (also as --flag=value).
func noFlags(flags ...string) func([]string) bool {
	return func(args []string) bool {
		for _, a := range args {
			name, _, _ := strings.Cut(a, "=")
			if slices.Contains(flags, name) {
				return false
			}
		}
		return true
	}
}

func positional(args []string) int {
	n := 0
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			n++
		}
	}
	return n
}

// readOnlyCommand checks one command of a pipeline: a listed name, and
// arguments that name nothing outside the working directory.
func readOnlyCommand(name string, args []string) bool {
	ok, listed := readOnlyTools[name]
	if !listed || !ok(args) {
		return false
	}
	for _, a := range args {
		if !localArg(a) {
			return false
		}
	}
	return true
}

// localArg: a flag names no path; anything else is no absolute path, no
// home, no way up.
func localArg(a string) bool {
	if strings.HasPrefix(a, "-") {
		return !strings.Contains(a, "/")
	}
	if strings.HasPrefix(a, "/") || strings.HasPrefix(a, "~") {
		return false
	}
	for _, part := range strings.Split(a, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}
