package iris

import (
	"context"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// startSync starts the replay of every durable frame after the cursor,
// on a goroutine of its own: the replay goes at the device's pace without
// holding up its other requests.
func (s *Session) startSync(ctx context.Context, r *irisv1.Request, p *irisv1.Sync) error {
	if !s.syncing.CompareAndSwap(false, true) {
		return errSyncing
	}
	s.wg.Add(1)
	go s.sync(r.ID, p.Cursor)
	return nil
}

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
	s.reply(id, irisv1.TypeSyncDone, core.Lane{}, irisv1.SyncDone{Cursor: head, Truncated: truncated})
}
