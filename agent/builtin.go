package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/sandbox"
)

// Builtin returns the built-in tools: terminal, read_file, write_file,
// todo, clarify, send_file and cronjob.
func Builtin(ts *Tools) []*Tool {
	return []*Tool{terminalTool(ts), readFileTool(ts), writeFileTool(ts), todoTool(), clarifyTool(), sendFileTool(ts), cronjobTool()}
}

func obj(props map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func prop(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }

func terminalTool(ts *Tools) *Tool {
	desc := "Run a shell command (bash) in the working directory and return its output. "
	if ts.Sandbox.Wall() == sandbox.None {
		desc += "There is no sandbox: every command that is not read-only needs the person's approval."
	} else {
		desc += "It runs in a sandbox: it can write only in the working directory and $TMPDIR, and has no network unless you set network to true, which asks the person. Clearly destructive commands need the person's approval."
	}
	return &Tool{
		Name:        "terminal",
		Emoji:       "💻",
		Description: desc,
		Params: obj(map[string]any{
			"command": prop("string", "The command line."),
			"timeout": prop("integer", "Seconds before the command is killed (default and maximum set by the gateway)."),
			"network": prop("boolean", "The command needs the network (downloads, git push, package installs); the person is asked unless they allowed it already."),
		}, "command"),
		Preview: func(a map[string]any) string { return str(a, "command") },
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, progress func(string)) (string, error) {
			cmdline := str(a, "command")
			if strings.TrimSpace(cmdline) == "" {
				return "", errors.New("empty command")
			}
			if strings.ContainsRune(cmdline, 0) {
				return "", errors.New("a command cannot contain a NUL byte")
			}
			wantNet, _ := a["network"].(bool)
			network, err := ts.clearCommand(ctx, env, cmdline, wantNet)
			if err != nil {
				return "", err
			}
			timeout := ts.Timeout
			if timeout == 0 {
				timeout = 2 * time.Minute
			}
			if s, ok := a["timeout"].(float64); ok && s > 0 && time.Duration(s)*time.Second < timeout {
				timeout = time.Duration(s) * time.Second
			}
			limit := ts.OutputCap
			if limit == 0 {
				limit = 32 << 10
			}
			every := ts.ProgressEvery
			if every <= 0 {
				every = 2 * time.Second
			}
			cmd, err := ts.Sandbox.Command(sandbox.Run{Dir: env.Cwd, Script: cmdline, Network: network})
			if err != nil {
				return "", err
			}
			return runCommand(ctx, cmd, timeout, limit, every, progress)
		},
	}
}

// clearCommand asks the person what the approval mode and the sandbox
// call for before a command runs, and says whether it may use the network.
// With a sandbox the default asks only for the network and, as a courtesy,
// for the clearly destructive commands of the policy; without one, or in
// "ask" mode, everything that is not read-only asks. Where the sandbox is
// on but no wall holds for the working directory (the kernel offers none,
// or Landlock cannot hide the data directory lying in it), /yolo asks all
// the same: nothing else would keep the gateway's own data (its keys, its
// tokens' hashes) from a command a document told the model to run. Only
// an owner who turned the sandbox off gets a /yolo without walls.
func (ts *Tools) clearCommand(ctx context.Context, env *ToolEnv, cmdline string, wantNet bool) (network bool, err error) {
	mode := env.mode(ts)
	walled := ts.Sandbox.WallFor(env.Cwd) != sandbox.None
	if mode == AskNever && (walled || ts.Sandbox.Off()) {
		return wantNet, nil
	}
	var why []string
	if !ts.readOnlyHere(env.Cwd, cmdline, walled) {
		switch {
		case !walled && ts.Sandbox.Wall() != sandbox.None:
			why = append(why, "Without namespaces the sandbox cannot keep the gateway's data directory, which lies inside the working directory, out of reach: every command that is not read-only asks.")
		case !walled:
			why = append(why, "There is no sandbox here: every command that is not read-only asks.")
		case mode == AskAll:
			why = append(why, "This chat asks before everything that is not read-only (/approvals).")
		}
		if !walled && mode == AskNever {
			why = append(why, "/yolo does not change that where the sandbox is on and no wall holds (--sandbox off would).")
		}
	}
	if mode != AskNever {
		if d := ts.Policy.Check(cmdline); d != "" {
			why = append(why, d)
		}
	}
	network = walled && env.granted(ctx, GrantNetwork)
	if walled && wantNet && !network {
		why = append([]string{"The sandbox keeps commands offline and this one asks for the network. For this session or always lets every command use it."}, why...)
		return true, env.request(ctx, Request{Title: "Let this command use the network?", Command: cmdline, Why: strings.Join(why, " "), Grant: GrantNetwork})
	}
	if len(why) == 0 {
		return network, nil
	}
	return network, env.request(ctx, Request{Title: "Run this command?", Command: cmdline, Why: strings.Join(why, " ")})
}

// stopGrace is how long a stopped command's supervisor has to kill what
// the command started before it is killed itself.
const stopGrace = 5 * time.Second

// runCommand runs a command under the sandbox's supervisor, which kills
// everything the command started when it ends, on a stop and on a
// timeout, keeping the head and tail of its output within limit bytes.
// While it runs it reports progress every interval.
func runCommand(ctx context.Context, cmd *sandbox.Cmd, timeout time.Duration, limit int, every time.Duration, progress func(string)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &capped{limit: limit}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Stdin = nil
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case err := <-done:
			text := out.String()
			if errors.Is(err, exec.ErrWaitDelay) {
				// Without a wall a command can escape its supervisor.
				return text + "\n[a process the command started kept its output open after it ended: the output was cut there]", nil
			}
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return fmt.Sprintf("%s\n[exit status %d]", text, ee.ExitCode()), nil
				}
				return text, err
			}
			return text, nil
		case <-tick.C:
			progress(fmt.Sprintf("running… %ds", int(time.Since(start).Seconds())))
		case <-ctx.Done():
			cmd.Stop()
			select {
			case <-done:
			case <-time.After(stopGrace):
				cmd.Kill() // and WaitDelay bounds what is left of the wait
				<-done
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return out.String(), fmt.Errorf("killed after %v (timeout)", timeout)
			}
			return out.String(), ctx.Err()
		}
	}
}

// capped keeps the first and last limit/2 bytes written to it.
type capped struct {
	mu      sync.Mutex
	limit   int
	head    bytes.Buffer
	tail    []byte
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if room := c.limit/2 - c.head.Len(); room > 0 {
		k := min(room, len(p))
		c.head.Write(p[:k])
		p = p[k:]
	}
	if len(p) > 0 {
		c.tail = append(c.tail, p...)
		if over := len(c.tail) - c.limit/2; over > 0 {
			c.dropped += over
			c.tail = append(c.tail[:0], c.tail[over:]...)
		}
	}
	return n, nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return c.head.String() + string(c.tail)
	}
	return fmt.Sprintf("%s\n… [%d bytes of output cut] …\n%s", c.head.String(), c.dropped, c.tail)
}

const maxReadFile = 64 << 10

// defaultMaxFile is the largest file send_file offers when Tools.MaxFile
// is not set: the media store's default limit (serve's --max-media).
const defaultMaxFile = 64 << 20

func readFileTool(ts *Tools) *Tool {
	return &Tool{
		Name:        "read_file",
		Emoji:       "📖",
		Description: "Read a text file (relative paths are in the working directory; reading elsewhere asks the person). Long files are returned in parts: pass offset to continue.",
		Params: obj(map[string]any{
			"path":   prop("string", "File path."),
			"offset": prop("integer", "Byte offset to start at (default 0)."),
		}, "path"),
		Preview: func(a map[string]any) string { return str(a, "path") },
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, _ func(string)) (string, error) {
			f, _, err := ts.openToRead(ctx, env, str(a, "path"), "Read this file?")
			if err != nil {
				return "", err
			}
			defer f.Close()
			off, _ := a["offset"].(float64)
			if off > 0 {
				if _, err := f.Seek(int64(off), io.SeekStart); err != nil {
					return "", err
				}
			}
			buf := make([]byte, maxReadFile+1)
			n, err := io.ReadFull(f, buf)
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				return "", err
			}
			if n > maxReadFile {
				return fmt.Sprintf("%s\n[… more: read again with offset %d]", buf[:maxReadFile], int64(off)+maxReadFile), nil
			}
			return string(buf[:n]), nil
		},
	}
}

// openToRead opens a file a tool reads: inside the working directory
// without asking, outside (by its name or through a link) once the person
// allows it; never a hidden path, whatever the answer. What is asked about
// is the file the path resolves to, by its real name (which a "session"
// or "always" answer is kept for), and what is opened must be that file
// still. It returns the file and the path the person would know it by.
func (ts *Tools) openToRead(ctx context.Context, env *ToolEnv, name, title string) (*os.File, string, error) {
	p, err := sandbox.Locate(env.Cwd, name)
	if err != nil {
		return nil, "", err
	}
	if p.Inside() {
		f, err := ts.Sandbox.OpenRead(env.Cwd, p)
		if !errors.Is(err, sandbox.ErrOutside) {
			return f, p.Abs, err
		}
	}
	if err := ts.Sandbox.Refuses(p.Abs); err != nil {
		return nil, p.Abs, err
	}
	q, err := ts.Sandbox.ResolveOutside(p.Abs)
	if err != nil {
		return nil, p.Abs, err
	}
	if err := ts.Sandbox.Refuses(q.Abs); err != nil {
		return nil, p.Abs, err
	}
	why := "This reads a file outside the working directory."
	switch {
	case p.Inside():
		why = fmt.Sprintf("%s is a link to %s, outside the working directory.", p.Rel, q.Abs)
	case q.Abs != p.Abs:
		why = fmt.Sprintf("This reads a file outside the working directory: %s leads to %s.", p.Abs, q.Abs)
	}
	if env.mode(ts) != AskNever {
		if err := env.request(ctx, Request{Title: title, Command: "read " + q.Abs, Why: why}); err != nil {
			return nil, p.Abs, err
		}
	}
	f, err := ts.Sandbox.OpenRead(env.Cwd, q)
	if errors.Is(err, sandbox.ErrChanged) {
		err = fmt.Errorf("refused: %s is not the file that was approved any more (%v)", q.Abs, err)
	}
	return f, p.Abs, err
}

func writeFileTool(ts *Tools) *Tool {
	return &Tool{
		Name:        "write_file",
		Emoji:       "✍️",
		Description: "Write a text file, replacing it. Only inside the working directory (relative paths are there); writing elsewhere is refused.",
		Params: obj(map[string]any{
			"path":    prop("string", "File path."),
			"content": prop("string", "The whole new content."),
		}, "path", "content"),
		Preview: func(a map[string]any) string { return str(a, "path") },
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, _ func(string)) (string, error) {
			p, err := sandbox.Locate(env.Cwd, str(a, "path"))
			if err != nil {
				return "", err
			}
			refused := fmt.Errorf("refused: write_file writes only inside the working directory %s, and %s is outside it", env.Cwd, p.Abs)
			if !p.Inside() {
				return "", refused
			}
			// Where the write lands, links followed: what is asked about,
			// checked and written.
			q, err := ts.Sandbox.ResolveInside(env.Cwd, p)
			if errors.Is(err, sandbox.ErrOutside) {
				return "", fmt.Errorf("refused: %s leads outside the working directory %s (through a link); write_file writes only inside it", p.Rel, env.Cwd)
			}
			if err != nil {
				return "", err
			}
			if gitMeta(q.Rel) {
				return "", fmt.Errorf("refused: %s lies in a .git directory, whose hooks and config git runs outside the sandbox when you commit; write_file does not write there (use git's own commands)", q.Abs)
			}
			mode := env.mode(ts)
			var why string
			switch {
			case mode == AskAll:
				why = "This chat asks before everything that is not read-only (/approvals)."
			case ts.Sandbox.WallFor(env.Cwd) == sandbox.None && mode != AskNever:
				why = "There is no sandbox for commands here, and a file written now can make a later command that runs unasked do something else: every write asks."
			}
			if why != "" {
				if q.Abs != p.Abs {
					why = fmt.Sprintf("%s is a link to %s. %s", p.Rel, q.Abs, why)
				}
				if err := env.request(ctx, Request{Title: "Write this file?", Command: "write " + q.Abs, Why: why}); err != nil {
					return "", err
				}
			}
			content := str(a, "content")
			if err := ts.Sandbox.WriteInside(env.Cwd, q, []byte(content)); err != nil {
				if errors.Is(err, sandbox.ErrOutside) {
					return "", fmt.Errorf("refused: %s leads outside the working directory %s (through a link); write_file writes only inside it", p.Rel, env.Cwd)
				}
				if errors.Is(err, sandbox.ErrChanged) {
					return "", fmt.Errorf("refused: %s changed (a link was put on its way) after it was resolved", q.Abs)
				}
				return "", err
			}
			return fmt.Sprintf("wrote %d bytes to %s", len(content), q.Abs), nil
		},
	}
}

// gitMeta reports whether a path relative to the working directory lies
// in a .git directory, or is a .git file (a worktree's pointer to one).
func gitMeta(rel string) bool {
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.EqualFold(part, ".git") {
			return true
		}
	}
	return false
}

func todoTool() *Tool {
	item := obj(map[string]any{
		"id":      prop("string", "Stable id of the item."),
		"content": prop("string", "What to do."),
		"status":  map[string]any{"type": "string", "enum": []string{"pending", "in_progress", "completed", "cancelled"}},
	}, "id")
	return &Tool{
		Name:        "todo",
		Emoji:       "📋",
		Description: "Keep a todo list the person sees above the chat. Pass the whole list, or with merge=true only the changed items (by id).",
		Params: obj(map[string]any{
			"todos": map[string]any{"type": "array", "items": item},
			"merge": prop("boolean", "Update items by id instead of replacing the list."),
		}, "todos"),
		Preview: func(a map[string]any) string {
			items, _ := a["todos"].([]any)
			return fmt.Sprintf("%d item(s)", len(items))
		},
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, _ func(string)) (string, error) {
			items, _ := a["todos"].([]any)
			merge, _ := a["merge"].(bool)
			next := []core.Todo{}
			if merge {
				next = append(next, env.Todos...)
			}
			for _, it := range items {
				m, _ := it.(map[string]any)
				t := core.Todo{ID: str(m, "id"), Content: str(m, "content"), Status: str(m, "status")}
				if t.ID == "" {
					return "", errors.New("every todo item needs an id")
				}
				switch t.Status {
				case "":
					t.Status = "pending"
				case "pending", "in_progress", "completed", "cancelled":
				default:
					return "", fmt.Errorf("unknown status %q", t.Status)
				}
				found := false
				for i := range next {
					if next[i].ID == t.ID {
						if t.Content == "" {
							t.Content = next[i].Content
						}
						next[i], found = t, true
					}
				}
				if !found {
					next = append(next, t)
				}
			}
			env.Todos = next
			env.emit(Event{Kind: Todos, Todos: next})
			var b strings.Builder
			for _, t := range next {
				fmt.Fprintf(&b, "[%s] %s: %s\n", t.Status, t.ID, t.Content)
			}
			return b.String(), nil
		},
	}
}

func clarifyTool() *Tool {
	return &Tool{
		Name:        "clarify",
		Emoji:       "❓",
		Description: "Ask the person a question when you cannot go on without their answer. Offer up to 4 choices; they may also answer in their own words.",
		Params: obj(map[string]any{
			"question": prop("string", "The question."),
			"choices":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 4},
		}, "question"),
		Preview: func(a map[string]any) string { return str(a, "question") },
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, _ func(string)) (string, error) {
			if env.Asker == nil {
				return "", errors.New("no one can be asked right now")
			}
			var choices []string
			raw, _ := a["choices"].([]any)
			for _, c := range raw {
				if s, ok := c.(string); ok && s != "" && len(choices) < 4 {
					choices = append(choices, s)
				}
			}
			ans, err := env.Asker.Clarify(ctx, str(a, "question"), choices)
			if err != nil {
				return "", err
			}
			return "The person answered: " + ans, nil
		},
	}
}

func sendFileTool(ts *Tools) *Tool {
	return &Tool{
		Name:        "send_file",
		Emoji:       "📎",
		Description: "Send a file to the person's devices (relative paths are in the working directory; files elsewhere ask the person).",
		Params: obj(map[string]any{
			"path":    prop("string", "File path."),
			"caption": prop("string", "Optional caption."),
		}, "path"),
		Preview: func(a map[string]any) string { return str(a, "path") },
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, _ func(string)) (string, error) {
			f, shown, err := ts.openToRead(ctx, env, str(a, "path"), "Send this file?")
			if err != nil {
				return "", err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return "", err
			}
			limit := ts.MaxFile
			if limit <= 0 {
				limit = defaultMaxFile
			}
			// The gateway's limit first: a file it will refuse is not
			// copied, and the model hears it was not sent.
			refused := func(size int64) error {
				return fmt.Errorf("not sent: %s is %s; the gateway sends files of at most %s (--max-media)", shown, byteSize(size), byteSize(limit))
			}
			if st.Size() > limit {
				return "", refused(st.Size())
			}
			// The gateway stores the file by name: hand it a copy of what
			// was checked, not a name a link could move meanwhile.
			copyPath, done, n, err := sandbox.CopyOut(io.LimitReader(f, limit+1), f.Name())
			if err != nil {
				return "", err
			}
			if n > limit { // it grew since
				done()
				return "", refused(n)
			}
			defer done()
			env.emit(Event{Kind: File, Path: copyPath, Text: str(a, "caption")})
			return fmt.Sprintf("offered %s (%d bytes) to the devices", shown, n), nil
		},
	}
}

// byteSize says n bytes for a person.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
