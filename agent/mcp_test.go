package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/irisgate/irisgate/internal/kernel"
	"github.com/irisgate/irisgate/internal/mcptest"
	"github.com/irisgate/irisgate/sandbox"
)

// mcpRig is the tools with one MCP set, behind the strongest wall here.
type mcpRig struct {
	t    *testing.T
	ts   *Tools
	mcp  *MCP
	work string
	mu   sync.Mutex
	evs  []Event
	env  *ToolEnv
}

func newMCPRig(t *testing.T, servers ...MCPServer) *mcpRig {
	t.Helper()
	return newMCPRigBackoff(t, 20*time.Millisecond, servers...)
}

func newMCPRigBackoff(t *testing.T, backoff time.Duration, servers ...MCPServer) *mcpRig {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	sb, err := sandbox.New(sandbox.Config{Temp: t.TempDir(), Want: sandbox.Namespaces})
	if err != nil {
		t.Fatal(err)
	}
	r := &mcpRig{t: t, ts: &Tools{Sandbox: sb}, work: t.TempDir()}
	r.ts.List = Builtin(r.ts)
	r.mcp, err = NewMCP(r.ts, MCPConfig{Servers: servers, Dir: r.work, MinBackoff: backoff, MaxBackoff: 10 * backoff})
	if err != nil {
		t.Fatal(err)
	}
	r.ts.Sets = append(r.ts.Sets, r.mcp)
	r.mcp.Start()
	t.Cleanup(func() {
		r.mcp.Close()
		goleak.VerifyNone(t, opt)
	})
	r.env = &ToolEnv{Cwd: r.work, emit: func(e Event) {
		if e.Kind == File {
			// The file is gone once emit returns, as the gateway stores it
			// at once: keep its bytes.
			b, err := os.ReadFile(e.Path)
			if err != nil {
				t.Errorf("offered file %s: %v", e.Path, err)
			}
			e.Text = string(b)
		}
		r.mu.Lock()
		r.evs = append(r.evs, e)
		r.mu.Unlock()
	}}
	return r
}

func (r *mcpRig) connected(name string) MCPStatus {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := r.mcp.Wait(ctx, name, func(s MCPStatus) bool { return s.State == MCPConnected })
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

func (r *mcpRig) call(name string, args any) string {
	r.t.Helper()
	b, _ := json.Marshal(args)
	return r.ts.run(context.Background(), r.env, 1, ToolCall{ID: "c1", Name: name, Arguments: string(b)})
}

func (r *mcpRig) events(kind EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestMCPEverythingStdio: server-everything over stdio, in the sandbox:
// its tools are offered as everything__name, with their schemas; text,
// images and resources come back as the model and the person see them;
// progress notifications become tool.progress.
func TestMCPEverythingStdio(t *testing.T) {
	r := newMCPRig(t, MCPServer{Name: "everything", Command: mcptest.Everything(t)})
	st := r.connected("everything")
	if st.Transport != "stdio" || st.PID == 0 || st.Wall == sandbox.None && r.ts.Sandbox.Wall() != sandbox.None || !strings.Contains(st.Server, "everything") {
		t.Fatalf("status %+v", st)
	}
	names := map[string]*Tool{}
	for _, p := range r.ts.all() {
		names[p.Name] = p
	}
	echo := names["everything__echo"]
	if echo == nil || names["terminal"] == nil || names["everything__get-tiny-image"] == nil {
		t.Fatalf("tools offered: %v", st.Tools)
	}
	if !strings.Contains(echo.Description, "MCP server everything") || echo.Params["type"] != "object" || echo.Params["properties"].(map[string]any)["message"] == nil {
		t.Fatalf("echo as offered: %q %v", echo.Description, echo.Params)
	}
	if out := r.call("everything__echo", map[string]any{"message": "hello from the test"}); !strings.Contains(out, "hello from the test") {
		t.Fatalf("echo: %q", out)
	}
	ends := r.events(ToolEnd)
	if len(ends) != 1 || !ends[0].Tool.OK || ends[0].Tool.Name != "everything__echo" {
		t.Fatalf("tool.end %+v", ends)
	}
	if s := r.events(ToolStart)[0].Tool; s.Emoji != "🔌" || !strings.HasPrefix(s.Preview, "everything: echo ") {
		t.Fatalf("tool.start %+v", s)
	}

	out := r.call("everything__get-tiny-image", map[string]any{})
	files := r.events(File)
	if len(files) != 1 || !strings.HasSuffix(files[0].Path, ".png") || !strings.HasPrefix(files[0].Text, "\x89PNG") {
		t.Fatalf("image: %d files %+v", len(files), files)
	}
	if !strings.Contains(out, "[image image/png") || !strings.Contains(out, "shown to the person") {
		t.Fatalf("the model reads %q", out)
	}

	out = r.call("everything__get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 2})
	if !strings.Contains(out, "[resource demo://resource/") {
		t.Fatalf("resource: %q", out)
	}

	out = r.call("everything__trigger-long-running-operation", map[string]any{"duration": 1, "steps": 4})
	if !strings.Contains(out, "completed") {
		t.Fatalf("long op: %q", out)
	}
	prog := r.events(ToolProgress)
	if len(prog) == 0 || !strings.Contains(prog[len(prog)-1].Tool.Note, "/4") {
		t.Fatalf("progress %+v", prog)
	}
}

// TestMCPCallWhileDown: a server that stopped keeps its tools offered
// until it is back; a call meanwhile is told it is down and why, and does
// not ask first.
func TestMCPCallWhileDown(t *testing.T) {
	r := newMCPRigBackoff(t, time.Hour, MCPServer{Name: "everything", Command: mcptest.Everything(t)})
	st := r.connected("everything")
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	down, err := r.mcp.Wait(ctx, "everything", func(s MCPStatus) bool { return s.State == MCPRestarting })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(down.LastError, "signal: killed") || down.PID != 0 {
		t.Fatalf("status %+v", down)
	}
	_, a := webEnv("once")
	r.env.Asker = a
	out := r.call("everything__echo", map[string]any{"message": "x"})
	if !strings.Contains(out, "the MCP server everything is not connected (stopped: the process ended (signal: killed)") ||
		!strings.Contains(out, "it is being started again: try later") || len(a.asked) != 0 {
		t.Fatalf("a call while down: %q (asked %d)", out, len(a.asked))
	}
}

func TestMCPToolName(t *testing.T) {
	taken := map[string]bool{}
	for _, c := range []struct{ tool, want string }{
		{"echo", "fs__echo"},
		{"read-file_2", "fs__read-file_2"},
	} {
		if got := mcpToolName("fs", c.tool, taken); got != c.want {
			t.Errorf("%q: %q, want %q", c.tool, got, c.want)
		}
	}
	dotted := mcpToolName("fs", "files.read", taken)
	if !strings.HasPrefix(dotted, "fs__files_read_") || taken["fs__files_read"] {
		t.Errorf("files.read: %q", dotted)
	}
	long := mcpToolName("fs", strings.Repeat("x", 100), taken)
	other := mcpToolName("fs", strings.Repeat("x", 101), taken)
	if len(long) != 64 || len(other) != 64 || long == other {
		t.Errorf("long names %q %q", long, other)
	}
	again := mcpToolName("fs", "files_read", taken) // would clash with nothing
	clash := mcpToolName("fs", "files_read", taken) // a second tool of that name
	if again != "fs__files_read" || clash == again {
		t.Errorf("clash %q %q", again, clash)
	}
	for n := range taken {
		if !openAIName.MatchString(n) {
			t.Errorf("%q is not a name the model APIs take", n)
		}
	}
}

var openAIName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// BenchmarkMCPEcho is the cost of one MCP tool call (server-everything's
// echo over stdio, through Tools.run) with the server's process behind
// each wall; compare within one run:
//
//	go test -run '^$' -bench MCPEcho -benchtime 300x ./agent/
func BenchmarkMCPEcho(b *testing.B) {
	for _, w := range []sandbox.Wall{sandbox.None, sandbox.Landlock, sandbox.Namespaces} {
		b.Run(w.String(), func(b *testing.B) {
			sb, err := sandbox.New(sandbox.Config{Temp: b.TempDir(), Want: w})
			if err != nil {
				b.Fatal(err)
			}
			if sb.Wall() != w {
				b.Skipf("this kernel offers %s, not %s", sb.Wall(), w)
			}
			ts := &Tools{Sandbox: sb}
			m, err := NewMCP(ts, MCPConfig{Servers: []MCPServer{{Name: "e", Command: mcptest.Everything(b)}}, Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			ts.Sets = []ToolSet{m}
			m.Start()
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := m.Wait(ctx, "e", func(s MCPStatus) bool { return s.State == MCPConnected }); err != nil {
				b.Fatal(err)
			}
			env := &ToolEnv{Cwd: b.TempDir(), Yolo: true, emit: func(Event) {}}
			call := ToolCall{ID: "c", Name: "e__echo", Arguments: `{"message":"hi"}`}
			b.ResetTimer()
			for range b.N {
				if out := ts.run(context.Background(), env, 1, call); !strings.Contains(out, "hi") {
					b.Fatalf("echo: %q", out)
				}
			}
		})
	}
}

// TestMCPStdioEveryWall: a stdio server starts and answers behind each
// wall the sandbox builds (none, Landlock with its supervisor, namespaces),
// and when the gateway closes it nothing it started is left: here a sleep
// it put in a session of its own, and the shell that outlives the server's
// end of input (it becomes another sleep), so that the gateway has to
// stop it.
func TestMCPStdioEveryWall(t *testing.T) {
	for i, w := range []sandbox.Wall{sandbox.None, sandbox.Landlock, sandbox.Namespaces} {
		t.Run(w.String(), func(t *testing.T) {
			opt := goleak.IgnoreCurrent()
			sb, err := sandbox.New(sandbox.Config{Temp: t.TempDir(), Want: w})
			if err != nil {
				t.Fatal(err)
			}
			kernel.Require(t, sb.Wall(), w)
			marker := fmt.Sprintf("3600.%d%d", os.Getpid(), i)
			server := append([]string{"bash", "-c", `setsid sleep ` + marker + ` & "$0" "$@"; exec sleep ` + marker}, mcptest.Everything(t)...)
			ts := &Tools{Sandbox: sb}
			m, err := NewMCP(ts, MCPConfig{Servers: []MCPServer{{Name: "e", Command: server}}, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ts.Sets = []ToolSet{m}
			m.Start()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st, err := m.Wait(ctx, "e", func(s MCPStatus) bool { return s.State == MCPConnected })
			if err != nil {
				m.Close()
				t.Fatal(err)
			}
			if st.Wall != w {
				t.Errorf("the server runs behind %s, want %s", st.Wall, w)
			}
			env := &ToolEnv{Cwd: t.TempDir(), Yolo: true, emit: func(Event) {}}
			if out := ts.run(context.Background(), env, 1, ToolCall{ID: "c", Name: "e__echo", Arguments: `{"message":"behind ` + w.String() + `"}`}); !strings.Contains(out, "behind "+w.String()) {
				t.Errorf("echo: %q", out)
			}
			if len(sleeping(marker)) != 1 {
				t.Errorf("the server's background sleep is not running")
			}
			m.Close()
			if left := sleeping(marker); len(left) != 0 {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Fatalf("the server's background sleep outlived it: pids %v", left)
			}
			goleak.VerifyNone(t, opt)
		})
	}
}

// sleeping lists the processes running "sleep marker".
func sleeping(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == "sleep\x00"+marker+"\x00" {
			pids = append(pids, pid)
		}
	}
	return pids
}
