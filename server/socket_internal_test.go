package server

import (
	"errors"
	"io"
	"net"
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
