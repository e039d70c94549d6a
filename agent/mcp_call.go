package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/irisgate/irisgate/sandbox"
)

// mcpTool is what a wrapped tool keeps of the server's description.
type mcpTool struct {
	name        string // the model's name for it (server__tool)
	orig        string // the server's
	readOnly    bool   // the server says it changes nothing
	destructive bool   // the server says it may destroy
}

// tool wraps one of the server's tools for the model, within the limits
// on what an untrusted server may hand it.
func (s *mcpServer) tool(mt *mcp.Tool, taken map[string]bool) (*Tool, error) {
	schema, err := mcpSchema(mt.InputSchema)
	if err != nil {
		return nil, err
	}
	t := &mcpTool{name: mcpToolName(s.cfg.Name, mt.Name, taken), orig: mt.Name}
	if a := mt.Annotations; a != nil {
		t.readOnly = a.ReadOnlyHint
		t.destructive = !a.ReadOnlyHint && a.DestructiveHint != nil && *a.DestructiveHint
	}
	desc := strings.TrimSpace(mt.Description)
	if desc == "" {
		desc = strings.TrimSpace(mt.Title)
	}
	desc = truncate(strings.ToValidUTF8(desc, "?"), maxMCPDescription)
	return &Tool{
		Name:        t.name,
		Emoji:       "🔌",
		Description: fmt.Sprintf("[tool %q of the MCP server %s] %s", truncate(mt.Name, 64), s.cfg.Name, desc),
		Params:      schema,
		Preview: func(a map[string]any) string {
			return s.cfg.Name + ": " + truncate(mt.Name, 64) + " " + compactJSON(a)
		},
		Run: func(ctx context.Context, env *ToolEnv, a map[string]any, progress func(string)) (string, error) {
			return s.call(ctx, env, t, a, progress)
		},
	}, nil
}

// mcpSchema is a tool's input schema as the model APIs take it: a JSON
// object schema, within maxMCPSchema bytes.
func mcpSchema(in any) (map[string]any, error) {
	switch in := in.(type) {
	case oversized:
		return nil, fmt.Errorf("its input schema is %d bytes, more than the %d offered to the model", int(in), maxMCPSchema)
	case error:
		return nil, fmt.Errorf("its input schema does not encode: %v", in)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("its input schema does not encode: %v", err)
	}
	if len(b) > maxMCPSchema {
		return nil, fmt.Errorf("its input schema is %d bytes, more than the %d offered to the model", len(b), maxMCPSchema)
	}
	var m map[string]any
	if string(b) != "null" {
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, errors.New("its input schema is not a JSON object")
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	if t, ok := m["type"]; ok && t != "object" {
		return nil, fmt.Errorf("its input schema is of type %v, not object", t)
	}
	m["type"] = "object"
	if _, ok := m["properties"]; !ok {
		m["properties"] = map[string]any{}
	}
	return m, nil
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

// call runs one tool call: the approval policy first, then the call, its
// progress notifications as tool.progress, its result for the model and
// the person.
func (s *mcpServer) call(ctx context.Context, env *ToolEnv, t *mcpTool, args map[string]any, progress func(string)) (string, error) {
	c, err := s.session()
	if err != nil {
		return "", err
	}
	if err := s.clear(ctx, env, c, t, args); err != nil {
		return "", err
	}
	if c, err = s.session(); err != nil { // it may have stopped while the person was asked
		return "", err
	}
	token := fmt.Sprintf("irisgate-%d", s.m.token.Add(1))
	notes := make(chan string, 16)
	s.mu.Lock()
	s.progress[token] = notes
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.progress, token)
		s.mu.Unlock()
	}()
	params := &mcp.CallToolParams{Name: t.orig, Arguments: args}
	params.SetProgressToken(token)
	cctx, cancel := context.WithTimeout(ctx, s.m.cfg.CallTimeout)
	defer cancel()
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := c.sess.CallTool(cctx, params)
		done <- answer{res, err}
	}()
	// Progress reaches the devices at most every 200 ms, the latest note
	// kept: a server cannot flood them.
	const every = 200 * time.Millisecond
	var last time.Time
	pending := ""
	flush := time.NewTimer(time.Hour)
	defer flush.Stop()
	for {
		select {
		case n := <-notes:
			if time.Since(last) >= every {
				progress(n)
				last, pending = time.Now(), ""
			} else {
				if pending == "" {
					flush.Reset(every - time.Since(last))
				}
				pending = n
			}
		case <-flush.C:
			if pending != "" {
				progress(pending)
				last, pending = time.Now(), ""
			}
		case a := <-done:
			if a.err != nil {
				return "", s.callError(ctx, cctx, c, a.err)
			}
			return s.render(env, t, a.res)
		}
	}
}

// callError says clearly why a call failed: the person stopped it, it ran
// out of time, or the server stopped during it.
func (s *mcpServer) callError(ctx, cctx context.Context, c *mcpConn, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the MCP server %s did not answer within %v; the call was cancelled", s.cfg.Name, s.m.cfg.CallTimeout)
	}
	var answered *jsonrpc.Error
	if errors.As(err, &answered) {
		return fmt.Errorf("the MCP server %s refused the call: %v", s.cfg.Name, truncate(answered.Message, 2000))
	}
	// Anything else is the connection failing: find out whether the
	// server stopped (the pipe can close before its exit is seen).
	select {
	case <-c.dead:
	case <-c.exitedOrNil():
	case <-time.After(2 * time.Second):
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || isClosed(c) {
		why := ""
		select {
		case <-c.dead: // end is set once dead is closed
			why = c.end
		default:
		}
		if why == "" {
			why = c.ending(truncate(err.Error(), 200))
		}
		// Its last words are in /tools and the log; the person's preview
		// of the call shows this sentence's end.
		return fmt.Errorf("the call did not finish, and what it did before is unknown: the MCP server %s stopped during the call (%s) and is being started again", s.cfg.Name, why)
	}
	return fmt.Errorf("the MCP server %s: %v", s.cfg.Name, truncate(err.Error(), 2000))
}

// exitedOrNil is the stdio process's exit, or nil (never ready) for an
// HTTP server.
func (c *mcpConn) exitedOrNil() <-chan struct{} {
	if c.exited == nil {
		return nil
	}
	return c.exited
}

func isClosed(c *mcpConn) bool {
	select {
	case <-c.dead:
		return true
	default:
	}
	if c.exited != nil {
		select {
		case <-c.exited:
			return true
		default:
		}
	}
	return false
}

// onProgress hands a server's progress notification to the call it is
// for; notes of no call of ours are dropped.
func (s *mcpServer) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	s.mu.Lock()
	ch := s.progress[token]
	s.mu.Unlock()
	if ch == nil {
		return
	}
	note := strings.TrimSpace(strings.ToValidUTF8(p.Message, "?"))
	switch {
	case p.Total > 0:
		note = strings.TrimSpace(fmt.Sprintf("%s/%s %s", num(p.Progress), num(p.Total), note))
	case note == "":
		note = num(p.Progress)
	}
	select {
	case ch <- truncate(note, 120):
	default: // the call is behind: this note is skipped
	}
}

func num(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprintf("%.1f", f)
}

// clear applies the approval policy of the built-in tools to a call: a
// stdio server runs in the sandbox, so its calls run unasked as commands
// do, but for those its server calls destructive (as a courtesy) and, in
// "ask" mode, those it does not call read-only. Without walls every call
// asks. An HTTP server's calls reach the network: they need the network
// grant unless the owner let that server out.
func (s *mcpServer) clear(ctx context.Context, env *ToolEnv, c *mcpConn, t *mcpTool, args map[string]any) error {
	mode := env.mode(s.m.ts)
	if mode == AskNever {
		return nil
	}
	command := t.name + " " + compactJSON(args)
	var why []string
	switch {
	case s.cfg.URL == "" && c.wall == sandbox.None:
		why = append(why, fmt.Sprintf("The MCP server %s runs without a sandbox here: every call of its tools asks.", s.cfg.Name))
	case mode == AskAll && !t.readOnly:
		why = append(why, fmt.Sprintf("This chat asks before everything that is not read-only (/approvals), and %s does not say %s is.", s.cfg.Name, t.orig))
	case t.destructive:
		why = append(why, fmt.Sprintf("The MCP server %s says %s may destroy data.", s.cfg.Name, t.orig))
	}
	if s.cfg.URL != "" && !s.cfg.Network && !env.granted(ctx, GrantNetwork) {
		why = append([]string{fmt.Sprintf("This calls the MCP server %s at %s, over the network. For this session or always lets every tool use the network.", s.cfg.Name, s.cfg.URL)}, why...)
		return env.request(ctx, Request{Title: "Let this tool use the network?", Command: command, Why: strings.Join(why, " "), Grant: GrantNetwork})
	}
	if len(why) == 0 {
		return nil
	}
	return env.request(ctx, Request{Title: "Run this tool?", Command: command, Why: strings.Join(why, " ")})
}
