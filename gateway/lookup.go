package gateway

import (
	"context"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/cron"
)

// NameLane resolves a delivery's target as a person names it, the way
// cron jobs' targets are (cron.Target): the chat by its id or its name,
// a thread given as the chat as that thread of its parent. An empty chat
// is left for the default channel. Only deliveries (irisgate send, POST
// /api/send) take names: a device's requests carry ids.
func (g *Gateway) NameLane(ctx context.Context, l *core.Lane) error {
	if l.ChatID == "" {
		return nil
	}
	nl, err := cron.Target(ctx, g.st, *l)
	if err != nil {
		return err
	}
	*l = nl
	return nil
}
