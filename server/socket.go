package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The socket under each WebSocket connection. coder/websocket flushes
// every message with its own write(2); the writer instead corks the socket
// for a batch, so a burst of frames leaves in one system call, and the
// buffers that net/http kept for the upgrade request (4 KiB each way, held
// for the connection's life) are swapped for small ones.

// Sizes of a connection's own buffers. Reads of whole frames larger than
// readBufSize go straight into the frame's buffer, so a small buffer
// costs only extra system calls for runs of tiny frames.
const (
	readBufSize  = 512
	writeBufSize = 256
	// corkMax is the most a corked socket holds before it writes.
	corkMax = 64 << 10
)

var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkMax); return &b }}

// corkedConn is a net.Conn whose writes can be held back and sent
// together.
type corkedConn struct {
	net.Conn
	timeout time.Duration // bounds each write(2) of a corked batch
	// deflate: permessage-deflate was negotiated, so the writer
	// compresses frames (compress.go), with the device's window unless it
	// asked for server_no_context_takeover.
	deflate bool
	dfl     deflater

	// rd is the socket's reading side (idle.go).
	rd *sockReader

	mu     sync.Mutex
	corked bool
	buf    *[]byte // from corkPool while corked
	// until is the socket's write deadline (see armLocked); hdr a frame
	// header being written (a field: on the stack it escaped, a heap
	// allocation per frame).
	until time.Time
	hdr   [maxHeader]byte
}

// Read is the reading side's (sockReader).
func (c *corkedConn) Read(p []byte) (int, error) { return c.rd.Read(p) }

func (c *corkedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		c.armLocked()
		return c.Conn.Write(p)
	}
	b := *c.buf
	if len(b)+len(p) > corkMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) >= corkMax {
			return c.writeLocked(p)
		}
		b = *c.buf
	}
	*c.buf = append(b, p...)
	return len(p), nil
}

// writeMessage writes p as one whole uncompressed message, its header
// and payload appended to the cork together (one copy, no lock but the
// cork's). Like writeDeflated's frames, it goes between the frames
// coder/websocket writes (compress.go says why that is safe).
func (c *corkedConn) writeMessage(binaryMsg bool, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	hl := frameHeader(&c.hdr, false, binaryMsg, len(p))
	if !c.corked || hl+len(p) >= corkMax {
		return c.writeWholeLocked(c.hdr[:hl], p)
	}
	if len(*c.buf)+hl+len(p) > corkMax {
		if err := c.flushLocked(); err != nil {
			return err
		}
	}
	b := append(*c.buf, c.hdr[:hl]...)
	*c.buf = append(b, p...)
	return nil
}

// writePing writes a ping frame of the prober's after everything written
// so far: into the cork while the writer holds one (it leaves with the
// batch), else at once, in one write(2) like every frame on the socket.
func (c *corkedConn) writePing(payload string) error {
	var f [2 + maxControlPayload]byte
	f[0] = 0x80 | 0x9 // FIN, ping
	f[1] = byte(copy(f[2:], payload))
	frame := f[:2+int(f[1])]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		if len(*c.buf)+len(frame) > corkMax {
			if err := c.flushLocked(); err != nil {
				return err
			}
		}
		*c.buf = append(*c.buf, frame...)
		return nil
	}
	c.armLocked()
	_, err := c.Conn.Write(frame)
	return err
}

// maxControlPayload is RFC 6455's bound on a control frame's payload.
const maxControlPayload = 125

// writeWholeLocked writes a message too large for the cork (or with the
// socket uncorked) after what the cork holds: two writes, no copy.
func (c *corkedConn) writeWholeLocked(h, p []byte) error {
	if c.corked {
		if err := c.flushLocked(); err != nil {
			return err
		}
	}
	bufs := net.Buffers{h, p}
	c.armLocked()
	_, err := bufs.WriteTo(c.Conn)
	return err
}

// cork holds writes back until uncork.
func (c *corkedConn) cork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		return
	}
	c.corked = true
	c.buf = corkPool.Get().(*[]byte)
}

// uncork sends what was held back.
func (c *corkedConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return nil
	}
	err := c.flushLocked()
	c.corked = false
	*c.buf = (*c.buf)[:0]
	corkPool.Put(c.buf)
	c.buf = nil
	return err
}

func (c *corkedConn) flushLocked() error {
	b := *c.buf
	if len(b) == 0 {
		return nil
	}
	_, err := c.writeLocked(b)
	*c.buf = b[:0]
	return err
}

// writeLocked writes a corked batch's bytes. The frames were handed over
// without a context deadline (setting one per frame costs a timer), so
// the socket's deadline bounds each write instead.
func (c *corkedConn) writeLocked(p []byte) (int, error) {
	c.armLocked()
	return c.Conn.Write(p)
}

// armLocked gives the write about to start a deadline between half the
// timeout and the whole of it. Every write on the socket comes through
// here, so the deadline is never cleared, only moved on once half of it
// is used: moving it is a runtime timer update, which per write(2) took
// 3 % of a fan-out burst's CPU.
func (c *corkedConn) armLocked() {
	now := time.Now()
	if c.until.Sub(now) < c.timeout/2 {
		c.until = now.Add(c.timeout)
		c.Conn.SetWriteDeadline(c.until)
	}
}

// hijackWriter hands coder/websocket a corkable socket and small buffers
// when it hijacks the connection, and writes the upgrade's 101 itself.
type hijackWriter struct {
	http.ResponseWriter
	timeout time.Duration
	conn    *corkedConn
	// upgrade: coder/websocket answered 101, which Hijack writes.
	upgrade bool
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WriteHeader keeps a 101 for Hijack to write: net/http would format it
// with its general response writer (headers sorted, a buffered chunk
// writer flushed at the hijack), 5 % of a handshake's CPU.
func (w *hijackWriter) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols {
		w.upgrade = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if w.upgrade {
		if err := writeUpgrade(nc, w.Header()); err != nil {
			nc.Close()
			return nil, nil, err
		}
	}
	// coder/websocket has set the response's headers by now.
	ext := w.Header().Get("Sec-WebSocket-Extensions")
	w.conn = &corkedConn{Conn: nc, timeout: w.timeout, deflate: strings.Contains(ext, "permessage-deflate")}
	w.conn.dfl.window = w.conn.deflate && !strings.Contains(ext, "server_no_context_takeover")
	// coder/websocket reads the socket it is handed (w.conn, whose Read is
	// rd's) behind the bytes the reader it is handed holds.
	w.conn.rd = newSockReader(nc, nil)
	br := bufio.NewReaderSize(w.conn.rd, readBufSize)
	if n := brw.Reader.Buffered(); n > 0 {
		// Bytes the device sent right behind its upgrade request: they must
		// be in the new reader's buffer, which coder/websocket takes over,
		// and pass through rd, which follows the frames.
		b, _ := brw.Reader.Peek(n)
		w.conn.rd.early = bytes.Clone(b)
		br = bufio.NewReaderSize(w.conn.rd, max(readBufSize, n))
		if _, err := br.Peek(n); err != nil {
			nc.Close()
			return nil, nil, err
		}
	}
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, writeBufSize)), nil
}

// writeUpgrade writes a 101 response with h's headers in one write. It
// sets no deadline: a fresh socket's send buffer takes these few hundred
// bytes without blocking, as net/http's own write of them did.
func writeUpgrade(nc net.Conn, h http.Header) error {
	b := make([]byte, 0, 256)
	b = append(b, "HTTP/1.1 101 Switching Protocols\r\n"...)
	for k, vs := range h {
		for _, v := range vs {
			// The values are coder/websocket's and the handler's; a line
			// break in one would split the response.
			if strings.ContainsAny(k, "\r\n:") || strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("upgrade header %q: a line break", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	_, err := nc.Write(b)
	return err
}
