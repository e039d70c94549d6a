package agent

import (
	"context"
	"errors"
	"fmt"
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
	c := &mcpConn{dead: make(chan struct{})}
	client := mcp.NewClient(&mcp.Implementation{Name: "irisgate", Version: version.Get().Version}, &mcp.ClientOptions{
		// No roots: a filesystem server keeps to the directories its
		// command line names, which the owner chose.
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: s.onProgress,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			go s.relist(c)
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

func listMCPTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	if res := sess.InitializeResult(); res != nil && res.Capabilities != nil && res.Capabilities.Tools == nil {
		return nil, nil // a server of prompts or resources only
	}
	var out []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if len(out) > 4*maxMCPTools {
			break // a list without end: what is past the limit is not offered anyway
		}
	}
	return out, nil
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
		s.m.cfg.Log.Warn("MCP server: listing its changed tools", "mcp", s.cfg.Name, "err", err)
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
// configured.
func (s *mcpServer) httpClient() (*http.Client, error) {
	base := s.m.cfg.HTTPClient
	if s.cfg.BearerEnv == "" {
		return base, nil
	}
	token := os.Getenv(s.cfg.BearerEnv)
	if token == "" {
		return nil, fmt.Errorf("the environment variable %s (bearer_env) is empty", s.cfg.BearerEnv)
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := *base
	c.Transport = bearer{token: token, base: rt}
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

// wait blocks until the connection ends (the session closes or the
// process exits) or ctx ends, and says why it ended.
func (c *mcpConn) wait(ctx context.Context) string {
	closed := make(chan error, 1)
	go func() { closed <- c.sess.Wait() }()
	var err error
	select {
	case <-ctx.Done():
		return ""
	case err = <-closed:
		if c.exited != nil {
			// The process's exit says more than the closed pipe.
			select {
			case <-c.exited:
			case <-time.After(2 * time.Second):
			}
		}
	case <-c.exited:
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
