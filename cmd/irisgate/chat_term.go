package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/term"
	"golang.org/x/text/width"
)

// runTerminalChat is the chat on a terminal: raw mode, an editable prompt
// (golang.org/x/term's line editor: arrows, Home/End, Ctrl-A/E/K/U/W,
// history on ↑/↓) whose history is kept in histPath ("" keeps none), and
// the conversation printed above the prompt as it streams.
func runTerminalChat(ctx context.Context, o chatOptions, in, out *os.File, histPath string) error {
	fd := int(in.Fd())
	saved, err := term.MakeRaw(fd)
	if err != nil {
		// Not one we can take over: read lines as the terminal echoes them.
		o.Interactive = true
		return runChat(ctx, o, in, out)
	}
	defer term.Restore(fd, saved)

	keys := &keyReader{r: in}
	echo := &echoWriter{w: out, keys: keys}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{keys, echo}, promptText(o.Color))
	w, h, err := term.GetSize(int(out.Fd()))
	if err != nil || w <= 0 {
		w, h = 80, 24
	}
	t.SetSize(w, h)
	live := &liveWriter{t: t, width: w}

	if histPath != "" {
		hist, err := openHistory(histPath, historyKeep)
		if err != nil {
			fmt.Fprintf(live, "! no history across runs: %v\n", err)
		} else {
			defer hist.Close()
			t.History = hist
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for {
			select {
			case <-winch:
				if w, h, err := term.GetSize(int(out.Fd())); err == nil && w > 0 {
					t.SetSize(w, h)
					live.setWidth(w)
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	err = chatLoopWith(ctx, o, t, live, func(s *chatSession) { keys.setSession(s) })
	out.WriteString("\r\x1b[K") // the prompt's row, left empty
	return err
}

// promptText is the prompt: the label the line gets once sent.
func promptText(color bool) string {
	return paint(color, styleYou, "you › ")
}

// keyReader is the terminal's input. When a read brings Enter, the line
// editor is about to echo it, ending the row it is on: the chat's output
// is held (the session's lock taken) from before until after that echo
// (echoWriter lets go), so no piece of a reply lands between and the
// unfinished line of a reply is never taken for the one above the prompt.
type keyReader struct {
	r       io.Reader
	mu      sync.Mutex
	s       *chatSession
	holding bool
	rest    []byte // read past an Enter, for the next Read
}

func (k *keyReader) setSession(s *chatSession) {
	k.mu.Lock()
	k.s = s
	k.mu.Unlock()
}

func (k *keyReader) Read(p []byte) (int, error) {
	k.release() // had the editor not echoed, the next key lets go
	var n int
	var err error
	if len(k.rest) > 0 {
		n = copy(p, k.rest)
		k.rest = k.rest[n:]
	} else if n, err = k.r.Read(p); n <= 0 {
		return n, err
	}
	// One Enter per read, at its end: the editor handles it, and echoes,
	// before it reads again.
	if i := bytes.IndexAny(p[:n], "\r\n"); i >= 0 {
		end := i + 1
		if p[i] == '\r' && end < n && p[end] == '\n' {
			end++
		}
		k.rest = append(append([]byte(nil), p[end:n]...), k.rest...)
		n = end
		k.mu.Lock()
		s := k.s
		k.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			s.typedLocked()
			k.holding = true
		}
	}
	return n, err
}

// release lets the chat's output go on after an Enter's echo.
func (k *keyReader) release() {
	if k.holding {
		k.holding = false
		k.s.mu.Unlock()
	}
}

// echoWriter is the line editor's output: after each write of it, the
// editor has echoed what it read. The chat's own writes pass here too
// (through the editor, which redraws the prompt); they never find the
// reader holding, since they are made under the session's lock.
type echoWriter struct {
	w    io.Writer
	keys *keyReader
}

func (e *echoWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	e.keys.release()
	return n, err
}

// liveWriter is the chat's output on a terminal whose bottom row is the
// prompt. A reply streams in pieces that end mid-line, but the line
// editor redraws the prompt below whatever is written: so the unfinished
// line is written with a line break, and taken back and written again,
// longer, with the next piece.
type liveWriter struct {
	mu      sync.Mutex
	t       *term.Terminal
	width   int
	partial string // the unfinished line on screen, right above the prompt
}

func (w *liveWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	text := string(p)
	var b strings.Builder
	if w.partial != "" {
		// The editor has cleared the prompt and sits at its start, the row
		// under the unfinished line: up over that line, and again.
		fmt.Fprintf(&b, "\x1b[%dA\r\x1b[J%s", w.rows(w.partial), w.partial)
	}
	b.WriteString(text)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		w.partial = text[i+1:]
	} else {
		w.partial += text
	}
	if w.partial != "" {
		b.WriteByte('\n')
	}
	if _, err := w.t.Write([]byte(b.String())); err != nil {
		return 0, err
	}
	return len(p), nil
}

// entered forgets the unfinished line: the person's line was echoed
// below it, so it is no longer the row above the prompt.
func (w *liveWriter) entered() {
	w.mu.Lock()
	w.partial = ""
	w.mu.Unlock()
}

func (w *liveWriter) setWidth(n int) {
	w.mu.Lock()
	w.width = n
	w.mu.Unlock()
}

// rows is how many terminal rows a line takes.
func (w *liveWriter) rows(line string) int {
	n := (visibleWidth(line) + w.width - 1) / w.width
	return max(n, 1)
}

// visibleWidth is the columns text takes on a terminal: escape sequences
// take none, East Asian wide characters and most emoji two.
func visibleWidth(s string) int {
	n := 0
	esc := false
	for _, r := range s {
		switch {
		case esc:
			if r >= '@' && r <= '~' && r != '[' {
				esc = false
			}
		case r == '\x1b':
			esc = true
		case r < ' ':
		default:
			switch width.LookupRune(r).Kind() {
			case width.EastAsianWide, width.EastAsianFullwidth:
				n += 2
			default:
				n++
			}
		}
	}
	return n
}
