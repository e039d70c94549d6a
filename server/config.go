package server

import (
	"net/netip"
	"time"

	"github.com/irisgate/irisgate/wire/mobile"
)

// Config holds the server's settings.
type Config struct {
	HelloTimeout time.Duration // for the first frame
	PingInterval time.Duration // WebSocket pings; a peer silent for two is dead
	ProofEvery   time.Duration // least time between two proof pings of a socket (proof.go)
	WriteTimeout time.Duration // one frame's write
	MaxFrame     int64         // largest text or binary frame accepted
	Push         string        // push backend named in hello.ack
	NtfyServer   string
	WebPushKey   string // VAPID public key offered to browsers

	// MaxWaiting and MaxWaitingPerAddr bound the connections that have
	// not said hello yet, in all and from one address (see preHello).
	MaxWaiting, MaxWaitingPerAddr int
	// HelloGrace is how long a waiting connection is safe from being
	// pushed out by newer ones of its own address (see room): a device's
	// round trip between the upgrade and its hello.
	HelloGrace time.Duration
	// BodyTimeout is how long an HTTP request body has for its first
	// bytes, and MaxRequestsPerAddr how many requests of one client
	// address are served at once: see httpBounds.
	BodyTimeout        time.Duration
	MaxRequestsPerAddr int
	// MaxBuffered bounds the bytes of the large frames being read and
	// handled at once, over all connections, and FrameGrace is how long
	// a large frame may take before it must arrive at 32 KiB/s: see
	// budget.
	MaxBuffered int64
	FrameGrace  time.Duration

	// Hermes Mobile.
	MobileMaxFrame int64 // largest frame of a Hermes Mobile connection (16 MiB)
	Mobile         mobile.Settings

	// TrustedProxies are the peers believed when they name the client or
	// the public host in forwarding headers (peer.go); AllowedOrigins are
	// web origins besides our own whose pages may connect.
	TrustedProxies []netip.Prefix
	AllowedOrigins []string

	// NoDeflate refuses permessage-deflate (see deflate.go); by default it
	// is negotiated with every client that offers it (DefaultDeflate).
	NoDeflate bool
}

// The defaults of Config, which the command line's flags show too.
const (
	DefaultHelloTimeout       = 15 * time.Second
	DefaultPingInterval       = 20 * time.Second
	DefaultProofEvery         = 20 * time.Millisecond
	DefaultWriteTimeout       = 10 * time.Second
	DefaultMaxFrame           = 1 << 20
	DefaultMaxWaiting         = 1024
	DefaultHelloGrace         = 500 * time.Millisecond
	DefaultBodyTimeout        = 30 * time.Second
	DefaultMaxRequestsPerAddr = 32
	DefaultMaxBuffered        = 64 << 20 // at least the largest frame of either dialect
	DefaultFrameGrace         = 10 * time.Second
	// DefaultDeflate: answer a client's permessage-deflate offer.
	DefaultDeflate = true
	// DefaultShutdownWait bounds a graceful shutdown (the context given to
	// App.Close): turns end with their text kept, then slow peers are cut.
	DefaultShutdownWait = 10 * time.Second
)

// defaults fills unset fields.
func (c *Config) defaults() {
	if c.HelloTimeout == 0 {
		c.HelloTimeout = DefaultHelloTimeout
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.ProofEvery == 0 {
		c.ProofEvery = DefaultProofEvery
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.MobileMaxFrame == 0 {
		c.MobileMaxFrame = mobile.DefaultMaxFrame
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.FrameGrace == 0 {
		c.FrameGrace = DefaultFrameGrace
	}
	if c.MaxBuffered < max(c.MaxFrame, c.MobileMaxFrame) {
		c.MaxBuffered = max(DefaultMaxBuffered, c.MaxFrame, c.MobileMaxFrame)
	}
	if c.MaxWaitingPerAddr == 0 {
		// A quarter of the room: one address (a NAT, a proxy) never
		// fills it alone.
		c.MaxWaitingPerAddr = c.MaxWaiting / 4
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MaxRequestsPerAddr == 0 {
		c.MaxRequestsPerAddr = DefaultMaxRequestsPerAddr
	}
	if c.HelloGrace == 0 {
		c.HelloGrace = DefaultHelloGrace
	}
}

// proofSaveEvery is how often the hub saves the proofs of delivery that
// changed (and once more at shutdown): a crash forgets at most this much
// of them, and a device's next sync then replays those frames again.
const proofSaveEvery = 2 * time.Second
