package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/irisgate/irisgate/internal/version"
	"github.com/irisgate/irisgate/sandbox"
)

// mcpConn is one connection to a server: for a stdio server, one run of
// its process.
type mcpConn struct {
	sess       *mcp.ClientSession
	listed     []*mcp.Tool
	serverInfo string
	wall       sandbox.Wall
	changed    chan struct{} // the server said its tools changed
	// relistFailed: reading the changed list failed once (only the
	// connection's supervisor reads it).
	relistFailed bool

	// A stdio server's process.
	cmd    *sandbox.Cmd
	pid    int
	stdin  *os.File
	exited chan struct{} // closed once it has exited; then exitErr
	exitEr error
	stderr *ring

	deadOnce sync.Once
	dead     chan struct{} // closed when the connection has ended; then why and end
	why      string        // how it ended, with a stdio process's last words
	end      string        // how it ended, in short
	shut     sync.Once
}

// connect starts a stdio server's process (in the sandbox) or reaches an
// HTTP server, initializes the session and lists the tools.
func (s *mcpServer) connect(ctx context.Context) (*mcpConn, error) {
	c := &mcpConn{dead: make(chan struct{}), changed: make(chan struct{}, 1)}
	client := mcp.NewClient(&mcp.Implementation{Name: "irisgate", Version: version.Get().Version}, &mcp.ClientOptions{
		// No roots: a filesystem server keeps to the directories its
		// command line names, which the owner chose.
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: s.onProgress,
		// The list is read again by the connection's supervisor, once
		// however many times the server says it changed meanwhile: a
		// flood of these starts nothing.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.changed <- struct{}{}:
			default:
			}
		},
	})
	var transport mcp.Transport
	if s.cfg.URL != "" {
		client, err := s.httpClient()
		if err != nil {
			return nil, err
		}
		transport = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: client, MaxEventSize: maxMCPLine}
	} else {
		t, err := s.start(c)
		if err != nil {
			return nil, err
		}
		transport = t
	}
	ictx, cancel := context.WithTimeout(ctx, mcpInitTimeout)
	defer cancel()
	sess, err := client.Connect(ictx, transport, nil)
	if err != nil {
		c.close()
		return nil, c.explain(err)
	}
	c.sess = sess
	if res := sess.InitializeResult(); res != nil && res.ServerInfo != nil {
		c.serverInfo = truncate(strings.TrimSpace(res.ServerInfo.Name+" "+res.ServerInfo.Version), 80)
	}
	if c.listed, err = listMCPTools(ictx, sess); err != nil {
		c.close()
		return nil, c.explain(fmt.Errorf("listing its tools: %w", err))
	}
	return c, nil
}

// listMCPTools reads the server's list of tools, page by page, keeping of
// each only what is offered and within the limits (its name, a bounded
// description, its input schema or just the size it had, its hints): a
// server cannot make the gateway hold more than a few MiB however long
// its list, nor page for ever.
func listMCPTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	if res := sess.InitializeResult(); res != nil && res.Capabilities != nil && res.Capabilities.Tools == nil {
		return nil, nil // a server of prompts or resources only
	}
	var out []*mcp.Tool
	cursor := ""
	for page := 0; ; page++ {
		if page == maxMCPPages {
			return nil, fmt.Errorf("its list of tools runs past %d pages", maxMCPPages)
		}
		res, err := sess.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			out = append(out, slimTool(t))
			if len(out) >= 4*maxMCPTools {
				return out, nil // a list without end: what is past the limit is not offered anyway
			}
		}
		if res.NextCursor == "" {
			return out, nil
		}
		cursor = res.NextCursor
	}
}

// oversized stands for an input schema too large to offer: only its size
// is kept.
type oversized int

// slimTool is what the gateway keeps of a listed tool.
func slimTool(t *mcp.Tool) *mcp.Tool {
	if t == nil {
		return nil
	}
	s := &mcp.Tool{Name: t.Name, Title: cutAt(t.Title, 2*maxMCPDescription), Description: cutAt(t.Description, 2*maxMCPDescription)}
	if len(t.Name) > maxMCPToolName {
		s.Name = "" // not a name a call could carry back
		s.Title = fmt.Sprintf("a name of %d bytes", len(t.Name))
		return s
	}
	if a := t.Annotations; a != nil {
		s.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	b, err := json.Marshal(t.InputSchema)
	switch {
	case err != nil:
		s.InputSchema = err
	case len(b) > maxMCPSchema:
		s.InputSchema = oversized(len(b))
	default:
		s.InputSchema = json.RawMessage(b)
	}
	return s
}

// relist takes the server's new list of tools after it said it changed.
func (s *mcpServer) relist(c *mcpConn) {
	s.mu.Lock()
	current := s.conn == c
	s.mu.Unlock()
	if !current || c.sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.m.ctx, mcpInitTimeout)
	defer cancel()
	listed, err := listMCPTools(ctx, c.sess)
	if err != nil {
		// Told once per connection: a server can say its list changed
		// as often as it likes.
		log := s.m.cfg.Log.Debug
		if !c.relistFailed {
			c.relistFailed, log = true, s.m.cfg.Log.Warn
		}
		log("MCP server: listing its changed tools; the tools listed before stay offered", "mcp", s.cfg.Name, "err", err)
		return
	}
	tools, left := s.wrap(listed)
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	s.mu.Lock()
	if s.conn != c {
		s.mu.Unlock()
		return
	}
	s.tools = tools
	s.mu.Unlock()
	s.update(func(st *MCPStatus) { st.Tools, st.Left = names, left })
}

// start runs a stdio server's command behind the sandbox's walls, as the
// terminal tool runs commands: the least environment (and the names the
// owner gave this server), the working directory, offline unless the
// owner let it out.
func (s *mcpServer) start(c *mcpConn) (mcp.Transport, error) {
	sb := s.m.ts.Sandbox
	var script strings.Builder
	for _, k := range s.cfg.Env {
		if v, ok := os.LookupEnv(k); ok && validEnvName(k) {
			fmt.Fprintf(&script, "export %s=%s; ", k, shellQuote(v))
		}
	}
	script.WriteString("exec " + shellJoin(s.cfg.Command))
	cmd, err := sb.Command(sandbox.Run{Dir: s.m.cfg.Dir, Script: script.String(), Network: s.cfg.Network})
	if err != nil {
		return nil, err
	}
	c.wall = sb.WallFor(s.m.cfg.Dir)
	var files []*os.File
	pipe := func() (r, w *os.File) {
		if err == nil {
			if r, w, err = os.Pipe(); err == nil {
				files = append(files, r, w)
			}
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll(files)
		return nil, err
	}
	// Pipes of our own rather than exec's: Wait then returns when the
	// process exits, whatever a child it left holds open.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(files)
		return nil, err
	}
	closeAll([]*os.File{inR, outW, errW})
	c.cmd, c.pid, c.stdin = cmd, cmd.Process.Pid, inW
	c.stderr = newRing(errR, 4<<10)
	c.exited = make(chan struct{})
	go func() {
		c.exitEr = cmd.Wait()
		close(c.exited)
	}()
	return &mcp.IOTransport{Reader: outR, Writer: inW, MaxLineLength: maxMCPLine}, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// httpClient is the owner's client, sending the bearer token when one is
// configured, and holding no more of an answer than one message may be.
func (s *mcpServer) httpClient() (*http.Client, error) {
	base := s.m.cfg.HTTPClient
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if s.cfg.BearerEnv != "" {
		token := os.Getenv(s.cfg.BearerEnv)
		if token == "" {
			return nil, fmt.Errorf("the environment variable %s (bearer_env) is empty", s.cfg.BearerEnv)
		}
		rt = bearer{token: token, base: rt}
	}
	c := *base
	c.Transport = boundedAnswers{base: rt}
	return &c, nil
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// boundedAnswers caps what the SDK reads of an answer that is not an
// event stream (a JSON response, an error's body): it reads those whole
// into memory, however long the server makes them. An event stream is
// bounded per event (MaxEventSize) and may last as long as the session.
type boundedAnswers struct{ base http.RoundTripper }

func (b boundedAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body = &cappedBody{rc: resp.Body, left: maxMCPLine}
	}
	return resp, nil
}

var errMCPAnswerTooLarge = fmt.Errorf("the server's answer is larger than the %d MiB a message may be", maxMCPLine>>20)

type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errMCPAnswerTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// wait blocks until the connection ends (the session closes or the
// process exits) or ctx ends, and says why it ended. Meanwhile it reads
// the list of tools again (relist) when the server says it changed.
func (c *mcpConn) wait(ctx context.Context, relist func()) string {
	closed := make(chan error, 1)
	go func() { closed <- c.sess.Wait() }()
	var err error
wait:
	for {
		select {
		case <-ctx.Done():
			return ""
		case <-c.changed:
			relist()
		case err = <-closed:
			if c.exited != nil {
				// The process's exit says more than the closed pipe.
				select {
				case <-c.exited:
				case <-time.After(2 * time.Second):
				}
			}
			break wait
		case <-c.exited:
			break wait
		}
	}
	why := "the connection closed"
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		why += ": " + err.Error()
	}
	c.markDead(c.describe(why))
	return c.why
}

// ending is how a stdio process ended (its exit status or signal), or
// fallback.
func (c *mcpConn) ending(fallback string) string {
	if c.exited != nil {
		select {
		case <-c.exited:
			if c.exitEr != nil {
				return c.exitEr.Error()
			}
			return "it exited"
		default:
		}
	}
	return fallback
}

// describe says how a stdio process ended, with its last words on stderr.
func (c *mcpConn) describe(fallback string) string {
	why := fallback
	if c.exited != nil {
		select {
		case <-c.exited:
			why = "the process ended"
			if c.exitEr != nil {
				why += " (" + c.exitEr.Error() + ")"
			}
		default:
		}
		if last := c.stderr.last(); last != "" {
			why += "; its last output: " + last
		}
	}
	return why
}

// explain adds a stdio process's end to an error of the connection.
func (c *mcpConn) explain(err error) error {
	if c.exited == nil {
		return err
	}
	select {
	case <-c.exited:
	case <-time.After(time.Second):
	}
	return fmt.Errorf("%w (%s)", err, c.describe("the process runs"))
}

func (c *mcpConn) markDead(why string) {
	c.deadOnce.Do(func() {
		c.why, c.end = why, c.ending("the connection closed")
		close(c.dead)
	})
}

// close ends the session and the process: its input closed first (the
// way stdio servers are told to stop), then killed with everything it
// started.
func (c *mcpConn) close() {
	c.shut.Do(func() {
		c.markDead("closed by the gateway")
		if c.sess != nil {
			c.sess.Close()
		}
		if c.cmd == nil {
			return
		}
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(2 * time.Second):
		}
		// The sandbox's supervisor (or, behind namespaces, the end of the
		// PID namespace) ends whatever the server started, even after the
		// server itself exited; a supervisor that does not answer is
		// killed with its process group. Not once it has been reaped: its
		// pid may be another's by then, and what it started ended with it.
		select {
		case <-c.exited:
		default:
			c.cmd.Stop()
			select {
			case <-c.exited:
			case <-time.After(stopGrace):
				c.cmd.Kill()
				<-c.exited
			}
		}
		c.stderr.stop()
	})
}

// ring keeps the last max bytes a process writes to stderr.
type ring struct {
	mu   sync.Mutex
	max  int
	buf  []byte
	r    *os.File
	done chan struct{}
}

func newRing(r *os.File, max int) *ring {
	g := &ring{max: max, r: r, done: make(chan struct{})}
	go g.drain()
	return g
}

func (g *ring) drain() {
	defer close(g.done)
	b := make([]byte, 4096)
	for {
		n, err := g.r.Read(b)
		g.mu.Lock()
		g.buf = append(g.buf, b[:n]...)
		if over := len(g.buf) - g.max; over > 0 {
			g.buf = append(g.buf[:0], g.buf[over:]...)
		}
		g.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// stop ends the drain, even while a child the process left holds the
// pipe open.
func (g *ring) stop() {
	g.r.Close()
	<-g.done
}

// last is the end of what was written, on one line.
func (g *ring) last() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	s := strings.ToValidUTF8(string(g.buf), "?")
	g.mu.Unlock()
	s = strings.Join(strings.Fields(s), " ")
	return tail(s, 300)
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
