package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// The socket's write deadline is moved on lazily (armLocked) and never
// cleared, so a connection quiet for longer than the timeout must still
// write, corked or not; and a peer that stops reading still fails a write
// within the timeout.
func TestCorkedConnDeadlineOutlivesAQuietSpell(t *testing.T) {
	ours, peer := net.Pipe()
	defer ours.Close()
	defer peer.Close()
	c := &corkedConn{Conn: ours, timeout: time.Minute}
	got := make(chan []byte, 4)
	go func() {
		for {
			frame := make([]byte, 4) // header and "hi"
			if _, err := io.ReadFull(peer, frame); err != nil {
				close(got)
				return
			}
			got <- frame
		}
	}()
	for _, corked := range []bool{false, true} {
		// As if the last write were an hour ago: the deadline it set has
		// long passed.
		c.mu.Lock()
		c.until = time.Now().Add(-time.Hour)
		c.mu.Unlock()
		ours.SetWriteDeadline(time.Now().Add(-time.Hour))
		if corked {
			c.cork()
		}
		if err := c.writeMessage(false, []byte("hi")); err != nil {
			t.Fatalf("corked %v: a write after a quiet spell failed: %v", corked, err)
		}
		if corked {
			if err := c.uncork(); err != nil {
				t.Fatalf("uncork after a quiet spell: %v", err)
			}
		}
		if b := <-got; string(b[2:]) != "hi" {
			t.Fatalf("corked %v: the peer read %q", corked, b)
		}
	}
}

func TestCorkedConnWriteToAStuckPeerTimesOut(t *testing.T) {
	ours, peer := net.Pipe() // unbuffered: a write waits for a read
	defer ours.Close()
	defer peer.Close()
	const timeout = 100 * time.Millisecond
	c := &corkedConn{Conn: ours, timeout: timeout}
	start := time.Now()
	err := c.writeMessage(false, []byte("nobody reads this"))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a write nobody reads returned %v, want a deadline error", err)
	}
	if waited := time.Since(start); waited > timeout+5*time.Second {
		t.Fatalf("the write waited %v with a timeout of %v", waited, timeout)
	}
}

// writeUpgrade refuses a header with a line break rather than split the
// response, and writes the rest in one piece.
func TestWriteUpgradeRefusesALineBreak(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() { errc <- writeUpgrade(a, http.Header{"X-Evil": {"v\r\nSet-Cookie: x"}}) }()
	if err := <-errc; err == nil {
		t.Fatal("a value with a line break was written")
	}
	go func() { errc <- writeUpgrade(a, http.Header{"Upgrade": {"websocket"}}) }()
	got := make([]byte, 64)
	n, _ := io.ReadFull(b, got[:len("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")])
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if s := string(got[:n]); s != "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n" {
		t.Fatalf("wrote %q", s)
	}
}
