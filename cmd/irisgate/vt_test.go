package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// vt is a terminal screen for tests: it draws what a program writes the
// way an xterm does, for the part of VT100 that the chat and its line
// editor (golang.org/x/term) use: printable text with auto-wrap, CR, LF,
// BS, cursor moves (CSI A/B/C/D/H), erasing (CSI K/J), colours (CSI m,
// counted, not drawn) and private modes (CSI ? … h/l, ignored). Anything
// else is recorded as not understood, and the tests fail on it rather
// than read a screen this emulator got wrong.
type vt struct {
	mu      sync.Mutex
	w, h    int
	rows    [][]rune // scrollback and screen; the screen is the last h rows
	x, y    int      // cursor; y indexes rows
	wrap    bool     // the cursor is past the last column (xterm's pending wrap)
	pending []byte   // an unfinished sequence or character
	sgr     int      // colour and style sequences seen
	bad     []string // sequences not understood
	changed chan struct{}
}

func newVT(w, h int) *vt {
	v := &vt{w: w, h: h, changed: make(chan struct{}, 1)}
	v.rows = [][]rune{v.blank()}
	return v
}

func (v *vt) blank() []rune { return []rune(strings.Repeat(" ", v.w)) }

// top is the screen's first row.
func (v *vt) top() int { return max(0, len(v.rows)-v.h) }

func (v *vt) Write(p []byte) (int, error) {
	v.mu.Lock()
	v.pending = append(v.pending, p...)
	b := v.pending
	for len(b) > 0 {
		n := v.step(b)
		if n == 0 {
			break // unfinished
		}
		b = b[n:]
	}
	v.pending = append(v.pending[:0], b...)
	v.mu.Unlock()
	select {
	case v.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// step draws one character or sequence from b and says how many bytes
// it took (0: b ends before it does).
func (v *vt) step(b []byte) int {
	switch c := b[0]; c {
	case '\r':
		v.x, v.wrap = 0, false
		return 1
	case '\n':
		v.lineFeed()
		return 1
	case '\b':
		v.x, v.wrap = max(0, v.x-1), false
		return 1
	case '\a':
		return 1
	case 0x1b:
		return v.escape(b)
	}
	if b[0] < ' ' || b[0] == 0x7f {
		v.bad = append(v.bad, fmt.Sprintf("control %#x", b[0]))
		return 1
	}
	if !utf8.FullRune(b) {
		return 0
	}
	r, n := utf8.DecodeRune(b)
	v.put(r)
	return n
}

func (v *vt) lineFeed() {
	v.wrap = false
	v.y++
	for v.y >= len(v.rows) {
		v.rows = append(v.rows, v.blank())
	}
}

func (v *vt) put(r rune) {
	if v.wrap {
		v.x = 0
		v.lineFeed()
	}
	v.rows[v.y][v.x] = r
	if v.x == v.w-1 {
		v.wrap = true
	} else {
		v.x++
	}
}

func (v *vt) escape(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	if b[1] != '[' {
		v.bad = append(v.bad, fmt.Sprintf("ESC %q", b[1]))
		return 2
	}
	i := 2
	for i < len(b) && (b[i] < '@' || b[i] > '~') {
		i++
	}
	if i == len(b) {
		return 0
	}
	params, final := string(b[2:i]), b[i]
	v.wrap = false
	if strings.HasPrefix(params, "?") {
		if final != 'h' && final != 'l' {
			v.bad = append(v.bad, "CSI "+params+string(final))
		}
		return i + 1
	}
	n := 1
	if params != "" && final != 'm' && final != 'H' {
		var err error
		if n, err = strconv.Atoi(params); err != nil {
			v.bad = append(v.bad, "CSI "+params+string(final))
			return i + 1
		}
	}
	row := v.rows[v.y]
	switch final {
	case 'A':
		v.y = max(v.top(), v.y-max(n, 1))
	case 'B':
		v.y = min(len(v.rows)-1, v.y+max(n, 1))
	case 'C':
		v.x = min(v.w-1, v.x+max(n, 1))
	case 'D':
		v.x = max(0, v.x-max(n, 1))
	case 'H':
		r, c := 1, 1
		if params != "" {
			fmt.Sscanf(params, "%d;%d", &r, &c)
		}
		v.y, v.x = min(v.top()+r-1, len(v.rows)-1), min(c-1, v.w-1)
	case 'K':
		switch params {
		case "", "0":
			clearRunes(row[v.x:])
		case "1":
			clearRunes(row[:v.x+1])
		case "2":
			clearRunes(row)
		default:
			v.bad = append(v.bad, "CSI "+params+"K")
		}
	case 'J':
		if params != "" && params != "0" {
			v.bad = append(v.bad, "CSI "+params+"J")
			break
		}
		clearRunes(row[v.x:])
		for _, r := range v.rows[v.y+1:] {
			clearRunes(r)
		}
	case 'm':
		v.sgr++
	default:
		v.bad = append(v.bad, "CSI "+params+string(final))
	}
	return i + 1
}

func clearRunes(rs []rune) {
	for i := range rs {
		rs[i] = ' '
	}
}

// screen is every row drawn (scrollback included), trimmed, with the
// cursor's row.
func (v *vt) screen() (rows []string, cursor int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.rows {
		rows = append(rows, strings.TrimRight(string(r), " "))
	}
	return rows, v.y
}

// raw is every row at full width, untrimmed.
func (v *vt) raw() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, len(v.rows))
	for i, r := range v.rows {
		out[i] = string(r)
	}
	return out
}

func (v *vt) stats() (sgr int, bad []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.sgr, append([]string(nil), v.bad...)
}
