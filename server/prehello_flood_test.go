package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// ownerRTT is the owner's round trip in the flood tests: the time between
// the gateway's answer to the upgrade and the hello reaching it.
const ownerRTT = 100 * time.Millisecond

// squat floods url with connections that never say hello, from workers
// goroutines dialling as fast as they can with opts(i) (nil: plainly),
// each connection held until the gateway closes it. It stops when the
// test ends.
func squat(t *testing.T, url string, workers int, opts func(i int) *websocket.DialOptions) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range workers {
		var o *websocket.DialOptions
		if opts != nil {
			o = opts(i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, _, err := websocket.Dial(ctx, url, o)
				if err != nil {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.Read(ctx) // until the gateway closes it, or the test ends
					c.CloseNow()
				}()
			}
		}()
	}
}

// fromAddr dials from a loopback address of its own.
func fromAddr(ip string) *websocket.DialOptions {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}}
}

// ownerHello connects to url as the owner would over a link with
// ownerRTT: it says hello one round trip after the upgrade. It returns
// whether the gateway answered hello.ack, and what it answered otherwise.
func ownerHello(t *testing.T, url string, opts *websocket.DialOptions) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return false, "dial: " + err.Error()
	}
	defer c.CloseNow()
	// The round trip the test models, not a wait for an event.
	time.Sleep(ownerRTT)
	hello, _ := json.Marshal(helloFrame(testgw.Token, "owner"))
	if err := c.Write(ctx, websocket.MessageText, hello); err != nil {
		return false, "write: " + err.Error()
	}
	_, data, err := c.Read(ctx)
	if err != nil {
		return false, "read: " + err.Error()
	}
	if strings.Contains(string(data), `"hello.ack"`) {
		return true, ""
	}
	return false, string(data)
}

// Strangers at 8 addresses flood the gateway with connections that never
// say hello; the owner, at an address of its own, says hello a round trip
// after each upgrade. Its connections are never the ones pushed out to
// make room (its address holds less than its fair share): every hello
// gets in. (Before, the oldest connection of all was pushed out, and the
// flood's pace cut the owner's short before its hello arrived.)
func TestOwnerGetsInDuringAFloodFromManyAddresses(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.Server.MaxWaiting, c.Server.MaxWaitingPerAddr = 64, 16 })
	squat(t, g.URL, 32, func(i int) *websocket.DialOptions { return fromAddr(fmt.Sprintf("127.0.1.%d", 1+i%8)) })
	waitMetricAbove(t, g, `irisgate_limited_total{bound="prehello"}`, 200)
	owner := fromAddr("127.0.0.3")
	for i := range 10 {
		if ok, why := ownerHello(t, g.URL, owner); !ok {
			t.Fatalf("the owner's hello %d: %s", i, why)
		}
	}
}

// Behind a reverse proxy that is not in --trusted-proxies every client
// has the proxy's address: a stranger's flood and the owner share one
// address's bounds. A connection is not pushed out by newer ones of its
// address before it has had its grace, and an address that said a valid
// hello is held only to the bound in all: the owner, saying hello a round
// trip after the upgrade, gets in again and again while the flood goes on.
// (Before, each of the flood's connections pushed out the oldest of the
// address, and no hello arrived in time.) The operator is told to trust
// the proxy.
func TestOwnerGetsInBehindAnUntrustedProxyDuringAFlood(t *testing.T) {
	logs, logTo := capture(t)
	g := testgw.Start(t, logTo, func(c *server.AppConfig) {
		c.Server.MaxWaiting, c.Server.MaxWaitingPerAddr, c.Server.HelloGrace = 64, 16, 300*time.Millisecond
	})
	proxy := "ws://" + reverseProxy(t, g, func(pr *httputil.ProxyRequest) { pr.SetXForwarded() }) + "/ws"
	squat(t, proxy, 8, nil)
	waitMetricAbove(t, g, `irisgate_limited_total{bound="prehello"}`, 200)
	const want = 5
	ok, tries := 0, 0
	var last string
	deadline := time.Now().Add(3 * testgw.Wait)
	for ok < want && time.Now().Before(deadline) {
		tries++
		if in, why := ownerHello(t, proxy, nil); in {
			ok++
		} else {
			last = why
		}
	}
	if ok < want {
		t.Fatalf("the owner got in %d times in %d tries, want %d (last refusal: %.120s)", ok, tries, want, last)
	}
	t.Logf("the owner got in %d times in %d tries", ok, tries)
	if !strings.Contains(logs.String(), "not in --trusted-proxies") {
		t.Error("no warning that the proxy is not trusted")
	}
}

// waitMetricAbove waits until a series of the gateway's /metrics passes v.
func waitMetricAbove(t *testing.T, g *testgw.GW, series string, v float64) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testgw.Wait)
	for metric(t, g, series) <= v {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s = %v, want more than %v", series, metric(t, g, series), v)
		}
	}
}
