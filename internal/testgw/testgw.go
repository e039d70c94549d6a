// Package testgw starts real gateways for tests: a temporary data
// directory with a real SQLite file (or a real PostgreSQL database:
// OnPostgres), a loopback listener and real WebSocket clients whose every
// received frame is checked against the specification's schema.
package testgw

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/irisschema"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store"
)

// Token is the fixed token test gateways accept.
const Token = "test-token"

// Wait is how long a test waits for an expected frame.
const Wait = 10 * time.Second

var (
	schemaOnce sync.Once
	schema     *irisschema.Validator
	schemaErr  error
)

// Schema returns the compiled Iris schema (docs/iris-v1.schema.json).
func Schema(t testing.TB) *irisschema.Validator {
	schemaOnce.Do(func() {
		schema, schemaErr = irisschema.Own()
	})
	if schemaErr != nil {
		t.Fatalf("loading the Iris schema: %v", schemaErr)
	}
	return schema
}

// GW is a running gateway.
type GW struct {
	App  *server.App
	URL  string
	Dir  string
	Addr string
	t    testing.TB
}

// Start runs a gateway in a temporary directory until the test ends.
// edit may change its configuration (the echo agent has no delay by
// default).
func Start(t testing.TB, edit ...func(*server.AppConfig)) *GW {
	t.Helper()
	return StartIn(t, t.TempDir(), edit...)
}

// StartIn runs a gateway on an existing data directory.
func StartIn(t testing.TB, dir string, edit ...func(*server.AppConfig)) *GW {
	t.Helper()
	cfg := server.AppConfig{
		DataDir: dir, Token: Token,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	cfg.Agent, cfg.ShowReasoning = &agent.Echo{}, true
	for _, e := range edit {
		e(&cfg)
	}
	app, err := server.Open(cfg)
	if err != nil {
		t.Fatalf("starting gateway: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); app.Serve(ln) }()
	g := &GW{App: app, URL: "ws://" + ln.Addr().String() + "/ws", Dir: dir, Addr: ln.Addr().String(), t: t}
	t.Cleanup(func() {
		g.Close()
		<-served
	})
	return g
}

// OnPostgres is an edit of Start and StartIn that keeps the gateway's
// state in a fresh PostgreSQL database on the tests' server (package
// pgtest: the test binary's TestMain must be pgtest.Main), dropped when
// t ends. Given to StartIn again, the same edit reopens that database:
// a restart.
func OnPostgres(t testing.TB) func(*server.AppConfig) {
	t.Helper()
	url := pgtest.DB(t)
	return func(c *server.AppConfig) { c.Store = url }
}

// SQLite is the gateway's store as SQLite's, for a test that reads what
// only SQLite's store has (its outbox rows, its pruning); it fails a
// gateway on PostgreSQL.
func (g *GW) SQLite(t testing.TB) *store.Store {
	t.Helper()
	st, ok := g.App.Store.(*store.Store)
	if !ok {
		t.Fatalf("this test reads SQLite's store, and the gateway runs on %T", g.App.Store)
	}
	return st
}

// WaitOffline waits until the gateway has let go of every connection of
// the device (the hub forgets one once its reader ended), or fails.
func (g *GW) WaitOffline(t testing.TB, deviceID string) {
	t.Helper()
	deadline := time.NewTimer(Wait)
	defer deadline.Stop()
	for {
		left := g.App.GW.Presence() // before the check: a change after it closes this
		if !g.App.Hub.Online(deviceID) {
			return
		}
		select {
		case <-left:
		case <-deadline.C:
			t.Fatalf("%s still online after %v", deviceID, Wait)
		}
	}
}

// WaitPush waits until cond holds, checked at each change of the
// gateway's push queue (a push queued or tried), or fails.
func (g *GW) WaitPush(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(Wait)
	defer deadline.Stop()
	for {
		changed := g.App.Push.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s did not happen within %v", what, Wait)
		}
	}
}

// Close stops the gateway gracefully (idempotent).
func (g *GW) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.App.Close(ctx); err != nil {
		g.t.Errorf("closing gateway: %v", err)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Device is a connected test device.
type Device struct {
	*client.Conn
	ID   string
	t    testing.TB
	v    *irisschema.Validator
	mu   sync.Mutex
	Seen []client.Frame // every frame read so far
}

// Dial connects a device with the test token.
func (g *GW) Dial(t testing.TB, deviceID string) *Device {
	t.Helper()
	d, err := g.DialErr(t, deviceID, Token)
	if err != nil {
		t.Fatalf("dial %s: %v", deviceID, err)
	}
	return d
}

// DialErr connects a device with a token, returning the dial error.
func (g *GW) DialErr(t testing.TB, deviceID, token string) (*Device, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	c, err := client.Dial(ctx, g.URL, client.Options{Token: token, DeviceID: deviceID, DeviceName: deviceID})
	if err != nil {
		return nil, err
	}
	d := &Device{Conn: c, ID: deviceID, t: t, v: Schema(t)}
	t.Cleanup(func() {
		c.CloseNow()
		for f := range c.Events() { // whatever was never read is checked too
			d.check(f)
		}
	})
	return d, nil
}

// In returns the device bound to t, for use inside a subtest: a failure
// must end the subtest, not its parent.
func (d *Device) In(t testing.TB) *Device {
	return &Device{Conn: d.Conn, ID: d.ID, t: t, v: d.v}
}

func (d *Device) check(f client.Frame) {
	d.t.Helper()
	if f.Binary {
		return
	}
	if err := d.v.Server(f.Raw); err != nil {
		d.t.Errorf("device %s got a frame that breaks the schema: %v", d.ID, err)
	}
}

// Next returns the next frame, failing the test after Wait.
func (d *Device) Next() client.Frame {
	d.t.Helper()
	f, ok := d.NextWithin(Wait)
	if !ok {
		d.t.Fatalf("device %s: no frame within %v", d.ID, Wait)
	}
	return f
}

// NextWithin returns the next frame or false after timeout (or when the
// connection ended).
func (d *Device) NextWithin(timeout time.Duration) (client.Frame, bool) {
	d.t.Helper()
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	select {
	case f, ok := <-d.Events():
		if !ok {
			return f, false
		}
		d.check(f)
		d.mu.Lock()
		d.Seen = append(d.Seen, f)
		d.mu.Unlock()
		return f, true
	case <-tm.C:
		return client.Frame{}, false
	}
}

// Expect reads frames until one of type typ for which match (nil: any)
// holds, and returns it; it fails the test after Wait.
func (d *Device) Expect(typ irisv1.FrameType, match func(client.Frame) bool) client.Frame {
	d.t.Helper()
	deadline := time.Now().Add(Wait)
	var skipped []string
	for {
		left := time.Until(deadline)
		f, ok := d.NextWithin(max(left, 0))
		if !ok {
			d.t.Fatalf("device %s: no %s frame within %v (skipped: %s)", d.ID, typ, Wait, strings.Join(skipped, ", "))
		}
		if f.Type == typ && (match == nil || match(f)) {
			return f
		}
		skipped = append(skipped, f.Type)
	}
}

// Quiet asserts that no frame of type typ arrives within d.
func (d *Device) Quiet(typ irisv1.FrameType, within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		f, ok := d.NextWithin(left)
		if !ok {
			return
		}
		if f.Type == typ {
			d.t.Fatalf("device %s: unexpected %s frame: %s", d.ID, typ, f.Raw)
		}
	}
}

// Do sends a request and returns its answer (validated), failing on
// transport errors; a server error is returned.
func (d *Device) Do(typ irisv1.FrameType, lane client.Lane, payload any) (client.Frame, error) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	f, err := d.Request(ctx, typ, lane, payload)
	if err != nil {
		if _, ok := err.(*client.ServerError); !ok {
			d.t.Fatalf("device %s: %s: %v", d.ID, typ, err)
		}
	}
	return f, err
}

// MustDo is Do that fails the test on a server error too.
func (d *Device) MustDo(typ irisv1.FrameType, lane client.Lane, payload any) client.Frame {
	d.t.Helper()
	f, err := d.Do(typ, lane, payload)
	if err != nil {
		d.t.Fatalf("device %s: %s: %v", d.ID, typ, err)
	}
	return f
}

// P decodes a frame's payload into a map.
func P(t testing.TB, f client.Frame) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(f.Payload, &m); err != nil {
		t.Fatalf("payload of %s: %v", f.Type, err)
	}
	return m
}

// Str is a payload field as a string.
func Str(t testing.TB, f client.Frame, key string) string {
	t.Helper()
	return fmt.Sprint(P(t, f)[key])
}
