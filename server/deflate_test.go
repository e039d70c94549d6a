package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
)

// wireCount is what one streamed reply cost a device: the bytes the server
// wrote on its socket (framing and all) and the bytes of the messages they
// carried once read (decompressed).
type wireCount struct {
	ext           string // the upgrade's Sec-WebSocket-Extensions
	wire, payload int64
	final         string // message.stop's final_text
}

// streamOnce has a device (offering permessage-deflate as mode does:
// CompressionContextTakeover offers plain "permessage-deflate", as
// browsers do) ask the echo agent for text and counts its socket's bytes
// from its dial to agent.idle.
func streamOnce(t *testing.T, g *testgw.GW, id, text string, mode websocket.CompressionMode) wireCount {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	var n atomic.Int64
	var nd net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{c, &n}, nil
	}}
	defer tr.CloseIdleConnections()
	ws, resp, err := websocket.Dial(ctx, g.URL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, CompressionMode: mode})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	r := &raw{t: t, ws: ws}
	r.writeJSON(helloFrame(testgw.Token, id))
	var got wireCount
	got.ext = resp.Header.Get("Sec-WebSocket-Extensions")
	r.writeJSON(map[string]any{"v": 1, "id": 2, "type": "message.send", "chat_id": "default", "payload": map[string]any{"text": text}})
	for {
		f, err := r.read()
		if err != nil {
			t.Fatalf("during the reply: %v", err)
		}
		got.payload += int64(len(f.Raw))
		if f.Type == "message.stop" {
			var p struct {
				FinalText string `json:"final_text"`
			}
			json.Unmarshal(f.Payload, &p)
			got.final = p.FinalText
		}
		if f.Type == "agent.idle" {
			break
		}
	}
	got.wire = n.Load() // the upgrade's response too: the plain count is no less than the frames'
	return got
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// A device that offers permessage-deflate gets it, with
// client_no_context_takeover (we hold no inflate window for it) and our
// context kept for it unless it asks otherwise, and a streamed reply costs
// it a fraction of the bytes it carries; one that asks for
// server_no_context_takeover gets it; one that does not offer deflate gets
// plain frames; --no-deflate refuses it.
func TestDeflateNegotiatedWhenOffered(t *testing.T) {
	text := words(1500) // ~10 KB
	g := testgw.Start(t)

	plain := streamOnce(t, g, "plain", text, websocket.CompressionDisabled)
	if plain.ext != "" {
		t.Errorf("no offer, yet extensions %q", plain.ext)
	}
	if plain.wire < plain.payload {
		t.Errorf("plain: %d bytes on the wire for %d of frames", plain.wire, plain.payload)
	}

	deflated := streamOnce(t, g, "deflated", text, websocket.CompressionContextTakeover)
	if !strings.Contains(deflated.ext, "permessage-deflate") || !strings.Contains(deflated.ext, "client_no_context_takeover") ||
		strings.Contains(deflated.ext, "server_no_context_takeover") {
		t.Errorf("offered deflate: extensions %q, want permessage-deflate; client_no_context_takeover", deflated.ext)
	}
	// coder/websocket's no-context mode offers both no_context_takeover.
	alone := streamOnce(t, g, "alone", text, websocket.CompressionNoContextTakeover)
	if !strings.Contains(alone.ext, "server_no_context_takeover") || !strings.Contains(alone.ext, "client_no_context_takeover") {
		t.Errorf("offered deflate without context: extensions %q, want both no_context_takeover", alone.ext)
	}
	for _, c := range []wireCount{deflated, alone} {
		if c.wire*2 > c.payload {
			t.Errorf("deflate (%s): %d bytes on the wire for %d of frames, want under half", c.ext, c.wire, c.payload)
		}
	}
	if deflated.wire >= alone.wire {
		t.Errorf("with our context kept %d bytes on the wire, without it %d: want fewer", deflated.wire, alone.wire)
	}
	for _, c := range []wireCount{plain, deflated, alone} {
		if c.final != text {
			t.Errorf("final text of %d bytes, want the %d echoed", len(c.final), len(text))
		}
	}
	t.Logf("plain %d B on the wire for %d B of frames; deflate %d B for %d B; without context %d B for %d B", plain.wire, plain.payload, deflated.wire, deflated.payload, alone.wire, alone.payload)

	off := testgw.Start(t, func(c *server.AppConfig) { c.Server.NoDeflate = true })
	refused := streamOnce(t, off, "refused", text, websocket.CompressionContextTakeover)
	if refused.ext != "" || refused.wire < refused.payload {
		t.Errorf("--no-deflate: extensions %q, %d bytes on the wire for %d", refused.ext, refused.wire, refused.payload)
	}
}
