package mobile

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/wire"
)

// The defaults of Config and Settings, which the command line's flags
// show too.
const (
	DefaultMaxFrame    = mobilev1.MaxFrameBytes // the protocol's limit
	DefaultPromptTTL   = mobilev1.PromptTTLSeconds * time.Second
	DefaultAvatarQuiet = 3 * time.Second
	DefaultEditEvery   = 250 * time.Millisecond
	DefaultSendTimeout = 30 * time.Second
)

// TokenDevices bounds what one token's devices hold of unfinished
// uploads together: this many devices' worth of the protocol's limits per
// device (MaxUploads, MaxUploadBuffer), so device ids of the client's
// choosing do not buy memory without end.
const TokenDevices = 4

// SessionPrefix makes a device's session (and its lane's chat id, and its
// device id in the hub) from its device.id.
const SessionPrefix = "mobile:"

// Config is what the dialect needs from the server.
type Config struct {
	GW   *gateway.Gateway
	Auth *gateway.Auth
	Log  *slog.Logger
	// MaxFrame bounds every frame after the hello (mobilev1.MaxFrameBytes).
	MaxFrame int64
	Settings
}

// Settings are the dialect's options an owner sets (the server's config
// carries them as they are).
type Settings struct {
	// AvatarURL is announced in ready (may be empty).
	AvatarURL string
	// AllowedDevices, when not empty, is the only device ids phones may use.
	AllowedDevices []string
	// DeliverTokens admit service connections that may send deliver.
	DeliverTokens []string
	// ExtraTokens are "device_id=token" entries: tokens bound to a device
	// (stored tokens made for a device bind it too).
	ExtraTokens []string
	// HomeDevice is a deliver's target when it names none.
	HomeDevice string
	// AvatarQuiet is how long after the last output the avatar rests
	// (default 3 s).
	AvatarQuiet time.Duration
	// EditEvery bounds how often a streaming reply is edited, per 3,500
	// characters of text (default 250 ms).
	EditEvery time.Duration
	// PromptTTL is a card's lifetime (default 300 s).
	PromptTTL time.Duration
	// SendTimeout bounds how long a delivery's media waits for room in the
	// target connection's queue (default 30 s).
	SendTimeout time.Duration
}

func (c *Config) defaults() {
	if c.AvatarQuiet == 0 {
		c.AvatarQuiet = DefaultAvatarQuiet
	}
	if c.EditEvery == 0 {
		c.EditEvery = DefaultEditEvery
	}
	if c.PromptTTL == 0 {
		c.PromptTTL = DefaultPromptTTL
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Dialect is the Hermes Mobile side of a server: what outlives one
// connection (the idempotency window, open cards, the live sessions by
// device).
type Dialect struct {
	cfg    Config
	access access
	dedupe *dedupe
	cards  *cards

	mu       sync.Mutex
	sessions map[string]*Session // by hub device id
	// uploads counts unfinished multi-part uploads by token (hub.Conn's
	// Token): besides a device's limits (the protocol's), a token's
	// devices together hold at most TokenDevices times them, so device
	// ids of the client's choosing do not buy memory without end.
	uploads map[string]*tokenUploads
}

// tokenUploads is what one token's connections hold of unfinished files.
type tokenUploads struct{ n, bytes int }

// New makes the dialect.
func New(cfg Config) *Dialect {
	cfg.defaults()
	d := &Dialect{cfg: cfg, dedupe: newDedupe(DedupeTTL, DedupeKeys), sessions: map[string]*Session{}, uploads: map[string]*tokenUploads{}}
	d.cards = &cards{d: d, m: map[string]*card{}}
	d.access = newAccess(cfg.Settings, cfg.Log)
	return d
}

// Close stops the cards' timers.
func (d *Dialect) Close() { d.cards.close() }

func (d *Dialect) session(device string) *Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions[device]
}

// sendTo queues a frame for a device's live connection, if it has one.
func (d *Dialect) sendTo(device string, data []byte) {
	if s := d.session(device); s != nil {
		s.conn.Send(hub.Out{Data: data})
	}
}

// Session is one authenticated Hermes Mobile connection.
type Session struct {
	d        *Dialect
	conn     *hub.Conn
	codec    *codec
	deviceID string // as the device named itself
	hubID    string // SessionPrefix + deviceID
	name     string
	lane     core.Lane
	deliver  bool // a delivery token
	local    bool // over the admin socket
	token    string

	// The read loop's own state.
	uploads   map[string]*upload
	buffered  int
	awaitText *card // a clarify answered "other": the next text answers it
}

// Open handles the first frame, which must be a hello with a valid token.
// On success ready is queued, then the device's open cards.
func (d *Dialect) Open(ctx context.Context, peer wire.Peer, first []byte) (wire.Session, error) {
	f, e := mobilev1.Decode(first)
	if e != nil {
		return nil, fatal(e)
	}
	if f.T != "hello" {
		return nil, fatal(fromCore(ErrNotHello.New(mobilev1.Truncate(f.T, 32))))
	}
	h, e := f.Hello()
	if e != nil {
		return nil, fatal(e)
	}
	if h.DeviceID == "" {
		var b [6]byte
		rand.Read(b[:])
		h.DeviceID = "dev-" + hex.EncodeToString(b[:])
	}
	grant, err := d.access.admit(ctx, d.cfg.Auth, peer.Addr, h.Token, h.DeviceID)
	if err != nil {
		if core.AsError(err).Code == core.CodeInternal {
			d.cfg.Log.Error("mobile hello", "err", err)
		}
		return nil, fatal(fromCore(err))
	}
	if h.DeviceName == "" {
		h.DeviceName = h.DeviceID
	}
	// A delivery token opens a service session: deliver and ping, under a
	// hub id of its own, so it reads no phone's lane, speaks for no phone
	// and replaces none.
	hubID := SessionPrefix + h.DeviceID
	if grant.Deliver {
		hubID = gateway.ServiceDevicePrefix + h.DeviceID
	}
	s := &Session{d: d, deviceID: h.DeviceID, hubID: hubID, name: h.DeviceName, lane: core.Lane{ChatID: hubID},
		deliver: grant.Deliver, local: peer.Local, token: grant.TokenID, uploads: map[string]*upload{}}
	// A phone's lane is listed at once; a delivery service's only when
	// something is sent or delivered into it.
	if !grant.Deliver {
		if _, err := d.cfg.GW.EnsureChannel(ctx, s.lane.ChatID, s.name); err != nil {
			if e := core.AsError(err); e.Code != core.CodeInternal {
				return nil, fatal(fromCore(e)) // a full directory
			}
			d.cfg.Log.Error("mobile: the device's channel", "device", hubID, "err", err)
			return nil, fatal(fromCore(core.ErrInternal.New()))
		}
	}
	s.codec = newCodec(d, hubID, s.lane, hubID)
	conn, _, err := d.cfg.GW.Connect(ctx, gateway.Device{ID: hubID, Name: h.DeviceName, Token: tokenKey(grant.TokenID, h.Token)}, s.codec)
	if err != nil {
		if e := core.AsError(err); e.Code != core.CodeInternal {
			return nil, fatal(fromCore(e)) // a bound (the token's connections)
		}
		d.cfg.Log.Error("mobile connect", "device", hubID, "err", err)
		return nil, fatal(fromCore(core.ErrInternal.New()))
	}
	s.conn = conn
	s.codec.setConn(conn)
	if !grant.Deliver { // a service is no delivery's target
		d.mu.Lock()
		d.sessions[hubID] = s
		d.mu.Unlock()
	}
	// Files go both ways through the media store: a gateway without one
	// announces none.
	in, out := mobilev1.MediaInKinds, mobilev1.MediaOutKinds
	if !d.cfg.GW.TakesMedia() {
		in, out = []string{}, []string{}
	}
	conn.SendFirst(hub.Out{Data: mobilev1.Marshal(mobilev1.Ready{
		T: "ready", V: mobilev1.Version, Session: hubID, Device: mobilev1.Device{ID: h.DeviceID, Name: h.DeviceName}, AvatarURL: d.cfg.AvatarURL,
		Capabilities: mobilev1.Caps{
			Text: true, Voice: true, Typing: true,
			AvatarStates: []string{mobilev1.AvatarIdle, mobilev1.AvatarThinking, mobilev1.AvatarSpeaking},
			MediaIn:      in, MediaOut: out, Prompts: mobilev1.PromptKinds,
			Edit: true, MaxMediaBytes: mobilev1.MaxMediaBytes, MaxTextChars: mobilev1.MaxTextChars,
		},
	})})
	now := time.Now()
	for _, c := range d.cards.of(hubID) {
		if d.cfg.GW.PickerPending(c.id) {
			conn.Send(hub.Out{Data: c.frame(now)})
		} else if d.cards.take(c.id, hubID) != nil {
			// Closed while the device was away: the card it may still
			// show is told so (what was chosen is not known here).
			conn.Send(hub.Out{Data: c.doneFrame("")})
		}
	}
	return s, nil
}

// Conn is the session's hub connection.
func (s *Session) Conn() *hub.Conn { return s.conn }

// TokenID is the id of the token the session said hello with.
func (s *Session) TokenID() string { return s.token }

// tokenKey names the token a connection came with, for per-token limits:
// a stored token's id or "env", else (bindings and delivery tokens share
// an id) a digest of the token — never the token itself.
func tokenKey(id, token string) string {
	if id != "binding" && id != "deliver" {
		return id
	}
	h := sha256.Sum256([]byte(token))
	return id + ":" + hex.EncodeToString(h[:8])
}

// Close ends the session: timers stop and unfinished uploads are freed.
func (s *Session) Close() {
	s.codec.close()
	for id := range s.uploads {
		s.drop(id)
	}
	s.uploads, s.buffered, s.awaitText = nil, 0, nil
	s.d.mu.Lock()
	if s.d.sessions[s.hubID] == s {
		delete(s.d.sessions, s.hubID)
	}
	s.d.mu.Unlock()
}

// known are the device frame types; any other is ignored.
var known = map[string]bool{
	"hello": true, "text": true, "audio": true, "media": true, "prompt": true,
	"typing": true, "ping": true, "ack": true, "deliver": true,
}

// Handle processes one text frame and returns its type for metrics
// ("other" for types the protocol does not know). Every error after hello
// is answered with an error frame and the connection stays open.
func (s *Session) Handle(ctx context.Context, data []byte) (string, *Fatal) {
	f, e := mobilev1.Decode(data)
	if e != nil {
		s.fail("", e)
		return "other", nil
	}
	typ := f.T
	if !known[typ] {
		s.d.cfg.Log.Debug("mobile: ignoring an unknown frame", "t", mobilev1.Truncate(f.T, 64), "device", s.hubID)
		return "other", nil
	}
	if e := s.dispatch(ctx, f); e != nil {
		s.fail(f.ID, e)
	}
	return typ, nil
}

// Settle returns at once: a frame's answer is queued before Handle returns
// (message frames are not pipelined).
func (s *Session) Settle() {}

// HandleBinary answers a binary frame: the protocol has none.
func (s *Session) HandleBinary(ctx context.Context, data []byte) {
	s.fail("", ErrBinaryFrame.New())
}

// fail answers a frame with err (fromCore: the one mapping).
func (s *Session) fail(id string, err error) {
	e := fromCore(err)
	if e.Code == mobilev1.CodeInternal {
		s.d.cfg.Log.Error("mobile: request failed", "device", s.hubID, "err", err)
	}
	s.conn.Send(hub.Out{Data: e.Frame(id)})
}

func (s *Session) reply(v any) { s.conn.Send(hub.Out{Data: mobilev1.Marshal(v)}) }

func (s *Session) caller() gateway.Caller { return gateway.Caller{Conn: s.conn} }

// serviceFrames are what a service session (a delivery token) may send.
var serviceFrames = map[string]bool{"hello": true, "ping": true, "deliver": true, "ack": true}

func (s *Session) dispatch(ctx context.Context, f *mobilev1.Frame) error {
	if s.deliver && !serviceFrames[f.T] {
		return ErrServiceFrame.New(f.T)
	}
	switch f.T {
	case "hello":
		return ErrHelloAgain.New()
	case "text":
		text, e := f.Text()
		if e != nil {
			return e
		}
		return s.once(f.ID, func() error {
			if done, e := s.answerText(ctx, text); done {
				return e
			}
			return s.send(ctx, gateway.SendRequest{Lane: s.lane, Text: text})
		})
	case "audio":
		a, e := f.Audio()
		if e != nil {
			return e
		}
		return s.once(f.ID, func() error { return s.audio(ctx, a) })
	case "media":
		m, e := f.Media()
		if e != nil {
			return e
		}
		return s.media(ctx, f.ID, m)
	case "prompt":
		a, e := f.Prompt()
		if e != nil {
			return e
		}
		return s.answer(ctx, a)
	case "ping":
		s.reply(mobilev1.Pong{T: "pong", TS: f.PingTS()})
	case "deliver":
		if !s.local && !s.deliver {
			return ErrDeliverForbidden.New()
		}
		d, e := f.Deliver()
		if e != nil {
			return e
		}
		return s.deliverTo(ctx, d)
	case "typing", "ack":
		// The person typing changes no avatar state (the protocol has no
		// listening state); acks need nothing.
	}
	return nil
}

// key is a frame's idempotency key.
func (s *Session) key(id string) string { return s.lane.ChatID + ":" + id }

// once runs fn unless the frame's key was handled within the window; a
// duplicate is dropped silently. A failed fn does not count.
func (s *Session) once(id string, fn func() error) error {
	k := s.key(id)
	if !s.d.dedupe.claim(k) {
		return nil
	}
	e := fn()
	if e != nil {
		s.d.dedupe.release(k)
	}
	return e
}

// send hands a person's message to the gateway, in the device's lane. A
// lane whose channel was deleted is listed again.
func (s *Session) send(ctx context.Context, req gateway.SendRequest) error {
	gw := s.d.cfg.GW
	err := gw.Send(ctx, s.caller(), req)
	if errors.Is(err, gateway.ErrUnknownChat) {
		if _, cerr := gw.EnsureChannel(ctx, s.lane.ChatID, s.name); cerr == nil {
			err = gw.Send(ctx, s.caller(), req)
		}
	}
	return err
}
