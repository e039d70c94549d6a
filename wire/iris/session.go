package iris

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// Config is what the dialect needs from the server.
type Config struct {
	GW   *gateway.Gateway
	Auth *gateway.Auth
	Log  *slog.Logger
	// Push names the configured push backend (fcm | ntfy | none) and the
	// ntfy server, for hello.ack.
	Push           string
	PushNtfyServer string
	VAPIDPublicKey string
}

// Is reports whether data looks like an Iris frame (a "type" member), which
// is how the server picks the dialect from the first frame.
func Is(data []byte) bool { return irisv1.HasType(data) }

// Session is one authenticated Iris connection.
type Session struct {
	cfg   Config
	conn  *hub.Conn
	token string // the id of the token it said hello with
	ctx   context.Context
	stop  context.CancelFunc

	// syncing is set while the connection's sync runs: one at a time, a
	// second is refused (rate_limited) rather than queued, so a flood of
	// syncs holds one goroutine, not one each.
	syncing atomic.Bool
	// Pulls are served one after another, in the order asked: binary
	// frames do not say whose they are.
	pulls    chan pullJob
	pullOnce sync.Once
	wg       sync.WaitGroup
	// pipe holds the message.send still committing: every other frame,
	// and any error reply, waits for them (Handle), so pipelining changes
	// nothing a device sees but the speed. Made at the first send (an
	// idle connection pays nothing for it); read loop only.
	pipe *gateway.SendPipe
}

// Open handles the first frame, which must be a hello with a valid token.
// On success the hello.ack, status and stream snapshots are queued.
func Open(ctx context.Context, cfg Config, remoteAddr string, first []byte) (*Session, error) {
	env, id, err := decode(first)
	if err != nil {
		return nil, fatal(id, err, "bad hello")
	}
	if env.Type != irisv1.TypeHello {
		return nil, fatal(id, errHelloFirst(env.Type), "hello expected")
	}
	var h irisv1.Hello
	if err := payload(env, &h); err != nil {
		return nil, fatal(id, err, "malformed hello")
	}
	if h.Caps.MinProtocol > Version {
		return nil, fatal(id, errMinProtocol(h.Caps.MinProtocol), "unsupported protocol version")
	}
	grant, err := cfg.Auth.Admit(ctx, gateway.Attempt{Dialect: gateway.DialectIris, Addr: remoteAddr, Token: h.Token, Device: h.DeviceID})
	if err != nil {
		return nil, fatal(id, err, string(irisCode(core.AsError(err).Code)))
	}
	if h.DeviceID == "" {
		h.DeviceID = core.NewID("dev_anon_")
	}
	conn, w, err := cfg.GW.Connect(ctx, gateway.Device{ID: h.DeviceID, Name: h.DeviceName, FCMToken: h.FCMToken, NtfyTopic: h.NtfyTopic, Token: grant.TokenID}, codec{})
	if err != nil {
		if code := core.AsError(err).Code; code != core.CodeInternal {
			return nil, fatal(id, err, string(irisCode(code))) // a bound (the token's connections)
		}
		return nil, fatal(id, err, "internal error")
	}
	sctx, stop := context.WithCancel(context.Background())
	s := &Session{cfg: cfg, conn: conn, token: grant.TokenID, ctx: sctx, stop: stop}
	push := cfg.Push
	if push == "" {
		push = "none"
	}
	ack := irisv1.HelloAck{
		ServerCaps: irisv1.ServerCaps{Streaming: true, Reasoning: true, Tools: true, Media: true, Search: true,
			Push: push, PushNtfyServer: cfg.PushNtfyServer, VAPIDPublicKey: cfg.VAPIDPublicKey, Pickers: true},
		SyncCursor: w.SyncCursor, LastPushedCursor: w.LastPushedCursor, Channels: channelList(w.Channels),
	}
	conn.SendFirst(hub.Out{Data: marshal(irisv1.Envelope{V: Version, ID: id, Type: irisv1.TypeHelloAck}, ack)})
	if w.PushRefused != nil {
		// The hello is answered (hello.ack carries its id); this error,
		// without one, says why the device will not be woken.
		s.sendError(0, w.PushRefused)
	}
	return s, nil
}

// Conn is the session's hub connection.
func (s *Session) Conn() *hub.Conn { return s.conn }

// TokenID is the id of the token the session said hello with.
func (s *Session) TokenID() string { return s.token }

// Close ends the session's background work (a running sync) once the
// sends it accepted are answered: a send that was queued commits, whether
// or not the device is still there to hear of it.
func (s *Session) Close() {
	s.pipe.Wait()
	s.stop()
	s.wg.Wait()
}

// Handle processes one text frame and returns its type for metrics: a
// type of the handler table, or "other" (the label set stays bounded
// whatever a client sends). It returns a *Fatal when the connection must
// close.
func (s *Session) Handle(ctx context.Context, data []byte) (string, error) {
	env, id, err := decode(data)
	if err != nil {
		s.pipe.Wait()
		if err == errBadVersion {
			return "other", fatal(id, err, "unsupported protocol version")
		}
		s.sendError(id, err)
		return "other", nil
	}
	if env.Type != irisv1.TypeMessageSend {
		// A barrier: it is handled as if the sends before it had been
		// answered one by one, as they have by then.
		s.pipe.Wait()
	}
	h, ok := handlers[env.Type]
	if !ok {
		// Ignored, for forward compatibility, unless it carries an id:
		// every request with one gets its one reply.
		if id != 0 {
			s.sendError(id, errUnknownType(env.Type))
		}
		return "other", nil
	}
	if err := h(s, ctx, env); err != nil {
		s.pipe.Wait() // a send's error follows the replies of those before it
		e := core.AsError(err)
		if e.Code == core.CodeInternal {
			s.cfg.Log.Error("request failed", "type", env.Type, "device", s.conn.DeviceID, "err", err)
		}
		s.sendError(id, e)
	}
	return env.Type, nil
}

// sends is the session's pipe, made at the first send.
func (s *Session) sends() *gateway.SendPipe {
	if s.pipe == nil {
		s.pipe = s.cfg.GW.NewSendPipe(s.failed)
	}
	return s.pipe
}

// Settle returns once every send the session accepted is answered.
func (s *Session) Settle() { s.pipe.Wait() }

// failed answers a pipelined message.send that failed once queued.
func (s *Session) failed(id int64, err error) {
	e := core.AsError(err)
	if e.Code == core.CodeInternal {
		s.cfg.Log.Error("request failed", "type", irisv1.TypeMessageSend, "device", s.conn.DeviceID, "err", err)
	}
	s.sendError(id, e)
}

func (s *Session) caller(id int64) gateway.Caller { return gateway.Caller{Conn: s.conn, ReqID: id} }

func (s *Session) reply(id int64, typ irisv1.FrameType, lane core.Lane, p any) {
	s.conn.SendHere(hub.Out{Data: marshal(irisv1.Envelope{V: Version, ID: id, Type: typ, ChatID: lane.ChatID, ThreadID: lane.ThreadID}, p)})
}
