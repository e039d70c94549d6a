package gateway

import (
	"context"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/gateway/turn"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// The agent's turns are package turn's (turn.Runner); what the runner
// needs of the gateway is turnHost, and the few calls the gateway makes
// into it are here.

// MaxQueuedTurns bounds the messages of people waiting in one lane for
// their turn (turn.MaxQueued).
const MaxQueuedTurns = turn.MaxQueued

// DefaultAskTimeout is how long an approval or question waits for an
// answer; silence on an approval is a deny.
const DefaultAskTimeout = turn.DefaultAskTimeout

// SelectPicker answers a picker (turn.Runner.SelectPicker): a stale one is
// a no-op, a value not among its choices is refused.
func (g *Gateway) SelectPicker(ctx context.Context, from Caller, pickerID, value string) error {
	return g.turns.SelectPicker(ctx, from, pickerID, value)
}

// SelectForwarded applies a picker answer another replica forwarded
// (turn.Runner.SelectForwarded): a no-op unless the picker is open here.
func (g *Gateway) SelectForwarded(deviceID, pickerID, value string) {
	if err := g.turns.SelectForwarded(deviceID, pickerID, value); err != nil {
		g.log.Debug("a picker answer forwarded by another replica", "picker", pickerID, "err", err)
	}
}

// StopForwarded is another replica's word that lk's turn was stopped
// through it (turn.Runner.StopForwarded).
func (g *Gateway) StopForwarded(lk core.Lane) { g.turns.StopForwarded(lk) }

// StartedForwarded is another replica's word that it began the turn of
// messageID in lk (fleet.Command.Started): the device that sent it here
// gets its read.receipt.
func (g *Gateway) StartedForwarded(lk core.Lane, messageID string) {
	g.turns.StartedElsewhere(lk, messageID)
}

// systemMessage posts a message from the gateway itself into a lane,
// outboxed but kept out of history.
func (g *Gateway) systemMessage(ctx context.Context, lk core.Lane, text string) {
	g.turns.SystemMessage(ctx, lk, text)
}

// replyMessage is a systemMessage whose copy to the caller answers its
// request.
func (g *Gateway) replyMessage(ctx context.Context, lk core.Lane, to Caller, text string) {
	g.turns.Reply(ctx, lk, to, text)
}

// turnHost is what the turn runner asks of the gateway.
type turnHost struct{ g *Gateway }

var _ turn.Host = turnHost{}

func (h turnHost) OfferFile(ctx context.Context, lk core.Lane, messageID, path string) (core.Media, error) {
	return h.g.offerFile(ctx, lk, messageID, path)
}

func (h turnHost) SpeakPiece(ctx context.Context, lk core.Lane, messageID string, n int, text string, budget int64) (core.Media, error) {
	return h.g.speakPiece(ctx, lk, messageID, n, text, budget)
}

func (h turnHost) WithPaths(ms []core.Media) []core.Media { return h.g.withPaths(ms) }

func (h turnHost) Replied(lk core.Lane, user, reply core.Message) { h.g.autoTitle(lk, user, reply) }

func (h turnHost) PostCron(ctx context.Context, lk core.Lane, j store.CronJob, text string) error {
	return h.g.postCron(ctx, lk, j, text)
}

func (h turnHost) Conn(id uint64) *hub.Conn { return h.g.hub.ByID(id) }
