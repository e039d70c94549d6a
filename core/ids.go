package core

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"time"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// sortedEncoding is base32 whose digits ascend in byte order, so ids
// compare (as SQLite compares text) as their bits do.
var sortedEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// NewID mints an opaque id with a type prefix ("m_", "chan_", "t_"…):
// 80 random bits, so ids never collide and reveal nothing.
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// NewMessageID mints a message's id ("m_…"): 48 bits of the time in
// milliseconds, then 72 random bits. Random ids landed each message's
// keys on a random page of every index keyed by the id (messages, turns,
// outbox, conversation), so a commit of 64 sends dirtied up to 64 pages
// of each, and wrote them all to the WAL; ids that ascend with time put a
// commit's new keys on the pages the last one wrote: the rows of a send
// went from 29.1–30.1 to 19.3–20.2 µs (BenchmarkSendRows in package
// store), one person's three devices sending in a burst from 13.7–14.5k
// to 15.9–17.3k sends/s, a fan-out burst from 6.4–6.6k to 6.9–7.2k
// (irisgate bench --scenarios ratios --ratio-modes person,burst, binaries
// run alternately). The id tells when the message was made, which its ts
// says anyway; the random bits keep ids made in the same millisecond
// apart (a collision wants two of 2^72 in one millisecond).
func NewMessageID() string {
	var b [15]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	rand.Read(b[6:])
	return "m_" + sortedEncoding.EncodeToString(b[:])
}
