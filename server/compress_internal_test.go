package server

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// inflater is a device's side of permessage-deflate with the server's
// context taken over: one LZ77 window across the compressed messages it
// reads (RFC 7692 section 7.2.2).
type inflater struct{ window []byte }

// read parses one server frame and returns its message.
func (f *inflater) read(t *testing.T, frame []byte) (msg []byte, binaryMsg bool) {
	t.Helper()
	if len(frame) < 2 {
		t.Fatalf("frame of %d bytes", len(frame))
	}
	if frame[0]&0xf0 != 0xc0 {
		t.Fatalf("first byte %#x: want FIN and RSV1, nothing else", frame[0])
	}
	op := frame[0] & 0x0f
	n, hl := int(frame[1]), 2
	switch {
	case frame[1]&0x80 != 0:
		t.Fatal("a server frame is never masked")
	case n == 126:
		n, hl = int(binary.BigEndian.Uint16(frame[2:])), 4
		if n < 126 {
			t.Fatalf("16-bit length %d for a short payload", n)
		}
	case n == 127:
		n, hl = int(binary.BigEndian.Uint64(frame[2:])), 10
		if n <= 0xffff {
			t.Fatalf("64-bit length %d for a payload that fits 16 bits", n)
		}
	}
	if len(frame) != hl+n {
		t.Fatalf("frame of %d bytes, header says %d + %d", len(frame), hl, n)
	}
	r := flate.NewReaderDict(io.MultiReader(bytes.NewReader(frame[hl:]), strings.NewReader("\x00\x00\xff\xff")), f.window)
	var out bytes.Buffer
	// The stream has no final block: reading ends with an unexpected EOF
	// once the sync marker's empty block is through.
	if _, err := io.Copy(&out, r); err != nil && err != io.ErrUnexpectedEOF {
		t.Fatalf("inflate: %v", err)
	}
	f.window = append(f.window, out.Bytes()...)
	f.window = f.window[max(len(f.window)-windowSize, 0):]
	return out.Bytes(), op == 2
}

// prose is n bytes of words drawn from a small vocabulary, about as
// compressible as a model's reply.
func prose(n int) string {
	words := strings.Fields("the a of to and in is that for it with as was on be by this are or from at an but not have which they you one all we can gateway device message stream reply token socket commit frame latency durable agent")
	rng := rand.New(rand.NewPCG(7, 7))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

func update(seq int, text string) []byte {
	return fmt.Appendf(nil, `{"v":1,"type":"message.update","chat_id":"default","seq":%d,"payload":{"text":%q}}`, seq, text)
}

// Each message compressed with the window decodes, on a device that keeps
// one, to exactly the frame's bytes, across stream updates, frames larger
// than the window, each header length and binary frames; and an update
// that repeats the last costs a small part of its size.
func TestDeflaterFramesDecode(t *testing.T) {
	d := deflater{window: true}
	var dev inflater
	var buf []byte
	send := func(p []byte, binaryMsg, keyed bool) int {
		t.Helper()
		b, off, err := d.frame(buf, p, binaryMsg, keyed)
		if err != nil {
			t.Fatal(err)
		}
		buf = b
		got, bin := dev.read(t, b[off:])
		if !bytes.Equal(got, p) || bin != binaryMsg {
			t.Fatalf("decoded %d bytes (binary %v), want the %d sent (binary %v)", len(got), bin, len(p), binaryMsg)
		}
		return len(b) - off
	}
	text := prose(6600)
	first := send(update(1, text[:6000]), false, true)
	again := send(update(2, text[:6100]), false, true)
	if again*10 > first {
		t.Errorf("an update 100 bytes longer than the last cost %d bytes, the first %d: want under a tenth", again, first)
	}
	if d.last == nil {
		t.Error("a keyed frame is not remembered for the next")
	}
	send([]byte(`{"type":"message.stop","payload":{"final_text":`+fmt.Sprintf("%q", text)+`}}`), false, false)
	if d.last != nil {
		t.Error("a frame without a key is still remembered: the connection pins it")
	}
	// Larger than the window, then one that repeats its end.
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 100<<10)
	for i := range big {
		big[i] = "abcdefghij klmnop"[rng.IntN(17)]
	}
	send(big, false, true)
	if len(d.last) != windowSize {
		t.Errorf("remembered %d bytes of a 100 KiB frame, want the window's %d", len(d.last), windowSize)
	}
	send(big[len(big)-20000:], false, true)
	// Incompressible binary frames of each header length.
	for _, n := range []int{600, 70 << 10} {
		noise := make([]byte, n)
		for i := range noise {
			noise[i] = byte(rng.Uint32())
		}
		send(noise, true, true)
	}
	// A device that asked for server_no_context_takeover: nothing is
	// remembered, each message decodes on its own.
	alone := deflater{}
	b, off, err := alone.frame(nil, update(1, text), false, true)
	if err != nil {
		t.Fatal(err)
	}
	if alone.last != nil {
		t.Error("without the window, a frame is remembered")
	}
	fresh := inflater{}
	if got, _ := fresh.read(t, b[off:]); !bytes.Equal(got, update(1, text)) {
		t.Error("without the window: decoded bytes differ")
	}
}

// BenchmarkDeflaterUpdate is what a 6 KB update 100 bytes longer than the
// last costs to compress, with the window (primed) and without.
func BenchmarkDeflaterUpdate(b *testing.B) {
	text := prose(6600)
	prev, cur := update(1, text[:5900]), update(2, text[:6000])
	for _, window := range []bool{true, false} {
		b.Run(fmt.Sprintf("window=%v", window), func(b *testing.B) {
			d := deflater{window: window}
			var buf []byte
			var n int
			for b.Loop() {
				if window {
					d.last = prev
				}
				var off int
				buf, off, _ = d.frame(buf, cur, false, true)
				n = len(buf) - off
			}
			b.ReportMetric(float64(n), "B/frame")
		})
	}
}

// Offers are amended so coder/websocket answers client_no_context_takeover
// (RFC 7692 section 7.1.1.2 lets a server answer it unasked); other
// extensions and offers that already carry it are left as they are.
func TestNoClientContextAmendsOffers(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"permessage-deflate; client_max_window_bits"}, []string{"permessage-deflate; client_max_window_bits; client_no_context_takeover"}},
		{[]string{"permessage-deflate"}, []string{"permessage-deflate; client_no_context_takeover"}},
		{[]string{"permessage-deflate; Client_No_Context_Takeover"}, []string{"permessage-deflate; Client_No_Context_Takeover"}},
		{[]string{"x-webkit-deflate-frame, permessage-deflate; server_no_context_takeover", "foo"},
			[]string{"x-webkit-deflate-frame, permessage-deflate; server_no_context_takeover; client_no_context_takeover", "foo"}},
		{nil, nil},
	} {
		h := http.Header{}
		for _, v := range c.in {
			h.Add("Sec-WebSocket-Extensions", v)
		}
		noClientContext(h)
		if got := h.Values("Sec-WebSocket-Extensions"); !slices.Equal(got, c.want) {
			t.Errorf("%q: amended to %q, want %q", c.in, got, c.want)
		}
	}
}
