package slash

import (
	"regexp"
	"strings"
)

var slashRe = regexp.MustCompile(`^/([A-Za-z][\w-]*)(?:\s+([\s\S]*))?$`)

// Parse splits "/cmd args" (the name lower-cased, with its slash); ok is
// false for text that is not a command at all (like "/usr/bin is…"),
// which goes to the model as a message.
func Parse(text string) (name, args string, ok bool) {
	m := slashRe.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return "", "", false
	}
	return "/" + strings.ToLower(m[1]), strings.TrimSpace(m[2]), true
}

// Is reports whether text is a slash command.
func Is(text string) bool {
	_, _, ok := Parse(text)
	return ok
}

// Complete returns the commands matching a typed prefix: first those whose
// name or alias starts with it, then fuzzy (the letters in order).
func Complete(prefix string) []Command {
	p := strings.ToLower(strings.TrimSpace(prefix))
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	var exact, fuzzy []Command
	for _, c := range commands {
		names := append([]string{c.Name}, c.Aliases...)
		switch {
		case anyPrefix(names, p):
			exact = append(exact, c)
		case anySubsequence(names, p[1:]):
			fuzzy = append(fuzzy, c)
		}
	}
	return append(exact, fuzzy...)
}

// suggest names the command a mistyped one most likely meant: one it
// completes to, or else one within two typos (a transposition is one).
func suggest(name string) string {
	if m := Complete(name); len(m) > 0 {
		return m[0].Name
	}
	best, bestD := "", 3
	for _, c := range commands {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if d := typos(name, n); d < bestD {
				best, bestD = c.Name, d
			}
		}
	}
	return best
}

// typos is the optimal string alignment distance between a and b.
func typos(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

func anyPrefix(names []string, p string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func anySubsequence(names []string, p string) bool {
	if p == "" {
		return false
	}
	for _, n := range names {
		i := 0
		for _, r := range n[1:] {
			if i < len(p) && byte(r) == p[i] {
				i++
			}
		}
		if i == len(p) {
			return true
		}
	}
	return false
}
