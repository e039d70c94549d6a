package iris

import (
	"context"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// The channel directory's requests. All but channel.create name their
// channel with the envelope's chat_id or, failing that, the payload's.

func (s *Session) channelList(ctx context.Context, r *irisv1.Request) error {
	cs, err := s.cfg.GW.Channels(ctx)
	if err != nil {
		return err
	}
	s.reply(r.ID, irisv1.TypeChannelList, core.Lane{}, irisv1.ChannelList{Channels: channelList(cs)})
	return nil
}

func (s *Session) createChannel(ctx context.Context, r *irisv1.Request, p *irisv1.ChannelCreate) error {
	return s.cfg.GW.CreateChannel(ctx, s.caller(r.ID), deref(p.Name), p.Kind, deref(p.ParentChatID))
}

// channelID is the chat a channel.* request names, or the error saying it
// names none.
func channelID(r *irisv1.Request, inPayload string) (string, error) {
	if r.ChatID != "" {
		return r.ChatID, nil
	}
	if inPayload == "" {
		return "", errNeeds(r.Type, "a chat_id")
	}
	return inPayload, nil
}

func (s *Session) deleteChannel(ctx context.Context, r *irisv1.Request, p *irisv1.ChannelDelete) error {
	id, err := channelID(r, p.ChatID)
	if err != nil {
		return err
	}
	return s.cfg.GW.DeleteChannel(ctx, s.caller(r.ID), id)
}

func (s *Session) renameChannel(ctx context.Context, r *irisv1.Request, p *irisv1.ChannelRename) error {
	id, err := channelID(r, p.ChatID)
	if err != nil {
		return err
	}
	if p.Name == nil {
		return errNeeds(r.Type, "a name")
	}
	return s.cfg.GW.ChangeChannel(ctx, s.caller(r.ID), id, gateway.ChannelChange{Name: p.Name})
}

func (s *Session) setDefault(ctx context.Context, r *irisv1.Request, p *irisv1.ChannelSetDefault) error {
	id, err := channelID(r, p.ChatID)
	if err != nil {
		return err
	}
	return s.cfg.GW.ChangeChannel(ctx, s.caller(r.ID), id, gateway.ChannelChange{SetDefault: true})
}

func (s *Session) setFavorite(ctx context.Context, r *irisv1.Request, p *irisv1.ChannelFavorite) error {
	id, err := channelID(r, p.ChatID)
	if err != nil {
		return err
	}
	if p.On == nil {
		return errNeeds(r.Type, "on")
	}
	return s.cfg.GW.ChangeChannel(ctx, s.caller(r.ID), id, gateway.ChannelChange{Favorite: p.On})
}

func (s *Session) setAutomation(ctx context.Context, r *irisv1.Request, p *irisv1.ChannelSetAutomation) error {
	id, err := channelID(r, p.ChatID)
	if err != nil {
		return err
	}
	if p.On == nil {
		return errNeeds(r.Type, "on")
	}
	return s.cfg.GW.ChangeChannel(ctx, s.caller(r.ID), id, gateway.ChannelChange{Automation: p.On})
}

func (s *Session) setIcon(ctx context.Context, r *irisv1.Request, p *irisv1.ChannelIcon) error {
	id, err := channelID(r, p.ChatID)
	if err != nil {
		return err
	}
	// Absent and null both clear: the gateway is always handed a value.
	icon, ok := p.Icon.Value()
	if !ok {
		return errNotNullableString("icon")
	}
	color, ok := p.Color.Value()
	if !ok {
		return errNotNullableString("color")
	}
	return s.cfg.GW.ChangeChannel(ctx, s.caller(r.ID), id, gateway.ChannelChange{Icon: &icon, Color: &color})
}
