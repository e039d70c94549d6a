package iris

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
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
	var h helloReq
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
	ack := helloAckJSON{
		ServerCaps: serverCaps{Streaming: true, Reasoning: true, Tools: true, Media: true, Search: true,
			Push: push, PushNtfyServer: cfg.PushNtfyServer, VAPIDPublicKey: cfg.VAPIDPublicKey, Pickers: true},
		SyncCursor: w.SyncCursor, LastPushedCursor: w.LastPushedCursor, Channels: channelList(w.Channels),
	}
	conn.SendFirst(hub.Out{Data: marshal(envelope{V: Version, ID: id, Type: "hello.ack"}, ack)})
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

func (s *Session) dispatch(ctx context.Context, env *inEnvelope, id int64) error {
	gw := s.cfg.GW
	lane := core.Lane{ChatID: deref(env.ChatID), ThreadID: deref(env.ThreadID)}
	switch env.Type {
	case "ping":
		var p laneReq
		if err := payload(env, &p); err != nil {
			return err
		}
		s.reply(id, "pong", core.Lane{}, struct {
			TS *int64 `json:"ts,omitempty"`
		}{p.TS})
	case "hello":
		return core.Errorf(core.CodeUnsupported, "already said hello")
	case "message.send":
		var p sendReq
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.Send(ctx, s.caller(id), gateway.SendRequest{Lane: lane, Text: p.Text, ReplyTo: p.ReplyTo, MediaRefs: p.MediaRefs, AutoThread: p.AutoThread})
	case "history":
		var p laneReq
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		ms, more, err := gw.History(ctx, lane, p.Before, p.Limit)
		if err != nil {
			return err
		}
		h := historyJSON{Messages: make([]messageJSON, len(ms)), HasMore: more}
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
		var p laneReq
		if err := payload(env, &p); err != nil {
			return err
		}
		if !s.syncing.CompareAndSwap(false, true) {
			return errSyncing
		}
		s.wg.Add(1)
		go s.sync(id, p.Cursor)
	case "message.delete":
		var p laneReq
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.DeleteMessages(ctx, s.caller(id), lane, p.IDs)
	case "read.receipt":
		var p laneReq
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.ReadReceipt(ctx, s.caller(id), lane, p.MessageID)
	case "agent.stop":
		var p laneReq
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.Stop(ctx, s.caller(id), lane)
	case "agent.steer":
		var p laneReq
		if err := payload(env, &p); err != nil {
			return err
		}
		inPayload(&lane, p.ChatID, p.ThreadID)
		return gw.Steer(ctx, s.caller(id), lane, p.Text)
	case "fcm.register":
		var p laneReq
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
			s.reply(id, "pong", core.Lane{}, struct{}{})
		}
	case "channel.list":
		cs, err := gw.Channels(ctx)
		if err != nil {
			return err
		}
		s.reply(id, "channel.list", core.Lane{}, struct {
			Channels []channelJSON `json:"channels"`
		}{channelList(cs)})
	case "channel.create", "channel.rename", "channel.set_default", "channel.favorite", "channel.icon", "channel.set_automation", "channel.delete":
		return s.channel(ctx, env, id)
	case "search", "media.upload.start", "media.upload.end", "media.pull":
		return s.media(ctx, env, id)
	case "commands.catalog":
		s.reply(id, "commands.catalog", core.Lane{}, struct {
			Commands []commandJSON `json:"commands"`
		}{catalog(gw.Commands())})
	case "commands.complete":
		var p struct {
			Prefix string `json:"prefix"`
		}
		if err := payload(env, &p); err != nil {
			return err
		}
		matches := []commandJSON{}
		for _, c := range gateway.Complete(p.Prefix) {
			matches = append(matches, commandJSON{Name: c.Name, Description: c.Description, ArgsHint: c.ArgsHint})
		}
		s.reply(id, "commands.complete", core.Lane{}, struct {
			Prefix  string        `json:"prefix"`
			Matches []commandJSON `json:"matches"`
		}{p.Prefix, matches})
	case "picker.select":
		var p struct {
			PickerID string `json:"picker_id"`
			Value    string `json:"value"`
		}
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

func (s *Session) channel(ctx context.Context, env *inEnvelope, id int64) error {
	var p channelReq
	if err := payload(env, &p); err != nil {
		return err
	}
	gw := s.cfg.GW
	chatID := deref(env.ChatID)
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
	s.reply(id, "sync.done", core.Lane{}, struct {
		Cursor    int64 `json:"cursor"`
		Truncated bool  `json:"truncated,omitempty"`
	}{head, truncated})
}

func (s *Session) reply(id int64, typ string, lane core.Lane, p any) {
	s.conn.Send(hub.Out{Data: marshal(envelope{V: Version, ID: id, Type: typ, ChatID: lane.ChatID, ThreadID: lane.ThreadID}, p)})
}

func (s *Session) sendError(id int64, err error) {
	s.conn.Send(hub.Out{Data: errorFrame(id, core.AsError(err))})
}

// errorFrame is the one place a core error becomes an Iris error frame.
func errorFrame(id int64, e *core.Error) []byte {
	code := irisCode(e.Code)
	return marshal(envelope{V: Version, ID: id, Type: "error"}, errorJSON{Code: string(code), Message: e.Message})
}

// decode parses a frame's envelope and its id. A malformed frame yields an
// unsupported error and, where it could be read, the id.
func decode(data []byte) (*inEnvelope, int64, error) {
	var env inEnvelope
	err := json.Unmarshal(data, &env)
	// A type error leaves the other fields decoded: the id, if it is one,
	// still goes on the error so the app's request is answered.
	var te *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &te) {
		return nil, 0, core.Errorf(core.CodeUnsupported, "malformed frame: %s", jsonError(err))
	}
	var id int64
	if len(env.ID) > 0 && !bytes.Equal(env.ID, []byte("null")) {
		n, perr := strconv.ParseInt(string(env.ID), 10, 64)
		if perr != nil {
			return nil, 0, core.Errorf(core.CodeUnsupported, "id must be an integer")
		}
		id = n
	}
	if err != nil {
		return nil, id, core.Errorf(core.CodeUnsupported, "malformed frame: %s", jsonError(err))
	}
	if env.V != nil && *env.V != Version {
		return nil, id, errBadVersion
	}
	if env.Type == "" {
		return nil, id, core.Errorf(core.CodeUnsupported, "frame has no type")
	}
	return &env, id, nil
}

// payload decodes a frame's payload; absent and null payloads are empty.
func payload(env *inEnvelope, v any) error {
	if len(env.Payload) == 0 || bytes.Equal(env.Payload, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(env.Payload, v); err != nil {
		return core.Errorf(core.CodeUnsupported, "malformed %s payload: %s", env.Type, jsonError(err))
	}
	return nil
}

func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s must be %s", te.Field, te.Type)
	}
	return err.Error()
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

type commandJSON struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	ArgsHint    string    `json:"args_hint"`
	Category    string    `json:"category,omitempty"`
	Aliases     *[]string `json:"aliases,omitempty"`
}

func catalog(cs []gateway.Command) []commandJSON {
	out := make([]commandJSON, len(cs))
	for i, c := range cs {
		aliases := append([]string{}, c.Aliases...)
		out[i] = commandJSON{Name: c.Name, Description: c.Description, ArgsHint: c.ArgsHint, Category: c.Category, Aliases: &aliases}
	}
	return out
}
