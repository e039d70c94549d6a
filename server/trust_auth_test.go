package server_test

// Issue 12.4 (no lock-out of valid devices) and 12.5 (one device
// identity for both dialects), over real sockets.

import (
	"context"
	"fmt"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// quickThrottle keeps the delays of throttled failures short for tests.
func quickThrottle(c *server.AppConfig) {
	c.AuthLimits = gateway.AuthLimits{Delay: 20 * time.Millisecond, MaxDelay: 40 * time.Millisecond}
}

// TestStrangerCannotLockOutDevices: on main, ten bad hellos from one
// address locked it out for a minute, valid tokens included; behind a
// proxy that is every device. Now a stranger's failures from the owner's
// own address leave the owner's devices free to connect, in both
// dialects, and are logged and counted.
func TestStrangerCannotLockOutDevices(t *testing.T) {
	logs, logTo := capture(t)
	g := mobileGW(t, quickThrottle, logTo)
	const guesses = 15
	for i := range guesses {
		r := dialRaw(t, g)
		r.writeJSON(helloFrame(fmt.Sprintf("guess-iris-%d", i), "laptop"))
		r.refused("auth", websocket.StatusPolicyViolation)
		p := dialPhone(t, g, nil)
		p.send(mhello(fmt.Sprintf("guess-mobile-%d", i), "tel-1", "P"))
		p.refused("auth_failed")
	}
	// The owner's devices, from the same address, right after.
	laptop := g.Dial(t, "laptop")
	laptop.MustDo("ping", client.Lane{}, nil)
	connectPhone(t, g, "tel-1").barrier()

	// A failure past the free ones was answered only after its delay.
	start := time.Now()
	r := dialRaw(t, g)
	r.writeJSON(helloFrame("one-more-guess", "laptop"))
	r.refused("auth", websocket.StatusPolicyViolation)
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("a throttled failure was answered after %v", d)
	}

	if n := metric(t, g, `irisgate_auth_failures_total{dialect="iris",reason="invalid_token"}`); n != guesses+1 {
		t.Errorf("iris failures counted: %v", n)
	}
	if n := metric(t, g, `irisgate_auth_failures_total{dialect="mobile",reason="invalid_token"}`); n != guesses {
		t.Errorf("mobile failures counted: %v", n)
	}
	// One address, one lock-out: its 11th failure, a phone's here.
	if n := metric(t, g, `irisgate_auth_lockouts_total{dialect="iris"}`) + metric(t, g, `irisgate_auth_lockouts_total{dialect="mobile"}`); n != 1 {
		t.Errorf("lock-outs counted: %v", n)
	}
	out := logs.String()
	for _, want := range []string{
		`msg="auth: failed hello" addr=127.0.0.1 dialect=iris reason=invalid_token`,
		`msg="auth: failed hello" addr=127.0.0.1 dialect=mobile reason=invalid_token`,
		`msg="auth: too many failed hellos from one address: its failures are delayed now" addr=127.0.0.1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if strings.Contains(out, "guess-") || strings.Contains(out, testgw.Token) {
		t.Errorf("a token reached the log:\n%s", out)
	}
	// Past the free failures the log holds the lock-out, not each guess.
	if n := strings.Count(out, `msg="auth: failed hello"`); n != 10 {
		t.Errorf("%d failed hellos logged, want the 10 free ones", n)
	}
}

// TestTrustedProxyNamesTheClient: failures are counted by the client a
// trusted proxy names, so one stranger behind the proxy does not slow
// everyone else's typos; an untrusted peer's header is ignored.
func TestTrustedProxyNamesTheClient(t *testing.T) {
	logs, logTo := capture(t)
	g := testgw.Start(t, quickThrottle, logTo, func(c *server.AppConfig) {
		c.Server.TrustedProxies = mustPrefixes(t, "127.0.0.0/8")
	})
	// The proxy names each client as nginx's "proxy_add_x_forwarded_for"
	// would (the test says who the client is in X-Test-Client).
	proxy := reverseProxy(t, g, func(pr *httputil.ProxyRequest) {
		pr.Out.Header.Set("X-Forwarded-For", pr.In.Header.Get("X-Test-Client"))
		pr.Out.Header.Del("X-Test-Client")
	})
	hello := func(client, token, device string) *raw {
		r := dialRawURL(t, "ws://"+proxy+"/ws", &websocket.DialOptions{HTTPHeader: map[string][]string{"X-Test-Client": {client}}})
		r.writeJSON(helloFrame(token, device))
		return r
	}
	for i := range 12 {
		hello("198.51.100.1", fmt.Sprint("guess-", i), "x").refused("auth", websocket.StatusPolicyViolation)
	}
	hello("198.51.100.2", "a typo", "y").refused("auth", websocket.StatusPolicyViolation)
	if f, err := hello("198.51.100.1", testgw.Token, "laptop").read(); err != nil || f.Type != "hello.ack" {
		t.Fatalf("the valid device behind the stranger's address: %v %v", f.Type, err)
	}
	out := logs.String()
	if !strings.Contains(out, `failures are delayed now" addr=198.51.100.1 `) {
		t.Errorf("the stranger was not throttled by its own address:\n%s", out)
	}
	if !strings.Contains(out, `msg="auth: failed hello" addr=198.51.100.2 `) || strings.Contains(out, `delayed now" addr=198.51.100.2`) {
		t.Errorf("the other client's typo was not counted as its own:\n%s", out)
	}
	if strings.Contains(out, "addr=127.0.0.1") {
		t.Errorf("failures were counted by the proxy's address:\n%s", out)
	}

	// Without the proxy trusted, a header names nobody: a client cannot
	// pick the address its guesses count against.
	logs2, logTo2 := capture(t)
	g2 := testgw.Start(t, logTo2)
	r := dialRawURL(t, g2.URL, &websocket.DialOptions{HTTPHeader: map[string][]string{"X-Forwarded-For": {"192.0.2.99"}}})
	r.writeJSON(helloFrame("guess", "x"))
	r.refused("auth", websocket.StatusPolicyViolation)
	if out := logs2.String(); !strings.Contains(out, "addr=127.0.0.1 ") || strings.Contains(out, "192.0.2.99") {
		t.Errorf("an untrusted X-Forwarded-For was believed:\n%s", out)
	}
}

// TestIrisRespectsDeviceBindings: on main an Iris hello could claim a
// device id bound to another token (Hermes Mobile refused it).
func TestIrisRespectsDeviceBindings(t *testing.T) {
	g := testgw.Start(t)
	ctx := context.Background()
	bound, _, err := gateway.CreateToken(ctx, g.App.Store, "laptop", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.DialErr(t, "laptop", testgw.Token)
	wantCode(t, err, "auth")
	if !strings.Contains(err.Error(), "bound to another token") {
		t.Fatalf("error %v", err)
	}
	if _, err := g.DialErr(t, "laptop", bound); err != nil {
		t.Fatalf("the laptop with its own token: %v", err)
	}
}

// TestIrisCannotReplaceAPhone: on main an Iris hello with device_id
// "mobile:tel-1" replaced the phone's connection (and took its identity).
func TestIrisCannotReplaceAPhone(t *testing.T) {
	g := mobileGW(t)
	phone := connectPhone(t, g, "tel-1")
	_, err := g.DialErr(t, "mobile:tel-1", testgw.Token)
	wantCode(t, err, "auth")
	// The phone is still connected and served.
	phone.send(map[string]any{"t": "ping", "ts": 7})
	if f := phone.expect("pong", nil); f.N("ts") != 7 {
		t.Fatalf("pong %v", f)
	}
	if fs := phone.barrier(); countT(fs, "error") != 0 {
		t.Fatalf("the phone got %s", mtypes(fs))
	}
}
