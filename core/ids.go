package core

import (
	"crypto/rand"
	"encoding/base32"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID mints an opaque id with a type prefix ("m_", "chan_", "t_"…):
// 80 random bits, so ids never collide and reveal nothing.
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + idEncoding.EncodeToString(b[:])
}
