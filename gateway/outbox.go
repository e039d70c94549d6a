package gateway

import (
	"context"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// published runs after each committed event is out (on the commit log's
// publisher): it wakes devices that are away, and the pruner when the
// outbox has outgrown its bound.
func (g *Gateway) published(ev *core.Event) {
	g.notePush(ev)
	if ev.Cursor > 0 {
		g.cfg.Metrics.OutboxHead.Set(float64(ev.Cursor))
		if ev.Cursor-g.prunedAt.Load() > pruneSlack(g.cfg.OutboxKeep) {
			select {
			case g.pruneNow <- struct{}{}:
			default:
			}
		}
	}
}

// pruneSlack is how many frames are committed after a pass before the
// pruner is woken early: the outbox holds at most OutboxKeep plus that.
func pruneSlack(keep int64) int64 { return max(keep/10, 100) }

// pruneLoop enforces retention while the gateway runs: at start, every
// PruneEvery (for the age bound) and whenever the outbox outgrew its
// count bound. Each pass works in bounded transactions, letting commits
// in between them.
func (g *Gateway) pruneLoop(ctx context.Context) {
	t := time.NewTicker(g.cfg.PruneEvery)
	defer t.Stop()
	for {
		head, _ := g.st.OutboxHead(ctx)
		var total int64
		for ctx.Err() == nil {
			n, more, err := g.st.PruneOutboxSome(ctx, g.cfg.OutboxKeep, time.Now().Add(-g.cfg.OutboxMaxAge).UnixMilli(), store.PruneChunk)
			total += n
			if err != nil {
				if ctx.Err() == nil {
					g.log.Warn("outbox prune", "err", err)
				}
				break
			}
			if !more {
				break
			}
		}
		g.prunedAt.Store(head)
		if total > 0 {
			g.log.Info("outbox pruned", "frames", total)
		}
		if floor, err := g.st.OutboxFloor(ctx); err == nil && floor > 0 {
			g.hub.DropBelow(floor + 1) // the pruned frames (floor and below) need no proofs any more
		}
		g.pruneDevices(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.pruneNow:
		}
	}
}
