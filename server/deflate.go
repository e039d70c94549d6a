package server

import "github.com/coder/websocket"

// permessage-deflate (RFC 7692). Every message.update carries the whole
// text so far, so a streamed reply is mostly text the device has already
// seen: compressed, it costs a fraction of its size on a phone's data plan.
//
// The mode is coder/websocket's CompressionNoContextTakeover, which
// negotiates client_no_context_takeover and server_no_context_takeover:
//   - we hold no inflate window for the client's messages (context
//     takeover would pin a 32 KiB window per connection for its life, from
//     the first compressed frame it sends);
//   - each message is compressed by a flate.Writer taken from a pool and
//     put back right after, so an idle connection holds no compressor.
//     With context takeover coder/websocket keeps one flate.Writer (about
//     1.2 MB: compress/flate's hash tables) per connection for as long as
//     the connection lives, once it has written one compressed message —
//     hello.ack is one — which no idle connection should pay.
//
// What a shared window would have saved (each update re-sending what the
// last one said) the per-device pacing of updates (hub/pace.go) saves
// instead, on every device, compressing or not.
//
// Frames below the threshold (512 bytes) go uncompressed: most frames of a
// fan-out burst are smaller, so the common case pays nothing. Compression
// happens inside Conn.Write, before the bytes reach the corked socket
// (socket.go), and reads the frame's shared bytes without changing them;
// Pings are control frames, never compressed, so proofs (proof.go) are
// unchanged.

// acceptOptions are the upgrade's options for a connection probed by pr.
func (s *Server) acceptOptions(pr *prober) *websocket.AcceptOptions {
	o := &websocket.AcceptOptions{InsecureSkipVerify: true, OnPongReceived: pr.pong}
	if !s.cfg.NoDeflate {
		o.CompressionMode = websocket.CompressionNoContextTakeover
	}
	return o
}
