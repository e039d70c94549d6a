package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// historyKeep is how many typed lines the chat remembers across runs.
const historyKeep = 1000

// historyMaxLine is the longest line kept: a pasted document is not
// worth recalling with ↑, and it would bloat the file.
const historyMaxLine = 4096

// defaultHistoryFile is irisgate/chat_history in the user's state
// directory: $XDG_STATE_HOME, else ~/.local/state on Unix; the user's
// config directory elsewhere (macOS's Application Support, Windows'
// AppData). "" when there is no home to put it in.
func defaultHistoryFile() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "irisgate", "chat_history")
	}
	if runtime.GOOS != "darwin" && runtime.GOOS != "windows" {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, ".local", "state", "irisgate", "chat_history")
		}
	}
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "irisgate", "chat_history")
	}
	return ""
}

// fileHistory is the line editor's history (golang.org/x/term's History),
// kept in a file: each line typed is appended as it is entered, so two
// chats at once both keep theirs, and a crash loses none. Like a shell,
// it skips blank lines, a repeat of the line before, and lines typed with
// a leading space (to keep one out of the file). The file is private
// (0600): people paste secrets.
type fileHistory struct {
	mu    sync.Mutex
	lines []string // oldest first
	keep  int
	path  string
	f     *os.File
	added int // lines appended since the file was last compacted
}

func openHistory(path string, keep int) (*fileHistory, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	h := &fileHistory{keep: keep, path: path}
	data, err := readTail(path, int64(keep)*(historyMaxLine+1))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			h.lines = append(h.lines, l)
		}
	}
	if len(h.lines) > keep {
		h.lines = h.lines[len(h.lines)-keep:]
		h.added = keep // compact on the first Add
	}
	h.f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	os.Chmod(path, 0o600) // an older file made by hand
	return h, nil
}

// readTail reads at most max bytes from the end of a file, from the start
// of a line.
func readTail(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-limit, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, nil
}

// Add implements term.History.
func (h *fileHistory) Add(line string) {
	if strings.TrimSpace(line) == "" || strings.HasPrefix(line, " ") || len(line) > historyMaxLine ||
		strings.ContainsAny(line, "\r\n") {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.lines); n > 0 && h.lines[n-1] == line {
		return
	}
	h.lines = append(h.lines, line)
	if len(h.lines) > h.keep {
		h.lines = h.lines[len(h.lines)-h.keep:]
	}
	if h.f != nil {
		h.f.WriteString(line + "\n")
		if h.added++; h.added > h.keep {
			h.compact()
		}
	}
}

// compact rewrites the file with only the lines kept, through a new file
// renamed over it, so a chat that dies halfway leaves the old file whole.
// Lines another chat appended meanwhile are lost; that chat keeps them in
// memory and writes its own from then on.
func (h *fileHistory) compact() {
	tmp, err := os.CreateTemp(filepath.Dir(h.path), ".chat_history-*")
	if err != nil {
		return
	}
	w := bufio.NewWriter(tmp)
	for _, l := range h.lines {
		w.WriteString(l + "\n")
	}
	if w.Flush() != nil || tmp.Chmod(0o600) != nil || tmp.Close() != nil || os.Rename(tmp.Name(), h.path) != nil {
		os.Remove(tmp.Name())
		return
	}
	h.f.Close()
	h.f, err = os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.f = nil
	}
	h.added = 0
}

// Len implements term.History.
func (h *fileHistory) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lines)
}

// At implements term.History: 0 is the newest line.
func (h *fileHistory) At(i int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i < 0 || i >= len(h.lines) {
		panic(fmt.Sprintf("history index %d of %d", i, len(h.lines))) // as term's own ring buffer does
	}
	return h.lines[len(h.lines)-1-i]
}

// Close closes the file.
func (h *fileHistory) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}
