package server

import (
	"math"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// permessage-deflate (RFC 7692). Every message.update carries the whole
// text so far, so a streamed reply is mostly text the device has already
// seen: compressed with the device's window (compress.go), an update costs
// about what it adds.
//
// What is negotiated: client_no_context_takeover (we hold no inflate
// window for the client's messages: context takeover would pin a 32 KiB
// window per connection for its life, from the first compressed frame it
// sends), and the server's context kept, unless the client asks for
// server_no_context_takeover. coder/websocket answers the client's
// parameters as they are offered, so the offer is amended before it reads
// it: a server may answer client_no_context_takeover to an offer without
// it (RFC 7692 section 7.1.1.2). It runs in its context-takeover mode with
// a threshold it never reaches, so it reads compressed messages (without
// a window) and compresses nothing: the writer does (compress.go), with
// no compressor held by an idle connection.
//
// The per-device pacing of updates (hub/pace.go) saves on every device
// too, compressing or not.
//
// Pings are control frames, never compressed, so proofs (proof.go) are
// unchanged.

// acceptOptions are the upgrade's options for r, a connection probed by
// pr.
func (s *Server) acceptOptions(r *http.Request, pr *prober) *websocket.AcceptOptions {
	o := &websocket.AcceptOptions{InsecureSkipVerify: true, OnPongReceived: pr.pong}
	if !s.cfg.NoDeflate {
		noClientContext(r.Header)
		o.CompressionMode = websocket.CompressionContextTakeover
		o.CompressionThreshold = math.MaxInt // the writer compresses (compress.go)
	}
	return o
}

const extHeader = "Sec-WebSocket-Extensions"

// noClientContext adds client_no_context_takeover to each
// permessage-deflate offer in h that lacks it.
func noClientContext(h http.Header) {
	vs := h.Values(extHeader)
	if len(vs) == 0 {
		return
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		offers := strings.Split(v, ",")
		for i, off := range offers {
			params := strings.Split(off, ";")
			if !strings.EqualFold(strings.TrimSpace(params[0]), "permessage-deflate") {
				continue
			}
			has := false
			for _, p := range params[1:] {
				if strings.EqualFold(strings.TrimSpace(p), "client_no_context_takeover") {
					has = true
				}
			}
			if !has {
				offers[i] = off + "; client_no_context_takeover"
			}
		}
		out = append(out, strings.Join(offers, ","))
	}
	h[http.CanonicalHeaderKey(extHeader)] = out
}
