package iris

import (
	"bytes"
	"context"
	"encoding/json"
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
func Is(data []byte) bool {
	var probe struct {
		Type *string `json:"type"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Type != nil
}

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
}

// Open handles the first frame, which must be a hello with a valid token.
// On success the hello.ack, status and stream snapshots are queued.
func Open(ctx context.Context, cfg Config, remoteAddr string, first []byte) (*Session, error) {
	env, id, err := decode(first)
	if err != nil {
		return nil, fatal(id, err, "bad hello")
	}
	if env.Type != "hello" {
		return nil, fatal(id, core.Errorf(core.CodeUnsupported, "the first frame must be hello, not %q", env.Type), "hello expected")
	}
	var h irisv1.Hello
	if err := payload(env, &h); err != nil {
		return nil, fatal(id, err, "malformed hello")
	}
	if h.Caps.MinProtocol > Version {
		return nil, fatal(id, core.Errorf(core.CodeUnsupported, "this gateway speaks Iris v%d; the app needs v%d", Version, h.Caps.MinProtocol), "unsupported protocol version")
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
	conn.SendFirst(hub.Out{Data: marshal(irisv1.Envelope{V: Version, ID: id, Type: "hello.ack"}, ack)})
	if w.PushRefused != nil {
		// The hello is answered (hello.ack carries its id); this error,
		// without one, says why the device will not be woken.
		s.sendError(0, w.PushRefused)
	}
	return s, nil
}

func fatal(id int64, err error, reason string) *Fatal {
	e := core.AsError(err)
	return &Fatal{Frame: errorFrame(id, e), Status: policyViolation, Reason: reason, Err: e}
}

// Conn is the session's hub connection.
func (s *Session) Conn() *hub.Conn { return s.conn }

// TokenID is the id of the token the session said hello with.
func (s *Session) TokenID() string { return s.token }

// Close ends the session's background work (a running sync).
func (s *Session) Close() {
	s.stop()
	s.wg.Wait()
}

// errBadVersion ends a connection that speaks another major version.
var errBadVersion = core.Errorf(core.CodeUnsupported, "unsupported protocol version; this gateway speaks v%d", Version)

// Handle processes one text frame and returns its type for metrics
// ("other" for types the gateway does not know). It returns a *Fatal when
// the connection must close.
func (s *Session) Handle(ctx context.Context, data []byte) (string, error) {
	env, id, err := decode(data)
	if err != nil {
		if err == errBadVersion {
			return "other", fatal(id, err, "unsupported protocol version")
		}
		s.sendError(id, err)
		return "other", nil
	}
	typ := env.Type
	if !known[typ] {
		typ = "other"
	}
	if err := s.dispatch(ctx, env, id); err != nil {
		e := core.AsError(err)
		if e.Code == core.CodeInternal {
			s.cfg.Log.Error("request failed", "type", env.Type, "device", s.conn.DeviceID, "err", err)
		}
		s.sendError(id, e)
	}
	return typ, nil
}

// known are the request types; any other is ignored.
var known = map[string]bool{
	"hello": true, "ping": true, "message.send": true, "history": true, "sync": true, "message.delete": true,
	"read.receipt": true, "agent.stop": true, "agent.steer": true, "fcm.register": true, "channel.list": true,
	"channel.create": true, "channel.rename": true, "channel.set_default": true, "channel.favorite": true,
	"channel.icon": true, "channel.set_automation": true, "channel.delete": true, "search": true,
	"media.upload.start": true, "media.upload.end": true, "media.pull": true, "commands.catalog": true,
	"commands.complete": true, "picker.select": true,
}

func (s *Session) caller(id int64) gateway.Caller { return gateway.Caller{Conn: s.conn, ReqID: id} }

func (s *Session) dispatch(ctx context.Context, env *irisv1.Request, id int64) error {
	gw := s.cfg.GW
	lane := core.Lane{ChatID: env.ChatID, ThreadID: env.ThreadID}
	switch env.Type {
	case "ping":
		var p irisv1.Ping
		if err := payload(env, &p); err != nil {
			return err
		}
		s.reply(id, "pong", core.Lane{}, irisv1.Pong{TS: p.TS})
	case "hello":
		return core.Errorf(core.CodeUnsupported, "already said hello")
	case "message.send":
		var p irisv1.MessageSend
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.Send(ctx, s.caller(id), gateway.SendRequest{Lane: lane, Text: p.Text, ReplyTo: p.ReplyTo, MediaRefs: p.MediaRefs, AutoThread: p.AutoThread})
	case "history":
		var p irisv1.HistoryRequest
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		ms, more, err := gw.History(ctx, lane, p.BeforeMessageID, p.Limit)
		if err != nil {
			return err
		}
		h := irisv1.History{Messages: make([]irisv1.Message, len(ms)), HasMore: more}
		for i := range ms {
			h.Messages[i] = messagePayload(&ms[i])
			if ms[i].Role == core.RoleCron {
				// history's schema knows only user and assistant: a cron
				// post is the agent's, its model says "cron: <job>".
				h.Messages[i].Role = core.RoleAssistant
			}
		}
		if len(ms) > 0 {
			h.OldestMessageID = ms[0].ID
		}
		s.reply(id, "history", lane, h)
	case "sync":
		var p irisv1.Sync
		if err := payload(env, &p); err != nil {
			return err
		}
		if !s.syncing.CompareAndSwap(false, true) {
			return errSyncing
		}
		s.wg.Add(1)
		go s.sync(id, p.Cursor)
	case "message.delete":
		var p irisv1.MessageDelete
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.DeleteMessages(ctx, s.caller(id), lane, p.MessageIDs)
	case "read.receipt":
		var p irisv1.ReadReceiptRequest
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.ReadReceipt(ctx, s.caller(id), lane, p.MessageID)
	case "agent.stop":
		var p irisv1.AgentStop
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.Stop(ctx, s.caller(id), lane)
	case "agent.steer":
		var p irisv1.AgentSteer
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.Steer(ctx, s.caller(id), lane, p.Text)
	case "fcm.register":
		var p irisv1.FCMRegister
		if err := payload(env, &p); err != nil {
			return err
		}
		sub := string(p.WebPush)
		var text string
		if json.Unmarshal(p.WebPush, &text) == nil {
			sub = text
		}
		if err := gw.RegisterPush(ctx, s.caller(id), p.FCMToken, p.NtfyTopic, sub); err != nil {
			return err // the error carries the id
		}
		// The schema has no reply type of its own for fcm.register: a
		// request with an id is answered with a pong carrying it.
		if id != 0 {
			s.reply(id, "pong", core.Lane{}, irisv1.Pong{})
		}
	case "channel.list":
		cs, err := gw.Channels(ctx)
		if err != nil {
			return err
		}
		s.reply(id, "channel.list", core.Lane{}, irisv1.ChannelList{Channels: channelList(cs)})
	case "channel.create", "channel.rename", "channel.set_default", "channel.favorite", "channel.icon", "channel.set_automation", "channel.delete":
		return s.channel(ctx, env, id)
	case "search", "media.upload.start", "media.upload.end", "media.pull":
		return s.media(ctx, env, id)
	case "commands.catalog":
		s.reply(id, "commands.catalog", core.Lane{}, irisv1.CommandsCatalog{Commands: catalog(gw.Commands())})
	case "commands.complete":
		var p irisv1.CommandsCompleteRequest
		if err := payload(env, &p); err != nil {
			return err
		}
		matches := []irisv1.Command{}
		for _, c := range gateway.Complete(p.Prefix) {
			matches = append(matches, irisv1.Command{Name: c.Name, Description: c.Description, ArgsHint: c.ArgsHint})
		}
		s.reply(id, "commands.complete", core.Lane{}, irisv1.CommandsComplete{Prefix: p.Prefix, Matches: matches})
	case "picker.select":
		var p irisv1.PickerSelect
		if err := payload(env, &p); err != nil {
			return err
		}
		// An unknown or expired picker is a no-op, without a reply.
		return gw.SelectPicker(ctx, s.caller(id), p.PickerID, p.Value)
	default:
		// Unknown types are ignored, for forward compatibility.
	}
	return nil
}

func (s *Session) channel(ctx context.Context, env *irisv1.Request, id int64) error {
	var p channelReq
	if err := payload(env, &p); err != nil {
		return err
	}
	gw := s.cfg.GW
	chatID := env.ChatID
	if chatID == "" {
		chatID = p.ChatID
	}
	if env.Type == "channel.create" {
		name, parent := "", deref(p.Parent)
		if p.Name != nil {
			name = *p.Name
		}
		return gw.CreateChannel(ctx, s.caller(id), name, p.Kind, parent)
	}
	if chatID == "" {
		return core.Errorf(core.CodeUnsupported, "%s needs a chat_id", env.Type)
	}
	var ch gateway.ChannelChange
	switch env.Type {
	case "channel.delete":
		return gw.DeleteChannel(ctx, s.caller(id), chatID)
	case "channel.rename":
		if p.Name == nil {
			return core.Errorf(core.CodeUnsupported, "channel.rename needs a name")
		}
		ch.Name = p.Name
	case "channel.set_default":
		ch.SetDefault = true
	case "channel.favorite":
		if p.On == nil {
			return core.Errorf(core.CodeUnsupported, "channel.favorite needs on")
		}
		ch.Favorite = p.On
	case "channel.set_automation":
		if p.On == nil {
			return core.Errorf(core.CodeUnsupported, "channel.set_automation needs on")
		}
		ch.Automation = p.On
	case "channel.icon":
		var err error
		if ch.Icon, err = nullableString(p.Icon, "icon"); err != nil {
			return err
		}
		if ch.Color, err = nullableString(p.Color, "color"); err != nil {
			return err
		}
	}
	return gw.ChangeChannel(ctx, s.caller(id), chatID, ch)
}

// nullableString reads an optional string where absent and null both mean
// "clear it".
func nullableString(raw json.RawMessage, field string) (*string, error) {
	v := ""
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, core.Errorf(core.CodeUnsupported, "%s must be a string or null", field)
		}
	}
	return &v, nil
}

// errSyncing answers a sync sent while the connection's last one runs.
var errSyncing = core.Errorf(core.CodeRateLimited, "a sync is already running on this connection: wait for its sync.done (or error)")

func (s *Session) sync(id, cursor int64) {
	defer s.wg.Done()
	// Free before the answer is queued: a device that syncs again on
	// reading it must find the way clear.
	done := func() { s.syncing.Store(false) }
	head, truncated, err := s.cfg.GW.Sync(s.ctx, s.conn, cursor, func(ev *core.Event) error {
		data := withCursor(broadcast(ev), ev.Cursor)
		if data == nil {
			return nil
		}
		return s.conn.SendWait(s.ctx, hub.Out{Data: data, Cursor: ev.Cursor})
	})
	done()
	if err != nil {
		if s.ctx.Err() == nil && s.conn.Err() == nil {
			s.cfg.Log.Error("sync failed", "device", s.conn.DeviceID, "err", err)
			s.sendError(id, err)
		}
		return
	}
	s.reply(id, "sync.done", core.Lane{}, irisv1.SyncDone{Cursor: head, Truncated: truncated})
}

func (s *Session) reply(id int64, typ string, lane core.Lane, p any) {
	s.conn.Send(hub.Out{Data: marshal(irisv1.Envelope{V: Version, ID: id, Type: typ, ChatID: lane.ChatID, ThreadID: lane.ThreadID}, p)})
}

func (s *Session) sendError(id int64, err error) {
	s.conn.Send(hub.Out{Data: errorFrame(id, core.AsError(err))})
}

// errorFrame is the one place a core error becomes an Iris error frame.
func errorFrame(id int64, e *core.Error) []byte {
	code := irisCode(e.Code)
	return marshal(irisv1.Envelope{V: Version, ID: id, Type: "error"}, irisv1.Error{Code: string(code), Message: e.Message})
}

func inPayload(l *core.Lane, chatID, threadID string) {
	if l.ChatID == "" {
		l.ChatID = chatID
		if l.ThreadID == "" {
			l.ThreadID = threadID
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func catalog(cs []gateway.Command) []irisv1.Command {
	out := make([]irisv1.Command, len(cs))
	for i, c := range cs {
		aliases := append([]string{}, c.Aliases...)
		out[i] = irisv1.Command{Name: c.Name, Description: c.Description, ArgsHint: c.ArgsHint, Category: c.Category, Aliases: &aliases}
	}
	return out
}
