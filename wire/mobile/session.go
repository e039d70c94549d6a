package mobile

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
)

// SessionPrefix makes a device's session (and its lane's chat id, and its
// device id in the hub) from its device.id.
const SessionPrefix = "mobile:"

// Config is what the dialect needs from the server.
type Config struct {
	GW   *gateway.Gateway
	Auth *gateway.Auth
	Log  *slog.Logger
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
		c.AvatarQuiet = 3 * time.Second
	}
	if c.EditEvery == 0 {
		c.EditEvery = 250 * time.Millisecond
	}
	if c.PromptTTL == 0 {
		c.PromptTTL = PromptTTLSeconds * time.Second
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = 30 * time.Second
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
	access gateway.MobileAccess
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
	d.access = gateway.MobileAccess{Deliver: cfg.DeliverTokens, Allowed: cfg.AllowedDevices, Bindings: map[string][]string{}}
	for _, e := range cfg.ExtraTokens {
		dev, tok, ok := strings.Cut(e, "=")
		dev, tok = strings.TrimSpace(dev), strings.TrimSpace(tok)
		if !ok || dev == "" || tok == "" {
			cfg.Log.Warn("mobile: ignoring an extra token that is not device_id=token")
			continue
		}
		// Keyed by the device's id in the gateway: such an entry binds
		// the phone, never an Iris device of the same name.
		hub := SessionPrefix + dev
		d.access.Bindings[hub] = append(d.access.Bindings[hub], tok)
	}
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

// Peer is where a connection comes from.
type Peer struct {
	Addr string
	// Local is a connection over the gateway's admin socket, which only
	// its owner's processes can open: such a connection may send deliver
	// without a delivery token. A loopback TCP address proves nothing of
	// the kind (a reverse proxy on the same host makes everyone loopback).
	Local bool
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
func (d *Dialect) Open(ctx context.Context, peer Peer, first []byte) (*Session, error) {
	f, e := decode(first)
	if e != nil {
		return nil, fatal(e)
	}
	if f.T != "hello" {
		return nil, fatal(errorf(CodeBadFrame, "the first frame must be hello, not %q", truncate(f.T, 32)))
	}
	h, e := parseHello(f)
	if e != nil {
		return nil, fatal(e)
	}
	if h.DeviceID == "" {
		var b [6]byte
		rand.Read(b[:])
		h.DeviceID = "dev-" + hex.EncodeToString(b[:])
	}
	grant, err := d.cfg.Auth.Admit(ctx, gateway.Attempt{Dialect: gateway.DialectMobile, Addr: peer.Addr, Token: h.Token,
		Device: SessionPrefix + h.DeviceID, Mobile: &d.access})
	if err != nil {
		ce := core.AsError(err)
		switch ce.Code {
		case core.CodeForbidden:
			return nil, fatal(errorf(CodeForbidden, "%s", ce.Message))
		case core.CodeAuth, core.CodeRateLimited:
			return nil, fatal(errorf(CodeAuthFailed, "%s", ce.Message))
		}
		d.cfg.Log.Error("mobile hello", "err", err)
		return nil, fatal(errorf(CodeInternal, "internal error"))
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
				return nil, fatal(errorf(CodeBadFrame, "%s", e.Message)) // a full directory
			}
			d.cfg.Log.Error("mobile: the device's channel", "device", hubID, "err", err)
			return nil, fatal(errorf(CodeInternal, "internal error"))
		}
	}
	s.codec = newCodec(d, hubID, s.lane, hubID)
	conn, _, err := d.cfg.GW.Connect(ctx, gateway.Device{ID: hubID, Name: h.DeviceName, Token: tokenKey(grant.TokenID, h.Token)}, s.codec)
	if err != nil {
		if e := core.AsError(err); e.Code != core.CodeInternal {
			return nil, fatal(errorf(CodeBadFrame, "%s", e.Message)) // a bound (the token's connections)
		}
		d.cfg.Log.Error("mobile connect", "device", hubID, "err", err)
		return nil, fatal(errorf(CodeInternal, "internal error"))
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
	in, out := mediaInKinds, mediaOutKinds
	if !d.cfg.GW.TakesMedia() {
		in, out = []string{}, []string{}
	}
	conn.SendFirst(hub.Out{Data: marshal(readyJSON{
		T: "ready", V: Version, Session: hubID, Device: deviceJSON{ID: h.DeviceID, Name: h.DeviceName}, AvatarURL: d.cfg.AvatarURL,
		Capabilities: capsJSON{
			Text: true, Voice: true, Typing: true,
			AvatarStates: []string{AvatarIdle, AvatarThinking, AvatarSpeaking},
			MediaIn:      in, MediaOut: out, Prompts: promptKinds,
			Edit: true, MaxMediaBytes: MaxMediaBytes, MaxTextChars: MaxTextChars,
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

// Revoked is the error that ends a session whose token was revoked:
// auth_failed (fatal), then a close with 1008.
func Revoked() *Fatal { return fatal(errorf(CodeAuthFailed, "this token was revoked")) }

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
func (s *Session) Handle(ctx context.Context, data []byte) (string, error) {
	f, e := decode(data)
	if e != nil {
		s.fail("", e)
		return "other", nil
	}
	typ := f.T
	if !known[typ] {
		s.d.cfg.Log.Debug("mobile: ignoring an unknown frame", "t", truncate(f.T, 64), "device", s.hubID)
		return "other", nil
	}
	if e := s.dispatch(ctx, f); e != nil {
		s.fail(f.ID, e)
	}
	return typ, nil
}

// HandleBinary answers a binary frame: the protocol has none.
func (s *Session) HandleBinary(ctx context.Context, data []byte) {
	s.fail("", errorf(CodeBadFrame, "binary frames are not part of the protocol: send JSON text frames"))
}

func (s *Session) fail(id string, e *Error) {
	if e.Code == CodeInternal {
		s.d.cfg.Log.Error("mobile: request failed", "device", s.hubID, "err", e.Message)
	}
	s.conn.Send(hub.Out{Data: errorFrame(e, id)})
}

func (s *Session) reply(v any) { s.conn.Send(hub.Out{Data: marshal(v)}) }

func (s *Session) caller() gateway.Caller { return gateway.Caller{Conn: s.conn} }

// serviceFrames are what a service session (a delivery token) may send.
var serviceFrames = map[string]bool{"hello": true, "ping": true, "deliver": true, "ack": true}

func (s *Session) dispatch(ctx context.Context, f *inFrame) *Error {
	if s.deliver && !serviceFrames[f.T] {
		return errorf(CodeForbidden, "a delivery token opens a service connection, which may send deliver and ping only, not %s", f.T)
	}
	switch f.T {
	case "hello":
		return errorf(CodeBadFrame, "already said hello on this connection")
	case "text":
		text, e := parseText(f)
		if e != nil {
			return e
		}
		return s.once(f.ID, func() *Error {
			if done, e := s.answerText(ctx, text); done {
				return e
			}
			return s.send(ctx, gateway.SendRequest{Lane: s.lane, Text: text})
		})
	case "audio":
		a, e := parseAudio(f)
		if e != nil {
			return e
		}
		return s.once(f.ID, func() *Error { return s.audio(ctx, a) })
	case "media":
		m, e := parseMedia(f)
		if e != nil {
			return e
		}
		return s.media(ctx, f.ID, m)
	case "prompt":
		a, e := parsePrompt(f)
		if e != nil {
			return e
		}
		return s.answer(ctx, a)
	case "ping":
		s.reply(pongJSON{T: "pong", TS: pingTS(f)})
	case "deliver":
		if !s.local && !s.deliver {
			return errorf(CodeForbidden, "deliver is accepted only from cron: a connection with a delivery token, or one over the gateway's admin socket")
		}
		d, e := parseDeliver(f)
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
func (s *Session) once(id string, fn func() *Error) *Error {
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
func (s *Session) send(ctx context.Context, req gateway.SendRequest) *Error {
	gw := s.d.cfg.GW
	err := gw.Send(ctx, s.caller(), req)
	if err != nil && core.AsError(err).Code == core.CodeNotFound {
		if _, cerr := gw.EnsureChannel(ctx, s.lane.ChatID, s.name); cerr == nil {
			err = gw.Send(ctx, s.caller(), req)
		}
	}
	if err != nil {
		return fromCore(err)
	}
	return nil
}

// fromCore maps a core error to this dialect's codes.
func fromCore(err error) *Error {
	e := core.AsError(err)
	code := CodeBadFrame // also for rate_limited: a bound (a full lane queue), not an auth failure
	switch e.Code {
	case core.CodeAuth:
		code = CodeAuthFailed
	case core.CodeForbidden:
		code = CodeForbidden
	case core.CodeMediaTooLarge:
		code = CodeTooBig
	case core.CodeInternal:
		code = CodeInternal
	}
	return &Error{Code: code, Message: e.Message}
}

// audio hands a voice message to the agent: the recording is kept in the
// media store and attached to a message whose text is the device's
// transcript, when it sent one. The agent gets the file's path (and the
// transcript), Iris devices a message they can pull the recording of.
func (s *Session) audio(ctx context.Context, a audio) *Error {
	data, e := decodeB64("data", a.Data)
	if e != nil {
		return e
	}
	return s.handOff(ctx, "voice", "audio/"+a.Format, "voice."+a.Format, a.Text, bytes.NewReader(data))
}

// upload is a multi-part media file being assembled.
type upload struct {
	kind, mime, filename, caption string
	parts                         [][]byte // by part index; nil: not yet
	got                           int
	size                          int
}

// media takes one chunk of a file. Limits are checked before anything is
// allocated; a chunk that breaks one drops its upload. A file the window
// has seen whole is a duplicate, whatever chunk of it comes.
func (s *Session) media(ctx context.Context, id string, m mediaChunk) *Error {
	k := s.key(id)
	if s.d.dedupe.seen(k) {
		return nil
	}
	if m.Parts == 1 {
		return s.once(id, func() *Error {
			data, e := decodeB64("data", m.Data)
			if e != nil {
				return e
			}
			return s.handOff(ctx, m.Kind, m.Mime, m.Filename, m.Caption, bytes.NewReader(data))
		})
	}
	u := s.uploads[id]
	if u == nil {
		if len(s.uploads) >= MaxUploads {
			return errorf(CodeTooBig, "%d unfinished multi-part uploads already: finish one first", MaxUploads)
		}
		if s.d.tokenUploads(s.conn.Token).n >= TokenDevices*MaxUploads {
			return errorf(CodeTooBig, "the devices of this token have %d unfinished multi-part uploads: finish some first", TokenDevices*MaxUploads)
		}
	} else if len(u.parts) != m.Parts {
		s.drop(id)
		return errorf(CodeBadFrame, "parts changed from %d to %d within one file: the upload is dropped", len(u.parts), m.Parts)
	} else if u.parts[m.Part] != nil {
		return nil // a chunk sent twice
	}
	have := 0
	if u != nil {
		have = u.size
	}
	if have+m.Size > MaxMediaBytes {
		s.drop(id)
		return errorf(CodeTooBig, "the file is larger than %d bytes: compress it", MaxMediaBytes)
	}
	if s.buffered+m.Size > MaxUploadBuffer {
		s.drop(id)
		return errorf(CodeTooBig, "this device's unfinished uploads would exceed %d bytes: finish one first", MaxUploadBuffer)
	}
	if s.d.tokenUploads(s.conn.Token).bytes+m.Size > TokenDevices*MaxUploadBuffer {
		s.drop(id)
		return errorf(CodeTooBig, "the unfinished uploads of this token's devices would exceed %d bytes: finish some first", TokenDevices*MaxUploadBuffer)
	}
	data, e := decodeB64("data", m.Data)
	if e != nil {
		s.drop(id)
		return e
	}
	if u == nil {
		u = &upload{kind: m.Kind, parts: make([][]byte, m.Parts)}
		s.uploads[id] = u
		s.d.countUpload(s.conn.Token, 1, 0)
	}
	if u.mime == "" {
		u.mime = m.Mime
	}
	if u.filename == "" {
		u.filename = m.Filename
	}
	if u.caption == "" {
		u.caption = m.Caption
	}
	u.parts[m.Part] = data
	u.got++
	u.size += len(data)
	s.buffered += len(data)
	s.d.countUpload(s.conn.Token, 0, len(data))
	if u.got < len(u.parts) {
		return nil
	}
	// Assembled: every part is here, in order.
	s.drop(id)
	return s.once(id, func() *Error {
		parts := make([]io.Reader, len(u.parts))
		for i, p := range u.parts {
			parts[i] = bytes.NewReader(p)
		}
		return s.handOff(ctx, u.kind, u.mime, u.filename, u.caption, io.MultiReader(parts...))
	})
}

// drop frees an unfinished upload.
func (s *Session) drop(id string) {
	if u := s.uploads[id]; u != nil {
		s.buffered -= u.size
		delete(s.uploads, id)
		s.d.countUpload(s.conn.Token, -1, -u.size)
	}
}

// tokenUploads is a copy of what tok's connections hold now.
func (d *Dialect) tokenUploads(tok string) tokenUploads {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.uploads[tok]; t != nil {
		return *t
	}
	return tokenUploads{}
}

// countUpload adds n uploads and size bytes to tok's count.
func (d *Dialect) countUpload(tok string, n, size int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.uploads[tok]
	if t == nil {
		t = &tokenUploads{}
		d.uploads[tok] = t
	}
	t.n += n
	t.bytes += size
	if t.n <= 0 {
		delete(d.uploads, tok)
	}
}

// handOff keeps a whole file the device sent in the media store and sends
// the message that carries it into the device's lane, the caption (for
// audio, the transcript) as its text: the same path an Iris message.send
// with media_refs takes, so the agent gets the file and Iris devices see
// the message with media they can pull.
func (s *Session) handOff(ctx context.Context, kind, mimeType, filename, caption string, data io.Reader) *Error {
	if !s.d.cfg.GW.TakesMedia() {
		return errorf(CodeUnsupportedFrame, "this gateway keeps no files (ready announced no media)")
	}
	if mt, _, err := mime.ParseMediaType(mimeType); err != nil || !strings.Contains(mt, "/") {
		mimeType = "" // the store derives it from the file name or the bytes
	}
	if filename == "" {
		filename = nameFor(kind, mimeType)
	}
	ref, err := s.d.cfg.GW.KeepFile(ctx, s.caller(), kind, mimeType, filename, data)
	if err != nil {
		return fromCore(err)
	}
	return s.send(ctx, gateway.SendRequest{Lane: s.lane, Text: strings.TrimSpace(caption), MediaRefs: []string{ref}})
}

// answer takes a card's answer.
func (s *Session) answer(ctx context.Context, a promptAnswer) *Error {
	c := s.d.cards.get(a.PromptID)
	if c == nil {
		s.reply(promptDoneJSON{T: "prompt_done", ID: a.PromptID, Expired: true})
		return nil
	}
	if c.device != s.hubID {
		return errorf(CodeForbidden, "this card was shown to another device")
	}
	gw := s.d.cfg.GW
	if !gw.PickerPending(c.id) { // answered on another device, or timed out
		s.d.cards.done(c)
		s.reply(promptDoneJSON{T: "prompt_done", ID: c.id, Expired: true})
		return nil
	}
	applied, value, needText := c.resolve(a.OptionID, a.Text)
	if needText {
		s.d.cards.done(c)
		s.awaitText = c
		s.reply(promptDoneJSON{T: "prompt_done", ID: c.id, OptionID: applied})
		return nil
	}
	if err := gw.SelectPicker(ctx, s.caller(), c.id, value); err != nil {
		return fromCore(err)
	}
	// The picker's close has normally told this device already, with the
	// same option; it did not if the picker went meanwhile without one.
	if s.d.cards.take(c.id, s.hubID) != nil {
		s.reply(promptDoneJSON{T: "prompt_done", ID: c.id, OptionID: applied})
	}
	return nil
}

// answerText gives a text message to a clarify card answered "other"
// before, while that question still waits; done is false when the text is
// an ordinary message.
func (s *Session) answerText(ctx context.Context, text string) (done bool, e *Error) {
	c := s.awaitText
	if c == nil {
		return false, nil
	}
	s.awaitText = nil
	gw := s.d.cfg.GW
	if time.Now().After(c.deadline) || !gw.PickerPending(c.id) {
		return false, nil
	}
	_, value, _ := c.resolve("other", text)
	if err := gw.SelectPicker(ctx, s.caller(), c.id, value); err != nil {
		s.awaitText = c // let the person try again
		return true, fromCore(err)
	}
	return true, nil
}

// deliverTo carries out a service delivery: text becomes a message in the
// target device's lane (so Iris devices see it too), media goes to the
// target's connection in chunks. The target must be online.
func (s *Session) deliverTo(ctx context.Context, d delivery) *Error {
	target := strings.TrimPrefix(d.Target, SessionPrefix)
	if target == "" {
		target = strings.TrimPrefix(strings.TrimSpace(s.d.cfg.HomeDevice), SessionPrefix)
	}
	if target == "" {
		return errorf(CodeBadFrame, "deliver names no target and no home device is configured")
	}
	ts := s.d.session(SessionPrefix + target)
	if ts == nil {
		return errorf(CodeDeviceOffline, "device %q is not online", truncate(target, 64))
	}
	var data []byte
	if d.Media != nil {
		var e *Error
		if data, e = decodeB64("media.data", d.Media.Data); e != nil {
			return e
		}
	}
	gw := s.d.cfg.GW
	if strings.TrimSpace(d.Text) != "" {
		if _, err := gw.EnsureChannel(ctx, ts.lane.ChatID, ts.name); err != nil {
			return fromCore(err)
		}
		if _, err := gw.Deliver(ctx, ts.lane, d.Text); err != nil {
			return fromCore(err)
		}
	}
	if d.Media != nil {
		m := d.Media
		mimeType := m.Mime
		if mimeType == "" {
			mimeType = mime.TypeByExtension(strings.ToLower(filepath.Ext(m.Filename)))
		}
		if mimeType == "" {
			mimeType = "application/octet-stream"
		}
		filename := m.Filename
		if filename == "" {
			filename = nameFor(m.Kind, mimeType)
		}
		sctx, cancel := context.WithTimeout(ctx, s.d.cfg.SendTimeout)
		defer cancel()
		err := mediaFrames(mediaOutJSON{ID: core.NewID("md_"), Kind: m.Kind, Mime: mimeType, Filename: filename, Caption: m.Caption},
			int64(len(data)), bytes.NewReader(data), downChunkBytes, func(o hub.Out) error { return ts.conn.SendWait(sctx, o) })
		if err != nil {
			return errorf(CodeDeviceOffline, "device %q did not take the file: %v", truncate(target, 64), err)
		}
	}
	return nil
}

// nameFor names a file its sender left unnamed: its kind, with the mime
// type's extension when there is one, so the receiver can open it.
func nameFor(kind, mimeType string) string {
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		return kind + exts[0]
	}
	return kind
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
