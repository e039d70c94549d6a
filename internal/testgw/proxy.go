package testgw

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a gateway so a test can cut them all
// at once, as a network drop would.
type Proxy struct {
	URL    string
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	paused bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to the gateway until the test ends.
func (g *GW) NewProxy(t testing.TB) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "ws://" + ln.Addr().String() + "/ws", ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			paused := p.paused
			p.mu.Unlock()
			if paused {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", g.Addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.Cut(); p.wg.Wait() })
	return p
}

// Cut drops every connection through the proxy.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Pause refuses new connections (as an unreachable network would) until
// Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Resume lets connections through again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}
