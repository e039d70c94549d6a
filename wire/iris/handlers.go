package iris

import (
	"context"
	"encoding/json"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// handler answers one request. An error it returns becomes the error
// frame answering the request (Session.Handle); a handler that answers
// with a frame of its own queues it itself.
type handler func(s *Session, ctx context.Context, r *irisv1.Request) error

// handle makes a handler of fn, which takes the request's payload decoded
// as P, its irisv1 type. A payload that does not decode as P is refused
// before fn runs, the same way for every request type (payload).
func handle[P any](fn func(s *Session, ctx context.Context, r *irisv1.Request, p *P) error) handler {
	return func(s *Session, ctx context.Context, r *irisv1.Request) error {
		var p P
		if err := payload(r, &p); err != nil {
			return err
		}
		return fn(s, ctx, r, &p)
	}
}

// handlers are the request types the gateway answers, each with its
// handler; a type not in it is ignored, for forward compatibility, and
// counted as "other". Requests whose payload carries nothing (hello after
// the first, channel.list, commands.catalog) do not read it, so that a
// payload of any shape is accepted there as it always was.
var handlers = map[irisv1.FrameType]handler{
	irisv1.TypeHello:                alreadyHello,
	irisv1.TypePing:                 handle((*Session).ping),
	irisv1.TypeMessageSend:          handle((*Session).send),
	irisv1.TypeHistory:              handle((*Session).history),
	irisv1.TypeSync:                 handle((*Session).startSync),
	irisv1.TypeMessageDelete:        handle((*Session).deleteMessages),
	irisv1.TypeReadReceipt:          handle((*Session).readReceipt),
	irisv1.TypeAgentStop:            handle((*Session).stopTurn),
	irisv1.TypeAgentSteer:           handle((*Session).steerTurn),
	irisv1.TypeFCMRegister:          handle((*Session).registerPush),
	irisv1.TypeChannelList:          (*Session).channelList,
	irisv1.TypeChannelCreate:        handle((*Session).createChannel),
	irisv1.TypeChannelRename:        handle((*Session).renameChannel),
	irisv1.TypeChannelSetDefault:    handle((*Session).setDefault),
	irisv1.TypeChannelFavorite:      handle((*Session).setFavorite),
	irisv1.TypeChannelIcon:          handle((*Session).setIcon),
	irisv1.TypeChannelSetAutomation: handle((*Session).setAutomation),
	irisv1.TypeChannelDelete:        handle((*Session).deleteChannel),
	irisv1.TypeSearch:               handle((*Session).search),
	irisv1.TypeMediaUploadStart:     handle((*Session).uploadStart),
	irisv1.TypeMediaUploadEnd:       handle((*Session).uploadEnd),
	irisv1.TypeMediaPull:            handle((*Session).pullMedia),
	irisv1.TypeCommandsCatalog:      (*Session).commandsCatalog,
	irisv1.TypeCommandsComplete:     handle((*Session).commandsComplete),
	irisv1.TypePickerSelect:         handle((*Session).selectPicker),
}

// laneOf is the lane a request addresses: the envelope's, or when that
// names no chat, the one its payload names (an irisgate addition; an
// envelope's thread_id without a chat_id still wins over the payload's).
func laneOf(r *irisv1.Request, chatID, threadID string) core.Lane {
	l := core.Lane{ChatID: r.ChatID, ThreadID: r.ThreadID}
	if l.ChatID == "" {
		l.ChatID = chatID
		if l.ThreadID == "" {
			l.ThreadID = threadID
		}
	}
	return l
}

func alreadyHello(s *Session, ctx context.Context, r *irisv1.Request) error { return errAlreadyHello }

func (s *Session) ping(ctx context.Context, r *irisv1.Request, p *irisv1.Ping) error {
	s.reply(r.ID, irisv1.TypePong, core.Lane{}, irisv1.Pong{TS: p.TS})
	return nil
}

func (s *Session) send(ctx context.Context, r *irisv1.Request, p *irisv1.MessageSend) error {
	return s.sends().Send(ctx, s.caller(r.ID), gateway.SendRequest{Lane: laneOf(r, p.ChatID, p.ThreadID),
		Text: p.Text, ReplyTo: p.ReplyTo, MediaRefs: p.MediaRefs, AutoThread: p.AutoThread})
}

func (s *Session) history(ctx context.Context, r *irisv1.Request, p *irisv1.HistoryRequest) error {
	lane := laneOf(r, p.ChatID, p.ThreadID)
	ms, more, err := s.cfg.GW.History(ctx, lane, p.BeforeMessageID, p.Limit)
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
	// Encoded straight into the frame, sized from the texts; json.Marshal
	// answers a page AppendHistory refuses (and says why).
	env := irisv1.Envelope{V: Version, ID: r.ID, Type: irisv1.TypeHistory, ChatID: lane.ChatID, ThreadID: lane.ThreadID}
	size := 160
	for i := range ms {
		size += 128 + len(ms[i].ID) + len(ms[i].Text) + len(ms[i].Reasoning)
	}
	frame, err := irisv1.AppendHistory(irisv1.AppendEnvelope(make([]byte, 0, size), env), &h)
	if err != nil {
		s.reply(r.ID, irisv1.TypeHistory, lane, h)
		return nil
	}
	s.conn.SendHere(hub.Out{Data: append(frame, '}')})
	return nil
}

func (s *Session) deleteMessages(ctx context.Context, r *irisv1.Request, p *irisv1.MessageDelete) error {
	return s.cfg.GW.DeleteMessages(ctx, s.caller(r.ID), laneOf(r, p.ChatID, p.ThreadID), p.MessageIDs)
}

func (s *Session) readReceipt(ctx context.Context, r *irisv1.Request, p *irisv1.ReadReceiptRequest) error {
	return s.cfg.GW.ReadReceipt(ctx, s.caller(r.ID), laneOf(r, p.ChatID, p.ThreadID), p.MessageID)
}

func (s *Session) stopTurn(ctx context.Context, r *irisv1.Request, p *irisv1.AgentStop) error {
	return s.cfg.GW.Stop(ctx, s.caller(r.ID), laneOf(r, p.ChatID, p.ThreadID))
}

func (s *Session) steerTurn(ctx context.Context, r *irisv1.Request, p *irisv1.AgentSteer) error {
	return s.cfg.GW.Steer(ctx, s.caller(r.ID), laneOf(r, p.ChatID, p.ThreadID), p.Text)
}

func (s *Session) registerPush(ctx context.Context, r *irisv1.Request, p *irisv1.FCMRegister) error {
	sub := string(p.WebPush)
	var text string
	if json.Unmarshal(p.WebPush, &text) == nil {
		sub = text
	}
	if err := s.cfg.GW.RegisterPush(ctx, s.caller(r.ID), p.FCMToken, p.NtfyTopic, sub); err != nil {
		return err // the error carries the id
	}
	// The schema has no reply type of its own for fcm.register: a
	// request with an id is answered with a pong carrying it.
	if r.ID != 0 {
		s.reply(r.ID, irisv1.TypePong, core.Lane{}, irisv1.Pong{})
	}
	return nil
}

func (s *Session) search(ctx context.Context, r *irisv1.Request, p *irisv1.Search) error {
	lane := core.Lane{ChatID: p.ChatID, ThreadID: deref(p.ThreadID)}
	if lane.ChatID == "" {
		lane = core.Lane{ChatID: r.ChatID, ThreadID: r.ThreadID}
	}
	scope, page, err := s.cfg.GW.Search(ctx, gateway.SearchRequest{Query: p.Query, Scope: p.Scope, Lane: lane, Limit: p.Limit, Before: p.BeforeMessageID})
	if err != nil {
		return err
	}
	out := irisv1.SearchResults{Query: p.Query, Scope: scope, Hits: make([]irisv1.SearchHit, len(page.Hits)), HasMore: page.More, Total: page.Total}
	for i, h := range page.Hits {
		out.Hits[i] = irisv1.SearchHit{MessageID: h.MessageID, ChatID: h.Lane.ChatID, ThreadID: h.Lane.ThreadID, Role: h.Role, Snippet: h.Snippet, TS: h.TS}
	}
	s.reply(r.ID, irisv1.TypeSearchResults, core.Lane{}, out)
	return nil
}

// The slash commands' catalogue and completion are the gateway's
// (gateway.Commands, gateway.Complete); these two handlers are all this
// package knows of them.

func (s *Session) commandsCatalog(ctx context.Context, r *irisv1.Request) error {
	s.reply(r.ID, irisv1.TypeCommandsCatalog, core.Lane{}, irisv1.CommandsCatalog{Commands: catalog(s.cfg.GW.Commands())})
	return nil
}

func (s *Session) commandsComplete(ctx context.Context, r *irisv1.Request, p *irisv1.CommandsCompleteRequest) error {
	matches := []irisv1.Command{}
	for _, c := range gateway.Complete(p.Prefix) {
		matches = append(matches, irisv1.Command{Name: c.Name, Description: c.Description, ArgsHint: c.ArgsHint})
	}
	s.reply(r.ID, irisv1.TypeCommandsComplete, core.Lane{}, irisv1.CommandsComplete{Prefix: p.Prefix, Matches: matches})
	return nil
}

func catalog(cs []gateway.Command) []irisv1.Command {
	out := make([]irisv1.Command, len(cs))
	for i, c := range cs {
		aliases := append([]string{}, c.Aliases...)
		out[i] = irisv1.Command{Name: c.Name, Description: c.Description, ArgsHint: c.ArgsHint, Category: c.Category, Aliases: &aliases}
	}
	return out
}

func (s *Session) selectPicker(ctx context.Context, r *irisv1.Request, p *irisv1.PickerSelect) error {
	// An unknown or expired picker is a no-op, without a reply.
	return s.cfg.GW.SelectPicker(ctx, s.caller(r.ID), p.PickerID, p.Value)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
