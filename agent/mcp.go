package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/irisgate/irisgate/sandbox"
)

// MCPServer is one MCP server the owner lists: a command speaking MCP on
// its standard input and output, or a streamable-HTTP endpoint.
type MCPServer struct {
	// Name prefixes its tools' names (name__tool): letters, digits and
	// dashes, at most 32.
	Name string
	// Command is a stdio server: the program and its arguments. It runs
	// in the tools' sandbox, in their working directory.
	Command []string
	// URL is a streamable-HTTP server.
	URL string
	// Network: a stdio server's process may use the network; an HTTP
	// server's calls need no network grant. Off by default: the owner
	// lets a server out by name.
	Network bool
	// Env names variables of the gateway's environment a stdio server
	// gets besides the tools' least environment.
	Env []string
	// BearerEnv names a variable whose value an HTTP server is sent as
	// "Authorization: Bearer …".
	BearerEnv string
	// Tools, when set, are the only tools of the server offered (by the
	// server's names for them).
	Tools []string
}

// MCPConfig configures the MCP servers' tools.
type MCPConfig struct {
	Servers []MCPServer
	// Dir is the stdio servers' working directory: the tools' one.
	Dir string
	Log *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before a server that
	// stopped is started again (default 1 s and 1 min).
	MinBackoff, MaxBackoff time.Duration
	// CallTimeout bounds one tool call (default 10 min).
	CallTimeout time.Duration
	// HTTPClient reaches HTTP servers (default: a client of its own).
	HTTPClient *http.Client
}

// Limits on what an MCP server, untrusted, hands the model and the person.
const (
	maxMCPTools       = 64       // tools offered per server
	maxMCPDescription = 1 << 10  // bytes of a tool's description
	maxMCPSchema      = 16 << 10 // bytes of a tool's input schema, as JSON
	maxMCPText        = 32 << 10 // bytes of text the model gets from one call
	maxMCPFiles       = 4        // images and files one call offers the person
	maxMCPFile        = 8 << 20  // bytes of each
	maxMCPLine        = 16 << 20 // bytes of one message from a server
	maxMCPToolName    = 256      // bytes of a tool's name (the spec: 1 to 128 characters)
	maxMCPPages       = 64       // pages of a list of tools
	mcpInitTimeout    = 30 * time.Second
	// mcpStable is how long a connection must hold for its end to be
	// reported again (a server that keeps failing is reported once).
	mcpStable = time.Minute
)

// MCP connects the configured servers and offers their tools. A server
// that stops is started again with backoff; its tools are offered while it
// is connected.
type MCP struct {
	cfg     MCPConfig
	ts      *Tools
	servers []*mcpServer
	token   atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each change of state
}

var mcpServerName = regexp.MustCompile(`^[A-Za-z0-9-]{1,32}$`)

// NewMCP checks the configuration. Start connects.
func NewMCP(ts *Tools, cfg MCPConfig) (*MCP, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Minute, cfg.MinBackoff)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Minute
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	m := &MCP{cfg: cfg, ts: ts, changed: make(chan struct{})}
	seen := map[string]bool{}
	for _, sc := range cfg.Servers {
		if err := checkMCPServer(sc); err != nil {
			return nil, err
		}
		if seen[strings.ToLower(sc.Name)] {
			return nil, fmt.Errorf("mcp: two servers are named %q", sc.Name)
		}
		seen[strings.ToLower(sc.Name)] = true
		s := &mcpServer{m: m, cfg: sc, progress: map[string]chan<- string{}}
		s.status = MCPStatus{Name: sc.Name, State: MCPConnecting, Transport: "stdio", Target: shellJoin(sc.Command)}
		if sc.URL != "" {
			s.status.Transport, s.status.Target = "http", sc.URL
		}
		m.servers = append(m.servers, s)
	}
	return m, nil
}

func checkMCPServer(sc MCPServer) error {
	if !mcpServerName.MatchString(sc.Name) {
		return fmt.Errorf("mcp: server name %q: use 1 to 32 letters, digits or dashes (it prefixes the tools' names)", sc.Name)
	}
	switch {
	case len(sc.Command) > 0 && sc.URL != "":
		return fmt.Errorf("mcp server %s: give a command or a URL, not both", sc.Name)
	case len(sc.Command) == 0 && sc.URL == "":
		return fmt.Errorf("mcp server %s: give a command or a URL", sc.Name)
	case sc.URL != "":
		u, err := url.Parse(sc.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp server %s: %q is not an http(s) URL", sc.Name, sc.URL)
		}
		if len(sc.Env) > 0 {
			return fmt.Errorf("mcp server %s: env is for stdio servers; an HTTP server takes bearer_env", sc.Name)
		}
	case sc.BearerEnv != "":
		return fmt.Errorf("mcp server %s: bearer_env is for HTTP servers", sc.Name)
	}
	for _, a := range sc.Command {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("mcp server %s: the command holds a NUL byte", sc.Name)
		}
	}
	return nil
}

// Start connects every server in the background (it does not wait).
func (m *MCP) Start() {
	if m.ctx != nil {
		return
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, s := range m.servers {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.supervise(m.ctx)
		}()
	}
}

// Close disconnects every server and stops their processes.
func (m *MCP) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	m.cfg.HTTPClient.CloseIdleConnections()
	return nil
}

// Tools implements ToolSet: the tools each server listed when it last
// connected. A server being started again keeps its tools offered: a call
// meanwhile is told it is down, rather than that no such tool exists.
func (m *MCP) Tools() []*Tool {
	var out []*Tool
	for _, s := range m.servers {
		s.mu.Lock()
		out = append(out, s.tools...)
		s.mu.Unlock()
	}
	return out
}

// MCPState is where a server's connection stands.
type MCPState string

// Server states.
const (
	MCPConnecting MCPState = "connecting"
	MCPConnected  MCPState = "connected"
	MCPRestarting MCPState = "restarting"
	MCPStopped    MCPState = "stopped"
)

// MCPStatus is what /tools shows of a server.
type MCPStatus struct {
	Name      string
	Transport string // stdio or http
	Target    string // the command line or the URL
	State     MCPState
	Server    string // the server's own name and version
	Tools     []string
	// Left are the tools not offered, with why.
	Left      []string
	Wall      sandbox.Wall // a stdio server's
	Network   bool
	PID       int // a stdio server's process (0: none)
	Restarts  int
	LastError string
	ErrorAt   time.Time
}

// Status describes every server.
func (m *MCP) Status() []MCPStatus {
	out := make([]MCPStatus, len(m.servers))
	for i, s := range m.servers {
		out[i] = s.snapshot()
	}
	return out
}

// Wait blocks until cond holds for the named server's status, or ctx
// ends.
func (m *MCP) Wait(ctx context.Context, name string, cond func(MCPStatus) bool) (MCPStatus, error) {
	var s *mcpServer
	for _, c := range m.servers {
		if c.cfg.Name == name {
			s = c
		}
	}
	if s == nil {
		return MCPStatus{}, fmt.Errorf("no MCP server is named %q", name)
	}
	for {
		m.mu.Lock()
		ch := m.changed
		m.mu.Unlock()
		st := s.snapshot()
		if cond(st) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, fmt.Errorf("MCP server %s: %w (it is %s; last error: %s)", name, ctx.Err(), st.State, st.LastError)
		}
	}
}

func (m *MCP) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// mcpServer is one server and its connection of the moment.
type mcpServer struct {
	m   *MCP
	cfg MCPServer

	mu       sync.Mutex
	conn     *mcpConn // nil while not connected
	tools    []*Tool
	status   MCPStatus
	progress map[string]chan<- string // progress token → the call's notes
	reported bool                     // this outage was told already
}

func (s *mcpServer) snapshot() MCPStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Tools = slices.Clone(st.Tools)
	st.Left = slices.Clone(st.Left)
	return st
}

func (s *mcpServer) update(f func(st *MCPStatus)) {
	s.mu.Lock()
	f(&s.status)
	s.mu.Unlock()
	s.m.notify()
}

// supervise connects, waits for the connection to end, and connects again
// after a backoff, until ctx ends.
func (s *mcpServer) supervise(ctx context.Context) {
	log := s.m.cfg.Log.With("mcp", s.cfg.Name)
	backoff := s.m.cfg.MinBackoff
	for ctx.Err() == nil {
		c, err := s.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			s.failed(log, fmt.Sprintf("cannot connect: %v", err), backoff)
		} else {
			up := time.Now()
			s.online(log, c)
			why := c.wait(ctx, func() { s.relist(c) })
			s.mu.Lock()
			s.conn = nil
			s.mu.Unlock()
			c.close()
			if ctx.Err() != nil {
				break
			}
			if time.Since(up) >= mcpStable {
				backoff, s.reported = s.m.cfg.MinBackoff, false
			}
			s.failed(log, "stopped: "+why, backoff)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.m.cfg.MaxBackoff)
	}
	s.mu.Lock()
	s.tools = nil
	s.mu.Unlock()
	s.update(func(st *MCPStatus) { st.State, st.PID = MCPStopped, 0 })
}

func (s *mcpServer) online(log *slog.Logger, c *mcpConn) {
	tools, left := s.wrap(c.listed)
	s.mu.Lock()
	s.conn, s.tools = c, tools
	again := s.reported
	s.mu.Unlock()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	s.update(func(st *MCPStatus) {
		st.State, st.Tools, st.Left, st.PID, st.Wall, st.Network = MCPConnected, names, left, c.pid, c.wall, s.cfg.Network
		st.Server = c.serverInfo
	})
	if again {
		log.Info("MCP server is back", "tools", len(tools))
	} else {
		attrs := []any{"tools", len(tools), "server", c.serverInfo}
		if c.cmd != nil {
			attrs = append(attrs, "wall", c.wall.String(), "network", s.cfg.Network)
		}
		log.Info("MCP server connected", attrs...)
	}
}

// failed records why the server is down; the first failure of an outage
// is logged as a warning, the rest at debug level.
func (s *mcpServer) failed(log *slog.Logger, why string, backoff time.Duration) {
	why = truncate(why, 500)
	s.mu.Lock()
	first := !s.reported
	s.reported = true
	s.mu.Unlock()
	s.update(func(st *MCPStatus) {
		st.State, st.PID, st.LastError, st.ErrorAt = MCPRestarting, 0, why, time.Now()
		st.Restarts++
	})
	if first {
		log.Warn("MCP server "+why+"; it is started again with backoff (told once until it is back)", "retry_in", backoff)
	} else {
		log.Debug("MCP server "+why, "retry_in", backoff)
	}
}

// wrap makes the model's tools of a server's list, within the limits,
// and says which were left out and why.
func (s *mcpServer) wrap(listed []*mcp.Tool) ([]*Tool, []string) {
	var out []*Tool
	var left []string
	taken := map[string]bool{}
	seen := map[string]bool{}
	for _, mt := range listed {
		switch {
		case mt == nil || mt.Name == "" && mt.Title == "":
			left = append(left, "(a tool without a name)")
			continue
		case mt.Name == "":
			left = append(left, "(a tool with "+mt.Title+")")
			continue
		case len(s.cfg.Tools) > 0 && !slices.Contains(s.cfg.Tools, mt.Name):
			continue
		case seen[mt.Name]:
			left = append(left, truncate(mt.Name, 64)+": listed twice")
			continue
		case len(out) >= maxMCPTools:
			left = append(left, fmt.Sprintf("%s: past the %d tools offered per server", truncate(mt.Name, 64), maxMCPTools))
			continue
		}
		seen[mt.Name] = true
		t, err := s.tool(mt, taken)
		if err != nil {
			left = append(left, truncate(mt.Name, 64)+": "+err.Error())
			continue
		}
		out = append(out, t)
	}
	return out, left
}

// mcpToolName is server__tool as the model APIs take names
// (^[a-zA-Z0-9_-]{1,64}$): other characters become "_", and a name
// changed that way, too long or taken gets a hash of the original.
func mcpToolName(server, tool string, taken map[string]bool) string {
	clean := []byte(tool)
	changed := false
	for i, c := range clean {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			clean[i], changed = '_', true
		}
	}
	name := server + "__" + string(clean)
	if changed || len(name) > 64 || taken[name] {
		sum := sha256.Sum256([]byte(tool))
		h := "_" + hex.EncodeToString(sum[:4])
		name = name[:min(len(name), 64-len(h))] + h
		for i := 2; taken[name]; i++ {
			suffix := fmt.Sprintf("%s%d", h, i)
			name = name[:min(len(name), 64-len(suffix))] + suffix
		}
	}
	taken[name] = true
	return name
}

// session is the server's connection for a call, or why there is none.
func (s *mcpServer) session() (*mcpConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn, nil
	}
	why := ""
	if s.status.LastError != "" {
		why = " (" + s.status.LastError + ")"
	}
	return nil, fmt.Errorf("the MCP server %s is not connected%s; it is being started again: try later", s.cfg.Name, why)
}

var errMCPClosed = errors.New("closed")
