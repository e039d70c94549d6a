package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// The sidebyside scenario runs Centrifugo (github.com/centrifugal/centrifugo,
// v6) as a child process and speaks its JSON protocol over WebSocket with
// the library irisgate uses. Centrifugo is not a dependency: the bench finds
// a binary (--centrifugo PATH, or "centrifugo" on PATH) and writes it a
// config file. What the protocol looks like is read from
// github.com/centrifugal/protocol (definitions/client.proto) and
// centrifuge's client.go; the config keys from "centrifugo defaultconfig".
//
// JSON protocol v2, as used here: a command is {"id":N,"connect":{…}}
// (or subscribe, publish, history, rpc); its reply {"id":N,"connect":{…}}
// or {"id":N,"error":{"code":…,"message":…}}; a publication reaches a
// subscriber as {"push":{"channel":…,"pub":{"data":…,"offset":N}}}.
// Several replies may share one WebSocket message, one a line. The server
// pings with {} and wants {} back (protocol v2 has no client-initiated
// ping: centrifuge answers a "ping" command with a disconnect, so the
// minimal round trip is Centrifugo's built-in RPC ping extension,
// {"rpc":{"method":"ping"}}, enabled in the config).

const (
	cfChannel = "bench:room" // the one channel every device subscribes to
	// The child listens on loopback only; the secrets are public.
	cfSecret = "irisgate-bench-centrifugo-hmac-secret"
	cfAPIKey = "irisgate-bench-centrifugo-api-key"
	cfUser   = "bench-person" // every device is this one person's
)

// FindCentrifugo returns the Centrifugo binary to run: path when set (it
// must exist), else "centrifugo" on PATH. ok is false when none is found
// and none was asked for.
func FindCentrifugo(path string) (bin string, ok bool, err error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", false, fmt.Errorf("centrifugo binary %q: %w", path, err)
		}
		return p, true, nil
	}
	p, err := exec.LookPath("centrifugo")
	if err != nil {
		return "", false, nil
	}
	return p, true, nil
}

// centrifugoVersion is what "centrifugo version" prints (one line).
func centrifugoVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	s, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return s
}

// cfConfig is the child's configuration: memory engine and broker (the
// default), one namespace whose channels keep history in memory with
// recovery and positioning forced, clients that may subscribe, publish and
// read history, HMAC connection tokens, the server HTTP API with a key,
// and the RPC ping extension. history is the stream's size: every
// publication of a run fits, so recovery never falls off its end.
func cfConfig(addr string, history int) ([]byte, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	limit := max(history, 1000)
	cfg := map[string]any{
		"http_server": map[string]any{"address": host, "port": p},
		"log":         map[string]any{"level": "error"},
		"health":      map[string]any{"enabled": true},
		"usage_stats": map[string]any{"disabled": true},
		"shutdown":    map[string]any{"timeout": "3s"},
		"client": map[string]any{
			"token": map[string]any{"hmac_secret_key": cfSecret},
			// Defaults are 300: a recovery of 1,000 would be refused.
			"history_max_publication_limit":  limit,
			"recovery_max_publication_limit": limit,
		},
		"channel": map[string]any{"namespaces": []any{map[string]any{
			"name":                         "bench",
			"history_size":                 history,
			"history_ttl":                  "600s",
			"force_recovery":               true,
			"force_positioning":            true,
			"allow_subscribe_for_client":   true,
			"allow_publish_for_subscriber": true,
			"allow_publish_for_client":     true,
			"allow_history_for_subscriber": true,
			"allow_history_for_client":     true,
		}}},
		"http_api": map[string]any{"key": cfAPIKey},
		"rpc":      map[string]any{"ping": map[string]any{"enabled": true, "method": "ping"}},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// cfToken is an HS256 connection JWT for the bench's one person.
func cfToken() string {
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	c := enc.EncodeToString(fmt.Appendf(nil, `{"sub":%q,"exp":%d}`, cfUser, time.Now().Add(24*time.Hour).Unix()))
	mac := hmac.New(sha256.New, []byte(cfSecret))
	mac.Write([]byte(h + "." + c))
	return h + "." + c + "." + enc.EncodeToString(mac.Sum(nil))
}

// startCentrifugo starts a fresh Centrifugo child with a stream of history
// publications and waits until it answers /health. The returned child is
// stopped like an irisgate one (its cpu and stop methods work alike).
func startCentrifugo(ctx context.Context, o *Options, history int) (*childProc, string, error) {
	bin := o.SideBySide.Centrifugo
	if bin == "" {
		return nil, "", errors.New("no centrifugo binary")
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp(o.TempDir, "irisgate-bench-centrifugo-")
	if err != nil {
		return nil, "", err
	}
	cfg, err := cfConfig(addr, history)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	c := &childProc{addr: addr, url: "ws://" + addr + "/connection/websocket", base: "http://" + addr, dir: dir,
		stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	c.cmd = exec.Command(bin, "--config", filepath.Join(dir, "config.json"))
	c.cmd.Dir = dir
	c.cmd.Stdout = c.stderr
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { c.exited <- c.cmd.Wait() }()
	if err := cfWaitHealthy(ctx, c); err != nil {
		c.stop()
		return nil, "", fmt.Errorf("centrifugo child: %w; its output: %.500s", err, c.stderr.String())
	}
	return c, cfToken(), nil
}

func cfWaitHealthy(ctx context.Context, c *childProc) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-c.exited:
			c.exited <- err // stop waits on it again
			return fmt.Errorf("exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not healthy within 30s")
}

// cfAPI calls a method of Centrifugo's server HTTP API and returns the
// body of its answer.
func cfAPI(ctx context.Context, hc *http.Client, base, method string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/"+method, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", cfAPIKey)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("POST /api/%s: %s: %.300s", method, resp.Status, b)
	}
	// The API answers 200 with {"error":…} for a refused call.
	if bytes.HasPrefix(b, []byte(`{"error"`)) {
		return b, fmt.Errorf("POST /api/%s: %.300s", method, b)
	}
	return b, nil
}

// cfClients is how many clients the child holds (server API "info").
func cfClients(ctx context.Context, c *childProc) (int, error) {
	b, err := cfAPI(ctx, http.DefaultClient, c.base, "info", []byte(`{}`))
	if err != nil {
		return 0, err
	}
	var info struct {
		Result struct {
			Nodes []struct {
				NumClients int `json:"num_clients"`
			} `json:"nodes"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &info); err != nil || len(info.Result.Nodes) == 0 {
		return 0, fmt.Errorf("info: %.300s", b)
	}
	return info.Result.Nodes[0].NumClients, nil
}

// cfWrite writes one command (or several, one a line) to a device.
func cfWrite(ctx context.Context, d *rawDev, b []byte) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.ws.Write(ctx, websocket.MessageText, b)
}

// cfRequest writes one command and reads until its reply (before serve
// runs: nothing else reads the connection). It returns the reply's line.
func cfRequest(ctx context.Context, d *rawDev, id int64, cmd []byte) ([]byte, error) {
	if err := cfWrite(ctx, d, cmd); err != nil {
		return nil, err
	}
	for {
		_, data, err := d.ws.Read(ctx)
		if err != nil {
			return nil, err
		}
		for line := range cfLines(data) {
			if len(line) == 2 { // a server ping, {}
				if err := cfWrite(ctx, d, []byte(`{}`)); err != nil {
					return nil, err
				}
				continue
			}
			if cfID(line) != id {
				continue
			}
			if bytes.Contains(line, []byte(`"error":{`)) {
				return line, fmt.Errorf("centrifugo: %.300s", line)
			}
			return line, nil
		}
	}
}

// cfLines yields the replies of one WebSocket message (one a line).
func cfLines(data []byte) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(data) > 0 {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			if len(line) > 0 && !yield(line) {
				return
			}
		}
	}
}

var keyCfID = []byte(`{"id":`)

// cfID is the command id a reply answers, 0 for a push or a ping.
func cfID(b []byte) int64 {
	if !bytes.HasPrefix(b, keyCfID) {
		return 0
	}
	n, _ := leadingInt(b[len(keyCfID):])
	return n
}

// cfServe reads the device's messages until the connection ends, answering
// server pings and calling fn with every other reply or push.
func cfServe(d *rawDev, fn func(line []byte)) {
	d.serve(func(data []byte) {
		for line := range cfLines(data) {
			if len(line) == 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				cfWrite(ctx, d, []byte(`{}`))
				cancel()
				continue
			}
			if fn != nil {
				fn(line)
			}
		}
	})
}

// cfDial connects a device and waits for its connect reply.
func cfDial(ctx context.Context, url, token, name string) (*rawDev, error) {
	ws, _, err := dialWS(ctx, url, nil) // the same client as Iris devices'
	if err != nil {
		return nil, err
	}
	d := &rawDev{id: name, ws: ws, done: make(chan struct{})}
	// The connect is request 1; newID hands out 2, 3… after it.
	if _, err := cfRequest(ctx, d, 1, fmt.Appendf(nil, `{"id":1,"connect":{"token":%q,"name":"irisgate-bench"}}`, token)); err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return d, nil
}

// cfPosition is where a subscription's stream stood (or was recovered to).
type cfPosition struct {
	Offset    uint64 `json:"offset"`
	Epoch     string `json:"epoch"`
	Recovered bool   `json:"recovered"`
	Pubs      []struct {
		Offset uint64 `json:"offset"`
	} `json:"publications"`
}

// cfSubscribe subscribes d to the bench channel, recovering from pos when
// it is set, and returns the subscribe reply's position and when the reply
// was read (before it is decoded: a recovery's publications are counted
// after the clock stops, as a sync's frames are counted as they come).
func cfSubscribe(ctx context.Context, d *rawDev, from *cfPosition) (cfPosition, time.Time, error) {
	var pos cfPosition
	id := d.newID()
	cmd := fmt.Appendf(nil, `{"id":%d,"subscribe":{"channel":%q}}`, id, cfChannel)
	if from != nil {
		cmd = fmt.Appendf(nil, `{"id":%d,"subscribe":{"channel":%q,"recover":true,"offset":%d,"epoch":%q}}`, id, cfChannel, from.Offset, from.Epoch)
	}
	line, err := cfRequest(ctx, d, id, cmd)
	at := time.Now()
	if err != nil {
		return pos, at, fmt.Errorf("subscribe: %w", err)
	}
	var r struct {
		Subscribe *cfPosition `json:"subscribe"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.Subscribe == nil {
		return pos, at, fmt.Errorf("subscribe: unexpected reply %.300s", line)
	}
	return *r.Subscribe, at, nil
}

// cfDialSub connects a device and subscribes it to the bench channel.
func cfDialSub(token string) func(ctx context.Context, url, name string) (*rawDev, error) {
	return func(ctx context.Context, url, name string) (*rawDev, error) {
		d, err := cfDial(ctx, url, token, name)
		if err != nil {
			return nil, err
		}
		if _, _, err := cfSubscribe(ctx, d, nil); err != nil {
			d.ws.CloseNow()
			return nil, err
		}
		return d, nil
	}
}
