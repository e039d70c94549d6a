package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/internal/testgw"
)

// The upgrade's 101 is written by the gateway itself (hijackWriter), not
// by net/http: it is a valid HTTP/1.1 response with RFC 6455's headers
// (the accept key of §1.3's example), the deflate the device offered, and
// nothing else in front of the frames; a hello sent in the same write as
// the request is answered.
func TestUpgradeResponseIsRFC6455s(t *testing.T) {
	g := testgw.Start(t)
	hello, _ := json.Marshal(helloFrame(testgw.Token, "raw-upgrade"))
	_, br := dialUpgrade(t, g, "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n", maskedText(hello))
	status, err := br.ReadString('\n')
	if err != nil || status != "HTTP/1.1 101 Switching Protocols\r\n" {
		t.Fatalf("status line %q (%v)", status, err)
	}
	h := http.Header{}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\r\n"), ": ")
		if !ok {
			t.Fatalf("header line %q", line)
		}
		h.Add(k, v)
	}
	want := map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-Websocket-Accept": "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Fatalf("%s: %q, want %q (headers %v)", k, got, v, h)
		}
	}
	if ext := h.Get("Sec-WebSocket-Extensions"); !strings.HasPrefix(ext, "permessage-deflate") {
		t.Fatalf("Sec-WebSocket-Extensions %q: the offered deflate was not answered", ext)
	}
	// The hello.ack follows, compressed (RSV1) or not: a frame either way.
	b0, err := br.ReadByte()
	if err != nil || b0&0x0f != 1 {
		t.Fatalf("first frame byte %#x (%v), want a text frame", b0, err)
	}
}
