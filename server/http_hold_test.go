package server_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// rawHTTP opens a TCP connection to g from a loopback address of its own.
func rawHTTP(t *testing.T, g *testgw.GW, from string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", g.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// bodyless writes a request's head announcing a body that never comes.
func bodyless(t *testing.T, c net.Conn, method, path string, hdr ...string) {
	t.Helper()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n%s\r\n", method, path, strings.Join(hdr, ""))
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
}

// answerThenClose reads c's response and reports its status and whether
// the gateway then closed the connection (within testgw.Wait).
func answerThenClose(t *testing.T, c net.Conn) (int, bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testgw.Wait))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	_, err = br.ReadByte()
	return res.StatusCode, err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// closedWithin reports whether the gateway closes c, unanswered or not,
// within testgw.Wait.
func closedWithin(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(testgw.Wait))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: closed; a deadline error: still open
}

// A refused request that announced a body is answered and its connection
// closed, whatever refused it: net/http would otherwise wait for the body
// to reuse the connection, for ever when it never comes. (Before, 3000
// such POSTs held 1301 sockets after 42 s.)
func TestRefusedRequestsCloseTheirConnection(t *testing.T) {
	g := testgw.Start(t, withDeliverToken)
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		status             int
	}{
		{"no delivery token", "POST", "/api/send", []string{"Content-Type: application/json\r\n"}, 403},
		{"cross-site page", "POST", "/api/send", []string{"Origin: http://evil.example\r\n", "Sec-Fetch-Site: cross-site\r\n"}, 403},
		{"wrong content type", "POST", "/api/send", []string{"Authorization: Bearer deliver-secret\r\n", "Content-Type: text/plain\r\n"}, 415},
		{"no such path", "GET", "/nowhere.js", nil, 404},
		{"wrong method", "POST", "/healthz", nil, 405},
	} {
		c := rawHTTP(t, g, "127.0.0.2")
		bodyless(t, c, tc.method, tc.path, tc.hdr...)
		status, closed := answerThenClose(t, c)
		if status != tc.status || !closed {
			t.Errorf("%s: %d, closed %v; want %d and the connection closed", tc.name, status, closed, tc.status)
		}
	}
}

// A body that never arrives is given up on after BodyTimeout; one that
// keeps arriving, however long it takes, is read to its end.
func TestRequestBodiesMustArrive(t *testing.T) {
	g := testgw.Start(t, withDeliverToken, func(c *server.AppConfig) { c.Server.BodyTimeout = 300 * time.Millisecond })
	c := rawHTTP(t, g, "127.0.0.2")
	bodyless(t, c, "POST", "/api/send", "Authorization: Bearer deliver-secret\r\n", "Content-Type: application/json\r\n")
	if !closedWithin(c) {
		t.Fatal("a body that never came is still waited for")
	}

	// A file sent in 8 KiB steps, 100 ms apart: 2 s in all, past the
	// timeout, but faster than the slowest rate allowed.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("chat_id", "default")
	fw, _ := mw.CreateFormFile("file", "slow.bin")
	fw.Write(bytes.Repeat([]byte("s"), 160<<10))
	mw.Close()
	pr, pw := io.Pipe()
	go func() {
		b := body.Bytes()
		for len(b) > 0 {
			n := min(8<<10, len(b))
			if _, err := pw.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
			time.Sleep(100 * time.Millisecond) // the sender's pace
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.Addr+"/api/send", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer deliver-secret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if out, _ := io.ReadAll(res.Body); res.StatusCode != 200 {
		t.Fatalf("the slow upload: %d %s", res.StatusCode, out)
	}
}

// One client address has at most MaxRequestsPerAddr requests served at
// once: the next is refused at once (429), another address is served.
func TestRequestsBeingServedAreBoundedPerAddress(t *testing.T) {
	g := testgw.Start(t, withDeliverToken, func(c *server.AppConfig) { c.Server.MaxRequestsPerAddr = 4 })
	for range 4 { // held: their bodies never come
		bodyless(t, rawHTTP(t, g, "127.0.0.2"), "POST", "/api/send", "Authorization: Bearer deliver-secret\r\n", "Content-Type: application/json\r\n")
	}
	// The four reach their handlers in their own time on a loaded
	// machine: probe once all are held. (Fewer held at the deadline means
	// one was lost: let go before its body came.)
	deadline := time.Now().Add(testgw.Wait)
	for n := 0; n < 4; n = g.App.Srv.ServingFrom("127.0.0.2") {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 4 bodyless requests are being served after %v, want 4 held", n, testgw.Wait)
		}
		<-time.After(time.Millisecond)
	}
	c := rawHTTP(t, g, "127.0.0.2")
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if status, closed := answerThenClose(t, c); status != 429 || !closed {
		t.Fatalf("a fifth request from the address, with 4 held: %d, closed %v; want 429 and the close", status, closed)
	}
	c = rawHTTP(t, g, "127.0.0.3")
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(testgw.Wait))
	if res, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("another address: %v %v", res, err)
	}
}
