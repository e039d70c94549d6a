package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// A failing hello past the free ones is answered after a delay, and a
// delayed answer holds its socket. Only a few are held per address: the
// failures past them are refused at once (rate_limited), so a flood of
// bad hellos holds a handful of sockets, not one per hello until its
// delay ends. (Before, every failure waited out its delay, outside every
// bound: 6000 bad hellos in 1.4 s held 1740 sockets.) The owner's valid
// hello from the same address is answered at once throughout.
func TestDelayedFailuresAreBoundedPerAddress(t *testing.T) {
	const held = 3
	g := testgw.Start(t, func(c *server.AppConfig) {
		// Delays longer than the test: a delayed answer never comes.
		c.AuthLimits = gateway.AuthLimits{Free: 1, Delay: time.Hour, MaxDelay: time.Hour, MaxDelayed: held}
	})
	first := dialFrom(t, g, "127.0.0.2")
	first.writeJSON(helloFrame("wrong", "x"))
	first.refused("auth", websocket.StatusPolicyViolation) // the free one
	const flood = 40
	var bad []*raw
	for range flood {
		r := dialFrom(t, g, "127.0.0.2")
		r.writeJSON(helloFrame("wrong", "x"))
		bad = append(bad, r)
	}
	// All but the held ones are answered, now.
	codes := make(chan string, flood)
	for _, r := range bad {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
			defer cancel()
			_, data, err := r.ws.Read(ctx)
			if err != nil {
				codes <- "no answer: " + err.Error()
				return
			}
			codes <- string(data)
		}()
	}
	for range flood - held {
		if got := <-codes; !strings.Contains(got, `"code":"rate_limited"`) {
			t.Fatalf("a bad hello of the flood was answered %.200s", got)
		}
	}
	if n := metric(t, g, `irisgate_auth_failures_total{dialect="iris",reason="too_many_delayed"}`); n != flood-held {
		t.Errorf("refusals counted: %v, want %d", n, flood-held)
	}
	// The owner, from the same address, gets in at once.
	owner := dialFrom(t, g, "127.0.0.2")
	owner.writeJSON(helloFrame(testgw.Token, "owner"))
	if f, err := owner.read(); err != nil || f.Type != "hello.ack" {
		t.Fatalf("the owner's hello: %v %s", err, f.Raw)
	}
	// Another address has its own few.
	other := dialFrom(t, g, "127.0.0.3")
	other.writeJSON(helloFrame("wrong", "x"))
	other.refused("auth", websocket.StatusPolicyViolation)
	d := g.Dial(t, "phone")
	d.MustDo("ping", client.Lane{}, nil)
}

// The log lines of failed hellos are bounded over all addresses (a spray
// of addresses each gets its free failures logged otherwise), and a
// device id, the client's choice, is cut short in them.
func TestFailedHelloLogIsBounded(t *testing.T) {
	logs, logTo := capture(t)
	g := testgw.Start(t, logTo, func(c *server.AppConfig) {
		c.AuthLimits = gateway.AuthLimits{LogBurst: 5, LogEvery: time.Hour}
	})
	long := strings.Repeat("d", gateway.MaxBindingLen) // the longest valid device_id
	for i := range 12 {
		r := dialFrom(t, g, fmt.Sprintf("127.0.2.%d", i+1))
		r.writeJSON(helloFrame("wrong", long))
		r.refused("auth", websocket.StatusPolicyViolation)
	}
	if n := strings.Count(logs.String(), `msg="auth: failed hello"`); n != 5 {
		t.Errorf("%d lines of failed hellos logged, want the burst of 5", n)
	}
	if strings.Contains(logs.String(), strings.Repeat("d", 100)) {
		t.Error("the whole device id was logged")
	}
	if n := metric(t, g, `irisgate_auth_failures_total{dialect="iris",reason="invalid_token"}`); n != 12 {
		t.Errorf("failures counted: %v, want all 12", n)
	}
}
