package server_test

// Issue 19, item 3: tools from real MCP servers (the reference servers
// from npm, internal/mcptest) called by the fake model through the
// gateway's production tool path, behind the sandbox this machine offers.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/kernel"
	"github.com/irisgate/irisgate/internal/mcptest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/sandbox"
)

// mcpStart runs a gateway whose model backend has the built-in tools and
// the MCP servers servers(r) lists, and waits until they are connected.
// With dataInWork the data directory lies inside the working directory,
// as with the defaults.
func mcpStart(t *testing.T, dataInWork bool, servers func(r *agRig) []agent.MCPServer) (*agRig, *agent.MCP) {
	t.Helper()
	r := &agRig{t: t, fake: fakeopenai.New(t), work: t.TempDir(), dir: t.TempDir()}
	if dataInWork {
		r.dir = filepath.Join(r.work, "irisgate-data")
	}
	var m *agent.MCP
	r.opts = []agOpt{agWithModel(func(mc *agent.ModelConfig) {
		var err error
		m, err = agent.NewMCP(mc.Tools, agent.MCPConfig{Servers: servers(r), Dir: r.work, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		mc.Tools.Sets = append(mc.Tools.Sets, m)
		m.Start()
		t.Cleanup(func() { m.Close() })
	})}
	r.start()
	for _, s := range m.Status() {
		mcpWait(t, m, s.Name, func(st agent.MCPStatus) bool { return st.State == agent.MCPConnected })
	}
	return r, m
}

func mcpWait(t *testing.T, m *agent.MCP, name string, cond func(agent.MCPStatus) bool) agent.MCPStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	st, err := m.Wait(ctx, name, cond)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func everything(t *testing.T) func(*agRig) []agent.MCPServer {
	return func(*agRig) []agent.MCPServer {
		return []agent.MCPServer{{Name: "everything", Command: mcptest.Everything(t)}}
	}
}

// TestMCPStdioToolsThroughGateway: server-everything over stdio; the
// model is offered its tools as everything__…, and its calls show as
// built-in tools' do: tool.start/end with the server's name, text for the
// model, the image a media.offer of the reply, the resource's text.
func TestMCPStdioToolsThroughGateway(t *testing.T) {
	r, _ := mcpStart(t, false, everything(t))
	r.sbCall("everything__echo", "message", "through the gateway")
	r.sbCall("everything__get-tiny-image")
	r.sbCall("everything__get-resource-reference", "resourceType", "Text", "resourceId", 3)
	r.reply("all three done")
	a := r.dial("phone")
	got := agTurn(t, a, def, "try the MCP tools")
	starts, ends := agOnly(got, "tool.start"), agOnly(got, "tool.end")
	if len(starts) != 3 || len(ends) != 3 {
		t.Fatalf("frames %s", typesOf(got))
	}
	for i, name := range []string{"everything__echo", "everything__get-tiny-image", "everything__get-resource-reference"} {
		s, e := agTool(t, starts[i]), agTool(t, ends[i])
		if s.Name != name || s.Emoji != "🔌" || !strings.HasPrefix(s.Preview, "everything: ") || e.Name != name || !*e.OK {
			t.Errorf("%s: start %+v end %+v", name, s, e)
		}
	}
	if e := agTool(t, ends[0]); !strings.Contains(e.Output, "through the gateway") {
		t.Errorf("echo's output preview %q", e.Output)
	}
	offer := agOne(t, got, "media.offer")
	var om mediaItem
	offer.Decode(&om)
	if om.Kind != "image" || om.Mime != "image/png" || om.Size == 0 {
		t.Errorf("the image's offer %s", offer.Raw)
	}
	if ms := mediaOf(t, agOne(t, got, "message.stop")); len(ms) != 1 || ms[0].MediaID != om.MediaID {
		t.Errorf("the reply lists %+v, want the image %s", ms, om.MediaID)
	}
	reqs := r.requests(4)
	if !agOffers(reqs[0], "everything__echo") || !agOffers(reqs[0], "terminal") {
		t.Fatal("the model was not offered the MCP tools beside the built-in ones")
	}
	if !agSaid(t, reqs[1], "tool", "through the gateway") || !agSaid(t, reqs[2], "tool", "[image image/png") ||
		!agSaid(t, reqs[3], "tool", "[resource demo://resource/") {
		t.Fatalf("the model heard %v / %v / %v", agLast(t, reqs[1]), agLast(t, reqs[2]), agLast(t, reqs[3]))
	}
	send(t, a, def, "/tools")
	list := agSystemReply(t, a, "MCP servers")
	if !strings.Contains(list, "🟢 everything (stdio: ") || !strings.Contains(list, ": connected, ") || !strings.Contains(list, "echo, ") ||
		!strings.Contains(list, "Built in: terminal, read_file") {
		t.Fatalf("/tools says %q", list)
	}
}

// TestMCPServerKilledMidCall: a long call reports its progress as
// tool.progress; the server killed meanwhile fails the call with a clear
// error (the model hears it too), is started again, and the next call
// works. /tools tells what happened.
func TestMCPServerKilledMidCall(t *testing.T) {
	r, m := mcpStart(t, false, everything(t))
	before := m.Status()[0]
	r.sbCall("everything__trigger-long-running-operation", "duration", 60, "steps", 60)
	r.reply("it broke")
	a := r.dial("phone")
	send(t, a, def, "run the long one")
	prog := agTool(t, a.Expect("tool.progress", nil))
	if prog.Name != "everything__trigger-long-running-operation" || !strings.HasSuffix(prog.Note, "/60") {
		t.Fatalf("progress %+v", prog)
	}
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := until(t, a, is(t, "agent.idle"))
	end := endOf(t, got)
	if *end.OK || !strings.Contains(end.Output, "stopped during the call") || !strings.Contains(end.Output, "killed") {
		t.Fatalf("tool.end %+v", end)
	}
	if !agSaid(t, r.requests(2)[1], "tool", "the MCP server everything stopped during the call (signal: killed)") {
		t.Fatal("the model did not hear why the call failed")
	}
	after := mcpWait(t, m, "everything", func(s agent.MCPStatus) bool { return s.State == agent.MCPConnected && s.PID != before.PID })
	if after.Restarts < 1 || !strings.Contains(after.LastError, "killed") {
		t.Fatalf("status after the restart %+v", after)
	}
	r.sbCall("everything__echo", "message", "back again")
	r.reply("ok")
	got = agTurn(t, a, def, "again")
	if e := endOf(t, got); !*e.OK || !strings.Contains(e.Output, "back again") {
		t.Fatalf("after the restart: %+v", e)
	}
	send(t, a, def, "/tools")
	if list := agSystemReply(t, a, "MCP servers"); !strings.Contains(list, "restarts: 1") || !strings.Contains(list, "last error") || !strings.Contains(list, "killed") {
		t.Fatalf("/tools says %q", list)
	}
}

// TestMCPHTTPNeedsNetworkApproval: server-everything over streamable HTTP.
// Its calls reach the network, so they ask: a denial reaches neither the
// server nor the model as a result; "once" runs it. A server the owner let
// onto the network runs unasked.
func TestMCPHTTPNeedsNetworkApproval(t *testing.T) {
	srv := mcptest.EverythingHTTP(t)
	r, m := mcpStart(t, false, func(*agRig) []agent.MCPServer {
		return []agent.MCPServer{{Name: "remote", URL: srv.URL}, {Name: "trusted", URL: srv.URL, Network: true}}
	})
	if st := m.Status(); st[0].Transport != "http" || len(st[0].Tools) == 0 {
		t.Fatalf("status %+v", st)
	}
	r.sbCall("remote__echo", "message", "over http")
	r.reply("denied, fine")
	a := r.dial("phone")
	send(t, a, def, "echo over http")
	p := sbApproval(t, a)
	if p.Command != `remote__echo {"message":"over http"}` || !strings.Contains(p.Title, "network") || !strings.Contains(p.Description, srv.URL) {
		t.Fatalf("the approval shows %+v", p)
	}
	selectChoice(t, a, p.PickerID, "deny")
	got := until(t, a, is(t, "agent.idle"))
	if e := endOf(t, got); *e.OK || !strings.Contains(e.Output, "denied") {
		t.Fatalf("denied call: %+v", e)
	}
	if agSaid(t, r.requests(2)[1], "tool", "over http") {
		t.Fatal("the denied call ran")
	}

	r.sbCall("remote__echo", "message", "over http")
	r.reply("allowed")
	send(t, a, def, "again")
	p = sbApproval(t, a)
	selectChoice(t, a, p.PickerID, "once")
	if e := endOf(t, until(t, a, is(t, "agent.idle"))); !*e.OK || !strings.Contains(e.Output, "over http") {
		t.Fatalf("allowed call: %+v", e)
	}

	r.sbCall("trusted__echo", "message", "let out by the owner")
	r.reply("unasked")
	got = agTurn(t, a, def, "the trusted one")
	if n := len(agOnly(got, "picker.approval")); n != 0 || !*endOf(t, got).OK {
		t.Fatalf("%d approvals for a server the owner let out: %s", n, typesOf(got))
	}
}

// TestMCPStdioServerIsSandboxed: a stdio server is untrusted code and runs
// behind the terminal's walls: its environment holds none of the
// gateway's secrets, it cannot read the data directory inside the working
// directory, and it cannot write outside the working directory even where
// it would (server-filesystem allowed there). Its destructive tool asks
// first, as a courtesy.
func TestMCPStdioServerIsSandboxed(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", sbKey)
	t.Setenv("IRISGATE_TOKEN", sbToken)
	outside := t.TempDir()
	r, m := mcpStart(t, true, func(r *agRig) []agent.MCPServer {
		return []agent.MCPServer{
			{Name: "everything", Command: mcptest.Everything(t)},
			{Name: "fs", Command: mcptest.Filesystem(t, r.work, outside)},
		}
	})
	kernel.Require(t, m.Status()[1].Wall, sandbox.Namespaces)
	entries, err := os.ReadDir(r.dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the data directory: %v %v", entries, err)
	}
	var dbFile string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".db") {
			dbFile = filepath.Join(r.dir, e.Name())
		}
	}
	if dbFile == "" {
		t.Fatalf("no database among %v", entries)
	}
	r.sbCall("everything__get-env")
	r.sbCall("fs__read_text_file", "path", dbFile)
	r.sbCall("fs__list_directory", "path", r.dir)
	r.sbCall("fs__write_file", "path", filepath.Join(outside, "planted.txt"), "content", "from the MCP server")
	r.reply("done")
	a := r.dial("phone")
	send(t, a, def, "look around")
	got := until(t, a, is(t, "picker.approval"))
	var p approval
	if err := got[len(got)-1].Decode(&p); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Command, "fs__write_file ") || !strings.Contains(p.Description, "may destroy data") {
		t.Fatalf("the destructive tool asks with %+v", p)
	}
	selectChoice(t, a, p.PickerID, "once")
	got = append(got, until(t, a, is(t, "agent.idle"))...)
	ends := agOnly(got, "tool.end")
	if len(ends) != 4 {
		t.Fatalf("frames %s", typesOf(got))
	}
	reqs := r.requests(5)
	env := agToolResult(t, reqs[1], agLast(t, reqs[1])["tool_call_id"].(string))
	if strings.Contains(env, sbKey) || strings.Contains(env, sbToken) || strings.Contains(env, "IRISGATE_TOKEN") || !strings.Contains(env, `"PATH"`) {
		t.Fatalf("the server's environment: %s", env)
	}
	if e := agTool(t, ends[1]); *e.OK || !strings.Contains(e.Output, "ENOENT") {
		t.Fatalf("the server read the database %s: %+v", dbFile, e)
	}
	if e := agTool(t, ends[2]); strings.Contains(e.Output, filepath.Base(dbFile)) {
		t.Fatalf("the server lists the data directory: %+v", e)
	}
	if e := agTool(t, ends[3]); *e.OK || !strings.Contains(e.Output, "EACCES") {
		t.Fatalf("the server wrote outside the working directory: %+v", e)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); !os.IsNotExist(err) {
		t.Fatalf("planted.txt outside the working directory: %v", err)
	}
}
