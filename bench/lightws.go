package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// wsConn is what the simulated devices use of a WebSocket's client end:
// coder/websocket's, or the bench's own lightConn.
type wsConn interface {
	Write(ctx context.Context, typ websocket.MessageType, p []byte) error
	Read(ctx context.Context) (websocket.MessageType, []byte, error)
	Reader(ctx context.Context) (websocket.MessageType, io.Reader, error)
	CloseNow() error
}

var _ wsConn = (*websocket.Conn)(nil)

// lightConn is the client end of a WebSocket (RFC 6455) without
// extensions, for the load the bench puts on a server: one process reads
// for a hundred devices on the two cores the server runs on, so what a
// device costs to read is CPU the server does not get. coder/websocket's
// client spent about 1.2 µs a message (a Reader a message, its locks,
// context checks, a copy through bytes.Buffer, a read(2) every 4 KiB);
// this one reads 64 KiB a read(2) and hands each message to its reader
// in place. It answers pings and closes as RFC 6455 asks; it never
// negotiates compression (the deflate modes dial coder/websocket).
type lightConn struct {
	c     net.Conn
	br    *bufio.Reader
	limit int // the largest message it takes
	buf   []byte

	wmu  sync.Mutex
	wbuf []byte
}

const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// lightDial opens a WebSocket to a ws:// URL.
func lightDial(ctx context.Context, rawURL string) (*lightConn, *http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if u.Scheme != "ws" {
		return nil, nil, fmt.Errorf("light WebSocket: %s: only ws:// is spoken", rawURL)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{
		"Upgrade":               {"websocket"},
		"Connection":            {"Upgrade"},
		"Sec-WebSocket-Key":     {key},
		"Sec-WebSocket-Version": {"13"},
	}}
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if err := checkUpgrade(resp, key); err != nil {
		c.Close()
		return nil, resp, err
	}
	c.SetDeadline(time.Time{})
	return &lightConn{c: c, br: br, limit: 32 << 10}, resp, nil
}

func checkUpgrade(resp *http.Response, key string) error {
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("light WebSocket: the upgrade was answered %s: %s", resp.Status, body)
	}
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	switch {
	case !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket"):
		return errors.New("light WebSocket: the answer upgrades to " + resp.Header.Get("Upgrade"))
	case resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(h[:]):
		return errors.New("light WebSocket: wrong Sec-WebSocket-Accept")
	case resp.Header.Get("Sec-WebSocket-Extensions") != "":
		return errors.New("light WebSocket: the server chose an extension it was not offered")
	}
	return nil
}

// SetReadLimit bounds the messages it takes, as coder/websocket's does.
func (l *lightConn) SetReadLimit(n int64) { l.limit = int(min(n, 1<<30)) }

// CloseNow closes the connection without a close handshake.
func (l *lightConn) CloseNow() error { return l.c.Close() }

// Write sends one message in one frame, masked as a client must.
func (l *lightConn) Write(ctx context.Context, typ websocket.MessageType, p []byte) error {
	op := byte(opText)
	if typ == websocket.MessageBinary {
		op = opBinary
	}
	return l.writeFrame(ctx, op, p)
}

func (l *lightConn) writeFrame(ctx context.Context, op byte, p []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	b := append(l.wbuf[:0], 0x80|op)
	switch n := len(p); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var mask [4]byte
	rand.Read(mask[:])
	b = append(b, mask[:]...)
	start := len(b)
	b = append(b, p...)
	for i := range b[start:] {
		b[start+i] ^= mask[i&3]
	}
	l.wbuf = b
	if dl, ok := ctx.Deadline(); ok {
		l.c.SetWriteDeadline(dl)
		defer l.c.SetWriteDeadline(time.Time{})
	}
	_, err := l.c.Write(b)
	return err
}

// each calls fn with every data message until the connection ends, and
// returns why it ended. p is valid only during the call.
func (l *lightConn) each(fn func(typ websocket.MessageType, p []byte)) error {
	for {
		typ, p, err := l.next()
		if err != nil {
			return err
		}
		fn(typ, p)
	}
}

// Read returns the next data message, copied.
func (l *lightConn) Read(ctx context.Context) (websocket.MessageType, []byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		l.c.SetReadDeadline(dl)
		defer l.c.SetReadDeadline(time.Time{})
	}
	typ, p, err := l.next()
	return typ, bytes.Clone(p), err
}

// Reader returns the next data message as a reader of its copy.
func (l *lightConn) Reader(ctx context.Context) (websocket.MessageType, io.Reader, error) {
	typ, p, err := l.Read(ctx)
	return typ, bytes.NewReader(p), err
}

// next reads frames up to the end of a data message, answering the
// control frames between. The message is in place in the read buffer when
// it came in one frame that fits there, in l.buf otherwise; either is
// valid until the next call.
func (l *lightConn) next() (websocket.MessageType, []byte, error) {
	var typ websocket.MessageType
	l.buf = l.buf[:0]
	for {
		fin, op, n, err := l.header()
		if err != nil {
			return 0, nil, err
		}
		if op >= opClose {
			if err := l.control(op, n); err != nil {
				return 0, nil, err
			}
			continue
		}
		switch {
		case op == opContinuation && typ == 0:
			return 0, nil, errors.New("light WebSocket: a continuation without a message")
		case op != opContinuation && typ != 0:
			return 0, nil, errors.New("light WebSocket: a new message inside a fragmented one")
		case op == opText:
			typ = websocket.MessageText
		case op == opBinary:
			typ = websocket.MessageBinary
		case op != opContinuation:
			return 0, nil, fmt.Errorf("light WebSocket: unknown opcode %#x", op)
		}
		if len(l.buf)+n > l.limit {
			return 0, nil, fmt.Errorf("light WebSocket: a message over the read limit of %d bytes", l.limit)
		}
		if fin && len(l.buf) == 0 && n <= l.br.Size() {
			p, err := l.br.Peek(n)
			if err != nil {
				return 0, nil, err
			}
			l.br.Discard(n)
			return typ, p, nil
		}
		start := len(l.buf)
		l.buf = append(l.buf, make([]byte, n)...)
		if _, err := io.ReadFull(l.br, l.buf[start:]); err != nil {
			return 0, nil, err
		}
		if fin {
			return typ, l.buf, nil
		}
	}
}

// header reads a frame's header: a server's frames are never masked and,
// without extensions, use no reserved bit.
func (l *lightConn) header() (fin bool, op byte, n int, err error) {
	var h [2]byte
	if _, err := io.ReadFull(l.br, h[:]); err != nil {
		return false, 0, 0, err
	}
	if h[0]&0x70 != 0 || h[1]&0x80 != 0 {
		return false, 0, 0, errors.New("light WebSocket: a frame with reserved bits or a mask from the server")
	}
	fin, op, n = h[0]&0x80 != 0, h[0]&0x0F, int(h[1]&0x7F)
	switch n {
	case 126:
		var x [2]byte
		if _, err := io.ReadFull(l.br, x[:]); err != nil {
			return false, 0, 0, err
		}
		n = int(binary.BigEndian.Uint16(x[:]))
	case 127:
		var x [8]byte
		if _, err := io.ReadFull(l.br, x[:]); err != nil {
			return false, 0, 0, err
		}
		v := binary.BigEndian.Uint64(x[:])
		if v > uint64(l.limit) {
			return false, 0, 0, fmt.Errorf("light WebSocket: a frame of %d bytes, over the read limit", v)
		}
		n = int(v)
	}
	if op >= opClose && (n > 125 || !fin) {
		return false, 0, 0, errors.New("light WebSocket: a control frame fragmented or over 125 bytes")
	}
	return fin, op, n, nil
}

// control answers a ping with its pong and a close with a close, and
// reports the close as the end of the connection.
func (l *lightConn) control(op byte, n int) error {
	var b [125]byte
	p := b[:n]
	if _, err := io.ReadFull(l.br, p); err != nil {
		return err
	}
	switch op {
	case opPing:
		return l.writeFrame(context.Background(), opPong, p)
	case opPong:
		return nil
	case opClose:
		code := websocket.StatusNoStatusRcvd
		if n >= 2 {
			code = websocket.StatusCode(binary.BigEndian.Uint16(p))
		}
		l.writeFrame(context.Background(), opClose, p[:min(n, 2)])
		l.c.Close()
		return websocket.CloseError{Code: code, Reason: string(p[min(n, 2):])}
	}
	return fmt.Errorf("light WebSocket: unknown control opcode %#x", op)
}
