package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/irisgate/irisgate/internal/datadir"
	"github.com/irisgate/irisgate/internal/httperr"
)

// DefaultDataDir is where a gateway keeps its data when not told (serve's
// --data default), relative to the directory it was started in.
const DefaultDataDir = "irisgate-data"

// Options say which gateway a Client is for.
type Options struct {
	// DataDir is the data directory the person named (--data,
	// IRISGATE_DATA); empty: ./irisgate-data if it exists, else the one
	// gateway running for this user.
	DataDir string
	// Create lets a command that stores something (token create, cron
	// add) make DataDir when it does not exist yet and no gateway runs.
	// A directory nobody named is never made.
	Create bool
	// Beside lets a command act on the data directory itself while a
	// gateway runs on it whose admin socket does not answer (a mount
	// that refuses Unix sockets): the token commands, whose changes the
	// gateway reads from the database (a revoked token's connections
	// are closed within a second by its watch of the tokens table).
	Beside bool
	// Store is the gateway's --store (IRISGATE_STORE): "" for the SQLite
	// file in the data directory, or its PostgreSQL database's URL. Only
	// a command that acts on the data itself needs it; one the running
	// gateway answers uses the gateway's.
	Store string
}

// Hinted is an error with a one-line hint of what to do about it.
type Hinted struct {
	Err  error
	Hint string
}

func (h *Hinted) Error() string { return h.Err.Error() }
func (h *Hinted) Unwrap() error { return h.Err }

// ErrNotRunning is the error of an operation that needs the running
// gateway when none runs on the data directory.
var ErrNotRunning = errors.New("no gateway is running")

// Client does admin operations on one gateway's data: through its admin
// socket while it runs, else on the data directory itself (holding the
// directory's lock, so no gateway starts meanwhile). Close it when done.
type Client struct {
	dir  string
	http *http.Client // live: the running gateway's socket
	info Info

	st   ownStore // direct: no gateway runs (or beside one, Beside)
	lock *datadir.Lock
	// beside: a gateway runs on dir, unreachable; st is shared with it.
	beside bool
}

// Connect finds the gateway Options describe.
func Connect(ctx context.Context, o Options) (*Client, error) {
	dir := o.DataDir
	if dir == "" {
		abs, err := filepath.Abs(DefaultDataDir)
		if err != nil {
			return nil, err
		}
		dir = abs
		if !datadir.Exists(dir) {
			return connectRunning(ctx, dir)
		}
	} else if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if c, err := connectLive(ctx, dir); err == nil {
		return c, nil
	} else if !unreachable(err) {
		return nil, fmt.Errorf("the gateway's admin socket %s: %w", SocketPath(dir), err)
	}
	return connectDirect(ctx, dir, o)
}

// connectRunning is for a command run where there is no ./irisgate-data
// and no --data: the gateway meant is the one this user runs.
func connectRunning(ctx context.Context, missing string) (*Client, error) {
	gws := Running(ctx)
	switch len(gws) {
	case 1:
		return connectLive(ctx, gws[0].DataDir)
	case 0:
		return nil, &Hinted{Err: fmt.Errorf("no gateway is running and there is no data directory here (%s)", missing),
			Hint: "start one with irisgate serve, or name its data directory with --data DIR (or IRISGATE_DATA)"}
	}
	dirs := make([]string, len(gws))
	for i, g := range gws {
		dirs[i] = g.DataDir
	}
	return nil, &Hinted{Err: fmt.Errorf("%d gateways are running, on %s", len(gws), strings.Join(dirs, ", ")),
		Hint: "choose one with --data DIR (or IRISGATE_DATA)"}
}

func connectLive(ctx context.Context, dir string) (*Client, error) {
	sock := SocketPath(dir)
	hc := &http.Client{Transport: &http.Transport{
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx, sock) },
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}}
	c := &Client{dir: dir, http: hc}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.call(ctx, http.MethodGet, pathInfo, nil, &c.info); err != nil {
		hc.CloseIdleConnections()
		return nil, err
	}
	return c, nil
}

func connectDirect(ctx context.Context, dir string, o Options) (*Client, error) {
	want, err := datadir.ParseStore(o.Store)
	if err != nil {
		return nil, err
	}
	if held, ok := datadir.Held(dir); ok && held.Role == datadir.RoleServe {
		if o.Beside {
			return connectBeside(ctx, dir, want)
		}
		return nil, &Hinted{Err: fmt.Errorf("a gateway runs on %s (pid %d) but its admin socket %s does not answer", dir, held.PID, SocketPath(dir)),
			Hint: "is it still starting? try again in a moment, or restart it"}
	}
	create := o.Create && o.DataDir != ""
	if !datadir.HasData(dir) && !create {
		return nil, &Hinted{Err: fmt.Errorf("no gateway data in %s", dir),
			Hint: "start the gateway there first with irisgate serve --data " + dir + ", or name the right directory with --data"}
	}
	if err := checkStore(dir, want); err != nil {
		return nil, err
	}
	prepare := datadir.Prepare
	if want.Postgres() {
		prepare = datadir.PrepareFiles
	}
	if _, err := prepare(dir, create); err != nil {
		return nil, err
	}
	lock, err := datadir.Acquire(dir, datadir.RoleCLI, 5*time.Second)
	if err != nil {
		var inUse *datadir.InUseError
		if errors.As(err, &inUse) && inUse.Role == datadir.RoleServe {
			// The gateway started meanwhile: talk to it.
			if c, lerr := connectLive(ctx, dir); lerr == nil {
				return c, nil
			}
		}
		return nil, err
	}
	st, err := openStore(ctx, dir, want, false)
	if err != nil {
		lock.Release()
		return nil, err
	}
	return &Client{dir: dir, st: st, lock: lock}, nil
}

// checkStore refuses a store that is not the one dir's gateway keeps its
// state in, and a PostgreSQL database no gateway has served from dir:
// serve binds a directory to its database, never a command.
func checkStore(dir string, want datadir.Store) error {
	if err := datadir.CheckStore(dir, want); err != nil {
		return err
	}
	if !want.Postgres() {
		return nil
	}
	if bound, err := datadir.BoundStore(dir); err != nil || bound != "" {
		return err
	}
	return &Hinted{Err: fmt.Errorf("no gateway has served %s on %s yet", dir, want),
		Hint: "start it there first with irisgate serve --data " + dir + " --store …"}
}

// connectBeside opens the database of a gateway that runs on dir but
// cannot be reached, without its lock (the gateway holds it) and without
// migrating it (the gateway owns its schema). SQLite lets both write, and
// PostgreSQL is made for it.
func connectBeside(ctx context.Context, dir string, want datadir.Store) (*Client, error) {
	if err := checkStore(dir, want); err != nil {
		return nil, err
	}
	st, err := openStore(ctx, dir, want, true)
	if err != nil {
		return nil, err
	}
	return &Client{dir: dir, st: st, beside: true}, nil
}

// Beside reports whether the client acts on the data directory of a
// gateway that runs but whose admin socket does not answer.
func (c *Client) Beside() bool { return c.beside }

// Live reports whether the client talks to a running gateway.
func (c *Client) Live() bool { return c.http != nil }

// Info is what the running gateway says of itself; the zero Info when
// none runs.
func (c *Client) Info() Info { return c.info }

// DataDir is the data directory the client acts on.
func (c *Client) DataDir() string { return c.dir }

// Close ends the client: the store and the lock, or idle connections.
func (c *Client) Close() error {
	if c.http != nil {
		c.http.CloseIdleConnections()
		return nil
	}
	err := c.st.Close()
	if c.lock != nil {
		c.lock.Release()
	}
	return err
}

func (c *Client) ops() ops { return ops{st: c.st} }

// CreateToken makes a device token (bound to deviceID when not empty)
// and returns it with its value, which is shown only now. It is the one
// way tokens are made from the command line: irisgate token create and
// irisgate pair both call it.
func (c *Client) CreateToken(ctx context.Context, name, deviceID string) (NewToken, error) {
	var t NewToken
	if !c.Live() {
		return c.ops().createToken(ctx, name, deviceID)
	}
	return t, c.call(ctx, http.MethodPost, pathTokens, map[string]string{"name": name, "device_id": deviceID}, &t)
}

// Tokens lists the stored tokens, oldest first.
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	if !c.Live() {
		return c.ops().tokens(ctx)
	}
	var ts []Token
	return ts, c.call(ctx, http.MethodGet, pathTokens, nil, &ts)
}

// RevokeToken revokes a token named by its id (tok_…) or its value; the
// running gateway closes its live connections at once.
func (c *Client) RevokeToken(ctx context.Context, ref string) (Revoked, error) {
	if !c.Live() {
		return c.ops().revokeToken(ctx, ref)
	}
	var r Revoked
	return r, c.call(ctx, http.MethodPost, pathRevoke, map[string]string{"ref": ref}, &r)
}

// Channels lists the channel directory.
func (c *Client) Channels(ctx context.Context) ([]Channel, error) {
	if !c.Live() {
		return c.ops().channels(ctx)
	}
	var chs []Channel
	return chs, c.call(ctx, http.MethodGet, pathChannels, nil, &chs)
}

// AddJob adds a cron job.
func (c *Client) AddJob(ctx context.Context, s JobSpec) (Job, error) {
	if !c.Live() {
		return c.ops().cronAdd(ctx, s)
	}
	var j Job
	return j, c.call(ctx, http.MethodPost, pathCron, s, &j)
}

// Jobs lists the cron jobs.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	if !c.Live() {
		return c.ops().cronList(ctx)
	}
	var js []Job
	return js, c.call(ctx, http.MethodGet, pathCron, nil, &js)
}

// ActOnJob pauses, resumes, removes (rm) or runs a job, returning it as it
// is after (as it was, for rm).
func (c *Client) ActOnJob(ctx context.Context, action, id string) (Job, error) {
	if !c.Live() {
		return c.ops().cronAct(ctx, action, id)
	}
	var j Job
	return j, c.call(ctx, http.MethodPost, pathCron+"/"+url.PathEscape(id)+"/"+url.PathEscape(action), nil, &j)
}

// Do sends req (its path, e.g. /api/send; its host is ignored) to the
// running gateway over the admin socket.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	if !c.Live() {
		return nil, &Hinted{Err: fmt.Errorf("%w on %s", ErrNotRunning, c.dir), Hint: "start it with irisgate serve --data " + c.dir}
	}
	req.URL.Scheme, req.URL.Host, req.Host = "http", "irisgate", "irisgate"
	return c.http.Do(req)
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://irisgate"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return httperr.Read(res, maxBody)
	}
	return json.NewDecoder(io.LimitReader(res.Body, 16<<20)).Decode(out)
}
