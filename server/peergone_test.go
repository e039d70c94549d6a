package server_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/testgw"
)

// A device that shuts its side of the TCP connection down after its hello
// (no WebSocket close) still gets every frame queued for it, and then the
// socket is closed: with no Close frame, since a peer that has gone
// answers none (the gateway used to write one and wait for its answer).
func TestPeerThatShutsDownGetsQueuedFramesAndNoCloseHandshake(t *testing.T) {
	g := testgw.Start(t)
	nc, br := dialUpgrade(t, g, "", nil)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	hello, _ := json.Marshal(helloFrame(testgw.Token, "half-closer"))
	nc.Write(maskedText(hello))
	if err := nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		op, payload, err := readServerFrame(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %v: %v", types, err)
		}
		if op == 8 {
			t.Fatalf("got a Close frame (after %v): the gateway waits for the answer of a peer that is gone", types)
		}
		var f struct {
			Type string `json:"type"`
		}
		json.Unmarshal(payload, &f)
		types = append(types, f.Type)
	}
	if len(types) < 2 || types[0] != "hello.ack" || types[1] != "status" {
		t.Fatalf("frames before the socket closed: %v; want hello.ack, status…", types)
	}
}

// dialUpgrade opens a TCP connection to g and writes a WebSocket upgrade
// request (RFC 6455 §1.3's key) with the extra header lines given, and
// behind it in the same write the bytes given. The connection is closed
// when the test ends.
func dialUpgrade(t *testing.T, g *testgw.GW, extra string, behind []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", g.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testgw.Wait))
	req := "GET /ws HTTP/1.1\r\nHost: " + g.Addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" + extra + "\r\n"
	if _, err := nc.Write(append([]byte(req), behind...)); err != nil {
		t.Fatal(err)
	}
	return nc, bufio.NewReader(nc)
}

// maskedText is a client's text frame (RFC 6455 §5.2), masked with a fixed
// key; payload under 64 KiB.
func maskedText(p []byte) []byte {
	key := [4]byte{1, 2, 3, 4}
	b := []byte{0x81}
	if len(p) < 126 {
		b = append(b, 0x80|byte(len(p)))
	} else {
		b = append(b, 0x80|126, byte(len(p)>>8), byte(len(p)))
	}
	b = append(b, key[:]...)
	for i, c := range p {
		b = append(b, c^key[i%4])
	}
	return b
}

// readServerFrame reads one unmasked frame; io.EOF when the socket closed
// between frames.
func readServerFrame(r *bufio.Reader) (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:1]); err != nil {
		return 0, nil, err
	}
	if _, err := io.ReadFull(r, h[1:]); err != nil {
		return 0, nil, io.ErrUnexpectedEOF
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var x [2]byte
		if _, err := io.ReadFull(r, x[:]); err != nil {
			return 0, nil, io.ErrUnexpectedEOF
		}
		n = uint64(binary.BigEndian.Uint16(x[:]))
	case 127:
		var x [8]byte
		if _, err := io.ReadFull(r, x[:]); err != nil {
			return 0, nil, io.ErrUnexpectedEOF
		}
		n = binary.BigEndian.Uint64(x[:])
	}
	if n > 1<<20 {
		return 0, nil, io.ErrShortBuffer
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, io.ErrUnexpectedEOF
	}
	return h[0] & 0x0f, payload, nil
}
