package server

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// clientFrame is a masked frame as a device sends it.
func clientFrame(fin bool, op byte, n int) []byte {
	b := []byte{op}
	if fin {
		b[0] |= 0x80
	}
	switch {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, 0, 0)
		binary.BigEndian.PutUint16(b[2:], uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, 1, 2, 3, 4) // mask key
	return append(b, bytes.Repeat([]byte{'x'}, n)...)
}

// The tracker stands between messages exactly at the end of a whole
// message's last frame, whatever sizes the bytes come in: never in a
// header, a payload, or a fragmented message (control frames in the
// middle of it included).
func TestFrameTrackerFindsTheEndsOfMessages(t *testing.T) {
	type part struct {
		b       []byte
		between bool // after it
	}
	stream := []part{
		{clientFrame(true, 1, 5), true},      // a text message
		{clientFrame(true, 9, 0), true},      // a ping between messages
		{clientFrame(true, 2, 300), true},    // 16-bit length
		{clientFrame(true, 1, 70_000), true}, // 64-bit length
		{clientFrame(false, 1, 10), false},   // a message begins…
		{clientFrame(true, 10, 4), false},    // …a pong in the middle of it…
		{clientFrame(false, 0, 200), false},  // …goes on…
		{clientFrame(true, 0, 3), true},      // …and ends
		{clientFrame(true, 8, 2), true},      // close
		{clientFrame(true, 1, 0), true},      // empty text
	}
	for _, chunk := range []int{1, 2, 3, 7, 512, 1 << 20} {
		var tr frameTracker
		if !tr.between() {
			t.Fatal("a new tracker is not between messages")
		}
		for i, p := range stream {
			for b := p.b; len(b) > 0; {
				k := min(chunk, len(b))
				tr.feed(b[:k])
				b = b[k:]
				if len(b) > 0 && tr.between() {
					t.Fatalf("chunks of %d: part %d: between messages with %d bytes of its frame to come", chunk, i, len(b))
				}
			}
			if tr.between() != p.between {
				t.Fatalf("chunks of %d: after part %d between = %v, want %v", chunk, i, tr.between(), p.between)
			}
		}
	}
	// Two messages in one read.
	var two frameTracker
	two.feed(append(clientFrame(true, 1, 1), clientFrame(false, 2, 2)...))
	if two.between() {
		t.Fatal("between messages in the middle of a fragmented one read with the one before")
	}
	two.feed(clientFrame(true, 0, 1))
	if !two.between() {
		t.Fatal("not between messages after the last frame of one")
	}
	// An opcode no frame has: never between messages again (the
	// connection fails anyway).
	var tr frameTracker
	tr.feed(clientFrame(true, 3, 1))
	tr.feed(clientFrame(true, 1, 1))
	if tr.between() {
		t.Fatal("a tracker that met a reserved opcode still says it is between messages")
	}
}
