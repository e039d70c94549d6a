package server

import (
	"compress/flate"
	"encoding/binary"
	"errors"
	"sync"
)

// Our side of permessage-deflate. coder/websocket either compresses each
// message on its own (no context takeover: a streamed reply's every
// update costs about half its size again, and a slow stream's updates,
// paced by time as a watcher needs, made 3.9 times the reply) or keeps a
// flate.Writer of about 1.2 MB per connection for the connection's life
// (context takeover), which no idle connection should pay. So the writer
// compresses the messages itself, with the device's window and without a
// compressor of its own:
//
//   - the device keeps the window (server_no_context_takeover is not
//     negotiated; client_no_context_takeover is, so we hold none for what
//     it sends): the last 32 KiB of the messages it inflated;
//   - the connection remembers the last message it compressed (a
//     reference to the frame's shared bytes, no copy), which is what that
//     window ends with; a message is compressed by a flate.Writer taken
//     from a pool, primed with that message (compressed into nothing and
//     flushed) and put back right after, so its matches reach into the
//     text the device already has: an update that repeats the text so far
//     costs a few bytes per 258 of it (deflate's longest match) plus what
//     is new;
//   - the reference is dropped once a frame without a key is compressed
//     (a stream's terminal frame, or anything not part of a stream), so a
//     connection pins a frame only between the updates of a stream.
//     Frames left uncompressed do not enter the device's window and
//     change nothing. Not using the window is always allowed (RFC 7692
//     section 7.1.1.1: the server may always start afresh);
//   - coder/websocket compresses nothing itself (its threshold is out of
//     reach): every compressed message is ours, so the window is known.
//
// The frames are written whole, header and all, in one Write to the
// corked socket, between the frames coder/websocket writes: its data
// frames are the writer's own (this goroutine), and its control frames
// (pong, ping, close) reach the socket in one Write each, flushed at
// their end.

// deflateMin is the least frame that is compressed (coder/websocket's
// threshold without context takeover): most frames of a fan-out burst
// are smaller, so the common case pays nothing.
const deflateMin = 512

// windowSize is permessage-deflate's LZ77 window (server_max_window_bits
// is never below 15: coder/websocket refuses offers that ask for less).
const windowSize = 32 << 10

// deflater is one connection's compression state.
type deflater struct {
	// window: the device keeps our context, so last may be used.
	window bool
	// last is the tail of the last message compressed, while it may be
	// used; nil otherwise.
	last []byte
}

// compressor is a pooled flate.Writer and the sink it writes to.
type compressor struct {
	fw   *flate.Writer
	sink sink
}

// sink collects the compressed bytes, or drops them while the writer is
// being primed.
type sink struct {
	buf     []byte
	discard bool
}

func (s *sink) Write(p []byte) (int, error) {
	if !s.discard {
		s.buf = append(s.buf, p...)
	}
	return len(p), nil
}

// Compressors by level. A message compressed with the window is at level
// 2: flate.BestSpeed's encoder finds few of the long matches into the
// primed text, and a 6 KB update one piece longer than the last cost 453
// bytes against 175 at level 2 (12 KB reply, 150 updates: 5.7x against
// 2.2x), for about 1.7 times its CPU (72 us for a 6 KB update, primed,
// against 43 us). Without the window, BestSpeed, as coder/websocket
// compressed.
const (
	levelWindow = 2
	levelAlone  = flate.BestSpeed
)

var compressors = [2]sync.Pool{} // [0] BestSpeed, [1] levelWindow

func getCompressor(window bool) (*compressor, *sync.Pool) {
	level, pool := levelAlone, &compressors[0]
	if window {
		level, pool = levelWindow, &compressors[1]
	}
	if c, ok := pool.Get().(*compressor); ok {
		c.fw.Reset(&c.sink)
		return c, pool
	}
	c := &compressor{}
	c.fw, _ = flate.NewWriter(&c.sink, level)
	return c, pool
}

// maxHeader is a server frame's longest header (unmasked, 64-bit length).
const maxHeader = 10

// frameHeader puts in h the header of a whole (FIN) server message of n
// payload bytes, RSV1 set when compressed (RFC 6455 section 5.2, RFC
// 7692 section 6), and returns its length.
func frameHeader(h *[maxHeader]byte, compressed, binaryMsg bool, n int) int {
	op := byte(0x1) // text
	if binaryMsg {
		op = 0x2
	}
	h[0] = 0x80 | op // FIN
	if compressed {
		h[0] |= 0x40
	}
	switch {
	case n < 126:
		h[1] = byte(n)
		return 2
	case n <= 0xffff:
		h[1] = 126
		binary.BigEndian.PutUint16(h[2:], uint16(n))
		return 4
	default:
		h[1] = 127
		binary.BigEndian.PutUint64(h[2:], uint64(n))
		return 10
	}
}

var errDeflate = errors.New("deflate: no sync marker")

// frame puts in dst (reused) a whole WebSocket message of p, compressed
// with the device's window where d may use it: the frame to write is
// buf[off:]. keyed tells whether p is part of a stream (see above).
func (d *deflater) frame(dst, p []byte, binaryMsg, keyed bool) (buf []byte, off int, err error) {
	var room [maxHeader]byte
	dst = append(dst[:0], room[:]...)
	primed := d.window && len(d.last) > 0
	c, pool := getCompressor(primed)
	if primed {
		c.sink.discard = true
		c.fw.Write(d.last)
		c.fw.Flush()
		c.sink.discard = false
	}
	c.sink.buf = dst
	c.fw.Write(p)
	err = c.fw.Flush()
	dst = c.sink.buf
	c.sink.buf = nil
	pool.Put(c)
	// A sync flush ends in an empty stored block, 00 00 ff ff, which
	// permessage-deflate leaves out (RFC 7692 section 7.2.1).
	n := len(dst)
	if err != nil || n < maxHeader+4 || string(dst[n-4:]) != "\x00\x00\xff\xff" {
		return dst, 0, errors.Join(errDeflate, err)
	}
	dst = dst[:n-4]
	if d.window && keyed {
		d.last = p[max(len(p)-windowSize, 0):]
	} else {
		d.last = nil
	}
	var h [maxHeader]byte
	hl := frameHeader(&h, true, binaryMsg, len(dst)-maxHeader)
	off = maxHeader - hl
	copy(dst[off:], h[:hl])
	return dst, off, nil
}
