package mobile

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway"
)

// Hermes Mobile's own admission rules, on top of gateway.Auth (which
// checks tokens and the identity rule, the same for both dialects): the
// bound tokens of MOBILE_EXTRA_TOKENS, the delivery tokens, and the list of
// allowed devices.

// ErrNotAllowed refuses a phone outside Settings.AllowedDevices.
var ErrNotAllowed = core.NewKind("device_not_allowed", core.CodeAuth, "device %q is not in the allowed devices list")

// access is the dialect's token configuration.
type access struct {
	extra   []gateway.ExtraToken
	allowed []string
}

func newAccess(s Settings, log *slog.Logger) access {
	var a access
	for _, e := range s.ExtraTokens {
		dev, tok, ok := strings.Cut(e, "=")
		dev, tok = strings.TrimSpace(dev), strings.TrimSpace(tok)
		if !ok || dev == "" || tok == "" {
			log.Warn("mobile: ignoring an extra token that is not device_id=token")
			continue
		}
		// Bound by the device's id in the gateway: such an entry binds
		// the phone, never an Iris device of the same name.
		a.extra = append(a.extra, gateway.ExtraToken{Token: tok, ID: "binding", Device: SessionPrefix + dev})
	}
	for _, tok := range s.DeliverTokens {
		a.extra = append(a.extra, gateway.ExtraToken{Token: tok, ID: "deliver", Deliver: true})
	}
	a.allowed = s.AllowedDevices
	return a
}

// admit checks a hello of the device deviceID (its device.id).
func (a access) admit(ctx context.Context, auth *gateway.Auth, addr, token, deviceID string) (gateway.Grant, error) {
	return auth.Admit(ctx, gateway.Attempt{Dialect: gateway.DialectMobile, Addr: addr, Token: token,
		Device: SessionPrefix + deviceID, Extra: a.extra, Allow: func(g gateway.Grant) error {
			// Delivery connections are services, not phones: the list
			// does not apply to them.
			if len(a.allowed) > 0 && !g.Deliver && !slices.Contains(a.allowed, deviceID) {
				return ErrNotAllowed.New(quote(deviceID))
			}
			return nil
		}})
}

// quote cuts a device's id for a message, as the gateway's do.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return s
}
