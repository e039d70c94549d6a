package gateway

// Support for the Hermes Mobile dialect (wire/mobile): its token rules, the
// device's lane as a channel of the directory, and service deliveries into
// that lane. The dialect itself is a codec plus a mapping; what it needs of
// the core beyond the Iris commands lives here.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// MobileAccess is the Hermes Mobile token configuration besides the main
// tokens (the fixed one and the stored ones).
type MobileAccess struct {
	// Bindings are device_id=token entries: such a token admits only its
	// device, and such a device only its tokens.
	Bindings map[string][]string
	// Deliver are the delivery tokens: they admit a service connection
	// (cron, hermes send) that may send deliver frames.
	Deliver []string
	// Allowed, when not empty, is the only device ids a phone may use.
	// Delivery connections are services, not phones: the list does not
	// apply to them.
	Allowed []string
}

// MobileGrant is what a Hermes Mobile token allows.
type MobileGrant struct {
	TokenID string // "env", "binding", "deliver" or the stored token's id
	Deliver bool   // a delivery token: deliver frames are allowed
}

// CheckMobile admits a Hermes Mobile hello: token for deviceID from addr.
// Errors: CodeRateLimited (too many failures from addr), CodeAuth (no or
// an unknown token, a device outside the allowed list) and CodeForbidden
// (a token bound to another device, or a bound device claimed with
// another token). Every token is compared in constant time.
func (a *Auth) CheckMobile(ctx context.Context, addr, token, deviceID string, acc MobileAccess) (MobileGrant, error) {
	if a.limited(addr) {
		return MobileGrant{}, core.Errorf(core.CodeRateLimited, "too many failed attempts from this address; try again in a minute")
	}
	g, err := a.checkMobile(ctx, token, deviceID, acc)
	if err != nil {
		a.fail(addr)
	}
	return g, err
}

func (a *Auth) checkMobile(ctx context.Context, token, deviceID string, acc MobileAccess) (MobileGrant, error) {
	if token == "" {
		return MobileGrant{}, core.Errorf(core.CodeAuth, "hello carries no token")
	}
	h := sha256.Sum256([]byte(token))
	eq := func(tok string) bool {
		t := sha256.Sum256([]byte(tok))
		return subtle.ConstantTimeCompare(h[:], t[:]) == 1
	}
	var (
		g       MobileGrant
		matched bool
		boundTo []string // devices the presented token is bound to
	)
	deviceBound := len(acc.Bindings[deviceID]) > 0
	for dev, toks := range acc.Bindings {
		for _, t := range toks {
			if eq(t) {
				matched = true
				g.TokenID = "binding"
				boundTo = append(boundTo, dev)
			}
		}
	}
	for _, t := range acc.Deliver {
		if eq(t) && !matched {
			matched = true
			g = MobileGrant{TokenID: "deliver", Deliver: true}
		}
	}
	if a.fixed != nil && subtle.ConstantTimeCompare(h[:], a.fixed) == 1 && !matched {
		matched = true
		g.TokenID = "env"
	}
	toks, err := a.st.Tokens(ctx)
	if err != nil {
		return MobileGrant{}, err
	}
	var stored *store.Token
	for i := range toks {
		if subtle.ConstantTimeCompare(h[:], toks[i].Hash) == 1 {
			stored = &toks[i]
		}
		if toks[i].DeviceID != "" && toks[i].DeviceID == deviceID {
			deviceBound = true
		}
	}
	if stored != nil && !matched {
		matched = true
		g.TokenID = stored.ID
		if stored.DeviceID != "" {
			boundTo = append(boundTo, stored.DeviceID)
		}
	}
	if !matched {
		return MobileGrant{}, core.Errorf(core.CodeAuth, "invalid token")
	}
	if len(boundTo) > 0 && !slices.Contains(boundTo, deviceID) {
		return MobileGrant{}, core.Errorf(core.CodeForbidden, "this token is bound to another device")
	}
	if len(boundTo) == 0 && deviceBound {
		return MobileGrant{}, core.Errorf(core.CodeForbidden, "device %s is bound to another token", quote(deviceID))
	}
	if len(acc.Allowed) > 0 && !g.Deliver && !slices.Contains(acc.Allowed, deviceID) {
		return MobileGrant{}, core.Errorf(core.CodeAuth, "device %s is not in the allowed devices list", quote(deviceID))
	}
	if stored != nil && g.TokenID == stored.ID {
		a.st.TouchToken(ctx, stored.ID)
	}
	return g, nil
}

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
			return c, core.Errorf(core.CodeUnsupported, "chat_id %s is a thread", quote(chatID))
		}
		return c, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return c, err
	}
	c = core.Channel{ChatID: chatID, Name: laneName(name, chatID), Kind: core.KindChannel}
	err = g.commit(ctx, func(tx *store.Tx) error {
		if _, err := tx.Channel(chatID); err == nil {
			return errChannelExists // created meanwhile by a racing hello
		} else if !errors.Is(err, store.ErrNotFound) {
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
		return core.Message{}, core.Errorf(core.CodeUnsupported, "a delivery needs non-empty UTF-8 text")
	}
	if len(text) > MaxTextBytes {
		return core.Message{}, core.Errorf(core.CodeUnsupported, "text is %d bytes, the limit is %d", len(text), MaxTextBytes)
	}
	now := time.Now().UnixMilli()
	m := core.Message{ID: core.NewID("m_"), Lane: lk, Role: core.RoleCron, Text: text, TS: now}
	if err := g.commit(ctx, func(tx *store.Tx) error { return tx.InsertMessage(m, false) },
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
func (g *Gateway) PickerPending(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pickers[id] != nil
}
