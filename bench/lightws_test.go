package bench

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The light client against coder/websocket's server end over loopback:
// every length encoding, a fragmented message, a ping it must answer, its
// own masked writes, and the close handshake.
func TestLightConnSpeaksRFC6455(t *testing.T) {
	sizes := []int{0, 125, 126, 65535, 65536, 200_000}
	echoed := make(chan []byte, 8)
	serverDone := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			serverDone <- err
			return
		}
		c.SetReadLimit(1 << 20)
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		serverDone <- func() error {
			for _, n := range sizes {
				if err := c.Write(ctx, websocket.MessageText, bytes.Repeat([]byte{'a' + byte(n%26)}, n)); err != nil {
					return err
				}
			}
			// A message in three frames.
			wr, err := c.Writer(ctx, websocket.MessageBinary)
			if err != nil {
				return err
			}
			for _, part := range []string{"one ", "two ", "three"} {
				if _, err := wr.Write([]byte(part)); err != nil { // a frame a Write
					return err
				}
			}
			if err := wr.Close(); err != nil {
				return err
			}
			for range 2 {
				_, p, err := c.Read(ctx)
				if err != nil {
					return err
				}
				echoed <- p
			}
			c.CloseRead(ctx)                    // a reader for the pong, as Ping needs
			if err := c.Ping(ctx); err != nil { // answered only by a pong
				return err
			}
			return c.Close(websocket.StatusNormalClosure, "bye")
		}()
	}))
	defer srv.Close()

	ctx, lc := dialTestServer(t, srv, 1<<20)
	for _, n := range sizes {
		typ, p, err := lc.Read(ctx)
		if err != nil || typ != websocket.MessageText || len(p) != n || (n > 0 && p[n-1] != 'a'+byte(n%26)) {
			t.Fatalf("message of %d: type %v, %d bytes, %v", n, typ, len(p), err)
		}
	}
	typ, p, err := lc.Read(ctx)
	if err != nil || typ != websocket.MessageBinary || string(p) != "one two three" {
		t.Fatalf("fragmented message: %v %q %v", typ, p, err)
	}
	for _, m := range []string{"short", strings.Repeat("long ", 14_000)} {
		if err := lc.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
		if got := <-echoed; string(got) != m {
			t.Fatalf("the server read %d bytes, want %d", len(got), len(m))
		}
	}
	err = lc.each(func(websocket.MessageType, []byte) { t.Error("a message after the close") })
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "bye" {
		t.Fatalf("the read loop ended with %v, want the server's close", err)
	}
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v (a ping unanswered or a close not returned?)", err)
	}
}

// A message over the read limit ends the read loop before it is read.
func TestLightConnRefusesAMessageOverItsLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.Write(r.Context(), websocket.MessageText, make([]byte, 5000))
		c.Read(r.Context()) // until the client goes
	}))
	defer srv.Close()
	ctx, lc := dialTestServer(t, srv, 4096)
	if _, _, err := lc.Read(ctx); err == nil || !strings.Contains(err.Error(), "read limit") {
		t.Fatalf("read %v, want the read limit's error", err)
	}
}

func dialTestServer(t *testing.T, srv *httptest.Server, limit int64) (context.Context, *lightConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	lc, _, err := lightDial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.CloseNow() })
	lc.SetReadLimit(limit)
	return ctx, lc
}
