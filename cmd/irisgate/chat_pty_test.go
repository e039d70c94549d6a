//go:build linux

package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
)

const ptyCols, ptyRows = 100, 30

// ptyChat is `irisgate chat` running on a pseudo-terminal, as a person
// runs it: a process of its own whose terminal this test types into and
// reads, through a screen that draws what it writes.
type ptyChat struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	vt     *vt
	read   chan struct{} // closed when the terminal has no writer left
	exited chan error
}

func startPTYChat(t *testing.T, g *testgw.GW, state string, env []string, args ...string) *ptyChat {
	t.Helper()
	master, slave := openPTY(t, ptyCols, ptyRows)
	ctx, cancel := context.WithCancel(context.Background())
	args = append([]string{"chat", "--url", g.URL, "--token", testgw.Token, "--device", "pty-chat"}, args...)
	env = append([]string{"TERM=xterm", "HOME=" + state, "XDG_STATE_HOME=" + filepath.Join(state, "state")}, env...)
	cmd := irisgateCmd(t, ctx, t.TempDir(), env, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = ctty()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child has it: reads of master end when the child does
	c := &ptyChat{t: t, cmd: cmd, master: master, vt: newVT(ptyCols, ptyRows), read: make(chan struct{}), exited: make(chan error, 1)}
	go func() {
		defer close(c.read)
		io.Copy(c.vt, master) // ends with EIO once the child has gone
	}()
	go func() { c.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.exited:
		case <-time.After(testgw.Wait):
			t.Errorf("the chat did not exit")
		}
		master.Close()
		<-c.read
		if _, bad := c.vt.stats(); len(bad) > 0 {
			t.Errorf("the chat wrote sequences the test's terminal does not know: %q", bad)
		}
	})
	return c
}

// typ types keys.
func (c *ptyChat) typ(keys string) {
	c.t.Helper()
	if _, err := c.master.WriteString(keys); err != nil {
		c.t.Fatalf("typing %q: %v", keys, err)
	}
}

// until waits for the screen to satisfy ok and returns it.
func (c *ptyChat) until(what string, ok func(rows []string, cursor int) bool) ([]string, int) {
	c.t.Helper()
	deadline := time.After(testgw.Wait)
	for {
		rows, cur := c.vt.screen()
		if ok(rows, cur) {
			return rows, cur
		}
		select {
		case <-c.vt.changed:
		case <-c.read:
			rows, cur = c.vt.screen()
			if ok(rows, cur) {
				return rows, cur
			}
			c.t.Fatalf("the chat ended before %s; its screen:\n%s", what, strings.Join(rows, "\n"))
		case <-deadline:
			c.t.Fatalf("no %s within %v; the screen:\n%s", what, testgw.Wait, strings.Join(rows, "\n"))
		}
	}
}

// waitText waits for a row containing s.
func (c *ptyChat) waitText(s string) []string {
	c.t.Helper()
	rows, _ := c.until("row with "+strconvQuote(s), func(rows []string, _ int) bool {
		for _, r := range rows {
			if strings.Contains(r, s) {
				return true
			}
		}
		return false
	})
	return rows
}

// waitPrompt waits for the cursor's row to read exactly line.
func (c *ptyChat) waitPrompt(line string) []string {
	c.t.Helper()
	rows, _ := c.until("the prompt "+strconvQuote(line), func(rows []string, cur int) bool { return rows[cur] == line })
	return rows
}

// quit presses Ctrl-D on an empty line and waits for a clean exit.
func (c *ptyChat) quit() {
	c.t.Helper()
	c.typ("\x04")
	select {
	case err := <-c.exited:
		c.exited <- err // for Cleanup
		if err != nil {
			rows, _ := c.vt.screen()
			c.t.Fatalf("the chat exited with %v:\n%s", err, strings.Join(rows, "\n"))
		}
	case <-time.After(testgw.Wait):
		c.t.Fatal("Ctrl-D did not end the chat")
	}
	<-c.read
}

func strconvQuote(s string) string { return `"` + s + `"` }

const (
	keyLeft  = "\x1b[D"
	keyRight = "\x1b[C"
	keyUp    = "\x1b[A"
	keyHome  = "\x1b[H"
	keyBS    = "\x7f"
)

// TestChatTerminalEditsTheLineAndKeepsHistory: arrow keys move in the
// line being typed, ↑ recalls a line, the history outlives the process,
// and colours are on (no NO_COLOR).
func TestChatTerminalEditsTheLineAndKeepsHistory(t *testing.T) {
	g := testgw.Start(t, echoDelay(2*time.Millisecond))
	phone := g.Dial(t, "phone")
	state := t.TempDir()
	c := startPTYChat(t, g, state, nil)
	c.waitText(ready)
	c.waitPrompt("you ›")

	// "hllo wrld" → "hello world": Left ×3 puts the cursor before "r",
	// Home and Right after "h".
	c.typ("hllo wrld")
	c.waitPrompt("you › hllo wrld")
	c.typ(keyLeft + keyLeft + keyLeft + "o" + keyHome + keyRight + "e")
	c.waitPrompt("you › hello world")
	c.typ("\r")
	phone.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "hello world" })
	c.waitText("agent › hello world")

	// ↑ brings it back; edit it and send again.
	c.typ(keyUp)
	c.waitPrompt("you › hello world")
	c.typ(strings.Repeat(keyBS, 5) + "there\r")
	phone.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "hello there" })
	c.waitText("agent › hello there")

	// :new goes to the channel it made: the next line is sent there.
	c.typ(":new Work\r")
	rows := c.waitText("you are in it now")
	id := regexp.MustCompile(`created channel "Work" \((chan_[^)]+)\)`).FindStringSubmatch(strings.Join(rows, "\n"))
	if id == nil {
		t.Fatalf("no channel id on the screen:\n%s", strings.Join(rows, "\n"))
	}
	c.typ("at work\r")
	m := phone.Expect("message", func(f client.Frame) bool { return testgw.Str(t, f, "text") == "at work" })
	if m.ChatID != id[1] {
		t.Errorf("the line after :new went to %s, want %s", m.ChatID, id[1])
	}
	c.waitText("agent › at work")
	c.quit()
	if sgr, _ := c.vt.stats(); sgr == 0 {
		t.Error("no colour on a terminal without NO_COLOR")
	}

	file := filepath.Join(state, "state", "irisgate", "chat_history")
	st, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no history file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the history file is %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(file)
	if want := "hello world\nhello there\n:new Work\nat work\n"; string(data) != want {
		t.Errorf("the history file holds %q, want %q", data, want)
	}

	// A new run recalls the last run's lines, newest first.
	c = startPTYChat(t, g, state, nil)
	c.waitText(ready)
	c.waitPrompt("you ›")
	c.typ(keyUp)
	c.waitPrompt("you › at work")
	c.typ(keyUp + keyUp)
	c.waitPrompt("you › hello there")
	c.typ("\x15") // Ctrl-U: the line is empty again
	c.waitPrompt("you ›")
	c.quit()
}

// TestChatTerminalTypingStaysOutOfTheReply: what the person types while a
// reply streams stays on the prompt, and the reply stays whole above it,
// wrapped over rows; a line sent mid-reply sits on a row of its own and
// the reply goes on below it. With NO_COLOR set nothing is painted.
func TestChatTerminalTypingStaysOutOfTheReply(t *testing.T) {
	g := testgw.Start(t, echoDelay(15*time.Millisecond))
	phone := g.Dial(t, "phone")
	c := startPTYChat(t, g, t.TempDir(), []string{"NO_COLOR=1"}, "--no-history")
	c.waitText(ready)
	c.waitPrompt("you ›")

	words := make([]string, 45)
	for i := range words {
		words[i] = "word" + string(rune('a'+i%26)) + strings.Repeat("x", i%4)
	}
	text := strings.Join(words, " ") // about 300 characters: three rows
	c.typ(text + "\r")
	c.waitText("agent › " + words[0] + " " + words[1])
	c.typ("draft in progress")
	phone.Expect("message.stop", func(f client.Frame) bool { return testgw.Str(t, f, "final_text") == text })
	rows := c.waitText("  ─ ")
	rows, cur := c.until("the draft on the prompt", func(rows []string, cur int) bool { return rows[cur] == "you › draft in progress" })
	for i, r := range rows {
		if i != cur && strings.Contains(r, "draft") {
			t.Errorf("row %d has the draft in it: %q\n%s", i, r, strings.Join(rows, "\n"))
		}
	}
	if got := replyOnScreen(c.vt.raw(), "agent › "+words[0]+" "); got != "agent › "+text {
		t.Errorf("the reply on screen reads\n%q\nwant\n%q\nscreen:\n%s", got, "agent › "+text, strings.Join(rows, "\n"))
	}

	// Enter in the middle of a reply.
	c.typ(strings.Repeat(keyBS, len("draft in progress")))
	c.waitPrompt("you ›")
	second := strings.ReplaceAll(text, "word", "item")
	c.typ(second + "\r")
	c.waitText("agent › item")
	c.typ("mid\r")
	phone.Expect("message.stop", func(f client.Frame) bool { return testgw.Str(t, f, "final_text") == second })
	rows = c.waitText("agent › mid")
	mid := -1
	for i, r := range rows {
		if r == "you › mid" {
			if mid >= 0 {
				t.Errorf("the sent line is on the screen twice:\n%s", strings.Join(rows, "\n"))
			}
			mid = i
		}
	}
	if mid < 0 {
		t.Fatalf("the line sent mid-reply is not on a row of its own:\n%s", strings.Join(rows, "\n"))
	}
	// The reply: its start above the sent line, the rest below it, after
	// "agent › … ".
	raw := c.vt.raw()
	before := replyOnScreen(raw[:mid], "agent › item")
	after := replyOnScreen(raw[mid+1:], "agent › … ")
	// (The break falls after a space, which the row does not show.)
	joined := strings.TrimPrefix(before, "agent › ") + " " + strings.TrimPrefix(after, "agent › … ")
	if !strings.HasPrefix(before, "agent › item") || !strings.HasPrefix(after, "agent › … ") ||
		strings.Join(strings.Fields(joined), " ") != second {
		t.Errorf("the reply around the sent line reads %q and %q; screen:\n%s", before, after, strings.Join(rows, "\n"))
	}
	c.waitText("agent › mid")
	c.quit()
	if sgr, _ := c.vt.stats(); sgr != 0 {
		t.Errorf("%d colour sequences with NO_COLOR set", sgr)
	}
}

// replyOnScreen is the reply that starts on the last row beginning with
// start: that row and the rows it wrapped onto, up to a row that starts
// something else (a label, a note, the footer, the prompt). raw are the
// rows at full width: a wrap can fall on a space.
func replyOnScreen(raw []string, start string) string {
	from := -1
	for i, r := range raw {
		if strings.HasPrefix(r, start) {
			from = i
		}
	}
	if from < 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(raw[from])
	for _, r := range raw[from+1:] {
		if t := strings.TrimRight(r, " "); t == "" || strings.HasPrefix(t, "  ") || strings.Contains(t, " › ") {
			break
		}
		b.WriteString(r)
	}
	return strings.TrimRight(b.String(), " ")
}
