package gateway

// Support for the Hermes Mobile dialect (wire/mobile): the device's lane as
// a channel of the directory, and service deliveries into that lane (its
// token rules are Auth's, shared with Iris). The dialect itself is a codec plus a mapping; what it needs of
// the core beyond the Iris commands lives here.

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

var errChannelExists = errors.New("gateway: channel exists")

// EnsureChannel makes sure a channel with chatID exists, creating it with
// name (made a valid channel name) when it does not: a Hermes Mobile
// device's session is a lane of its own, listed in the directory so Iris
// devices can read it. An existing channel keeps its name (a person may
// have renamed it).
func (g *Gateway) EnsureChannel(ctx context.Context, chatID, name string) (core.Channel, error) {
	c, err := g.st.Channel(ctx, chatID)
	if err == nil {
		if c.Kind == core.KindThread {
			return c, ErrLaneIsThread.New(quote(chatID))
		}
		return c, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return c, err
	}
	c = core.Channel{ChatID: chatID, Name: laneName(name, chatID), Kind: core.KindChannel}
	err = g.commit(ctx, func(tx store.Tx) error {
		if _, err := tx.Channel(chatID); err == nil {
			return errChannelExists // created meanwhile by a racing hello
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := g.roomForChannel(tx); err != nil {
			return err
		}
		return tx.PutChannel(c)
	}, &core.Event{Type: core.EvChannelCreated, Channel: &c})
	if errors.Is(err, errChannelExists) {
		return g.st.Channel(ctx, chatID)
	}
	return c, err
}

// laneName turns a device's name into a valid channel name.
func laneName(name, fallback string) string {
	clean := func(s string) string {
		s = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == utf8.RuneError {
				return -1
			}
			return r
		}, s)
		s = strings.TrimSpace(s)
		if r := []rune(s); len(r) > MaxChannelName {
			s = strings.TrimSpace(string(r[:MaxChannelName]))
		}
		return s
	}
	if n := clean(name); n != "" {
		return n
	}
	if n := clean(fallback); n != "" {
		return n
	}
	return "Phone"
}

// Deliver posts a service delivery (irisgate send, POST /api/send, a
// phone's deliver) into a lane: a message of role cron, outboxed so every
// device gets it (a phone whose lane it is shows it), plus a cron
// notification. It is kept in history like cron posts and file
// deliveries, so a device away for longer than the outbox keeps frames
// still finds it; it starts no agent turn.
func (g *Gateway) Deliver(ctx context.Context, lk core.Lane, text string) (core.Message, error) {
	ch, err := g.resolveLane(ctx, &lk)
	if err != nil {
		return core.Message{}, err
	}
	if !utf8.ValidString(text) || strings.TrimSpace(text) == "" {
		return core.Message{}, ErrDeliveryText.New()
	}
	if len(text) > MaxTextBytes {
		return core.Message{}, ErrTextTooLong.New(len(text), MaxTextBytes)
	}
	now := time.Now().UnixMilli()
	m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleCron, Text: text, TS: now}
	if err := g.commit(ctx, func(tx store.Tx) error { return tx.InsertMessage(m, false) },
		&core.Event{Type: core.EvMessage, Lane: lk, Message: &m}); err != nil {
		return m, err
	}
	body := text
	if r := []rune(body); len(r) > 200 {
		body = string(r[:200]) + "…"
	}
	n := &core.Notification{Kind: "cron", Title: ch.Name, Body: body, TS: now}
	if err := g.commit(ctx, nil, &core.Event{Type: core.EvNotification, Lane: lk, Notification: n}); err != nil {
		g.log.Warn("delivery notification", "lane", lk.String(), "err", err)
	}
	return m, nil
}

// PickerPending reports whether a picker still waits for an answer.
// SelectPicker treats an unknown or answered picker as a silent no-op;
// a dialect that must tell the person the prompt is gone asks this first.
// One open on another replica counts: the answer is forwarded to it.
func (g *Gateway) PickerPending(id string) bool {
	return g.turns.PickerPending(id) || g.elsewhere.open(id)
}
