package postgres

import (
	"context"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Lane leases: one turn per lane across replicas (issue 18, docs/postgres.md
// "Lanes across replicas"). A lease is a row with its holder and an expiry
// on the database's clock, renewed by the holder; the turns table is the
// lane's queue. Rows survive a PostgreSQL restart (they are durable) and a
// replica killed -9 (they expire), which a session advisory lock does not
// both do: PostgreSQL drops a session's locks when it restarts, while the
// holder may still be running the turn, and keeps them for as long as the
// server has not noticed a vanished client (TCP keepalive: hours).

// TakeLane takes lk's lease for holder until ttl from now, or extends it
// when holder has it already, unless another replica holds a live one; in
// the same statement it reads the lane's queue, so a replica about to run
// a turn learns in one round trip that it may, and which turn is next.
func (s *Store) TakeLane(ctx context.Context, lk core.Lane, holder string, ttl time.Duration) (store.LaneLease, error) {
	var out store.LaneLease
	rs, err := s.query(ctx, `WITH prev AS (
			SELECT holder FROM lane_leases WHERE chat_id = $1 AND thread_id = $2
		), lease AS (
			INSERT INTO lane_leases AS l (chat_id, thread_id, holder, expires)
			VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 millisecond')
			ON CONFLICT (chat_id, thread_id) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
			WHERE l.holder = excluded.holder OR l.expires < clock_timestamp()
			RETURNING l.stops
		)
		SELECT lease.stops, COALESCE((SELECT holder FROM prev), $3) <> $3, t.message_id, COALESCE(t.running, false), COALESCE(t.reply_id, '')
		FROM lease LEFT JOIN turns t ON t.chat_id = $1 AND t.thread_id = $2
		ORDER BY t.seq`, lk.ChatID, lk.ThreadID, holder, ttl.Milliseconds())
	if err != nil {
		return out, err
	}
	defer rs.Close()
	for rs.Next() {
		var id *string
		var q store.QueuedTurn
		if err := rs.Scan(&out.Stops, &out.TakenOver, &id, &q.Running, &q.ReplyID); err != nil {
			return out, err
		}
		out.Held = true
		if id != nil {
			q.MessageID, q.Lane, q.CronJob = *id, lk, store.CronJobOf(*id)
			out.Turns = append(out.Turns, q)
		}
	}
	return out, rs.Err()
}

// LetLane gives holder's lease of lk up. The caller then looks at the
// queue once more (LaneOwed): a turn queued through another replica while
// this one still held the lease was left to it.
func (s *Store) LetLane(ctx context.Context, lk core.Lane, holder string) error {
	_, err := s.exec(ctx, `DELETE FROM lane_leases WHERE chat_id = $1 AND thread_id = $2 AND holder = $3`, lk.ChatID, lk.ThreadID, holder)
	return err
}

// LaneOwed reports whether lk has turns queued.
func (s *Store) LaneOwed(ctx context.Context, lk core.Lane) (bool, error) {
	var ok bool
	err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE chat_id = $1 AND thread_id = $2)`, lk.ChatID, lk.ThreadID).Scan(&ok)
	return ok, err
}

// LaneQueued counts the people's turns waiting in lk (not started; cron
// runs aside), on every replica: the bound a replica holds a sender to
// (turn.MaxQueued) when the lane's queue may be another's.
func (s *Store) LaneQueued(ctx context.Context, lk core.Lane) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT count(*) FROM turns WHERE chat_id = $1 AND thread_id = $2 AND NOT running AND NOT `+cronTurn,
		lk.ChatID, lk.ThreadID).Scan(&n)
	return n, err
}

// RenewLanes extends every lease holder has by ttl from now and returns
// the lanes it still holds, with their stop counts. A lane missing from
// the answer was lost: its lease expired and another replica took it.
func (s *Store) RenewLanes(ctx context.Context, holder string, ttl time.Duration) ([]store.HeldLane, error) {
	rs, err := s.query(ctx, `UPDATE lane_leases SET expires = clock_timestamp() + $2 * interval '1 millisecond'
		WHERE holder = $1 RETURNING chat_id, thread_id, stops`, holder, ttl.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []store.HeldLane
	for rs.Next() {
		var h store.HeldLane
		if err := rs.Scan(&h.Lane.ChatID, &h.Lane.ThreadID, &h.Stops); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rs.Err()
}

// OrphanLanes lists up to limit lanes with turns queued and no live lease
// but holder's own: their holder died, or let the lease go just as a turn
// was queued through another replica, or holder itself lost track of a
// lease it still has (a statement that failed while the database
// restarted). Only turns queued longer than grace ago count: the replica
// a turn was queued through takes the lease itself a moment after, and
// its device, connected there, sees the turn live.
func (s *Store) OrphanLanes(ctx context.Context, holder string, grace time.Duration, limit int) ([]core.Lane, error) {
	rs, err := s.query(ctx, `SELECT DISTINCT t.chat_id, t.thread_id FROM turns t
		WHERE t.queued_at < clock_timestamp() - $2 * interval '1 millisecond'
		AND NOT EXISTS (SELECT 1 FROM lane_leases l WHERE l.chat_id = t.chat_id AND l.thread_id = t.thread_id
			AND l.expires >= clock_timestamp() AND l.holder <> $1)
		LIMIT $3`, holder, grace.Milliseconds(), limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []core.Lane
	for rs.Next() {
		var lk core.Lane
		if err := rs.Scan(&lk.ChatID, &lk.ThreadID); err != nil {
			return nil, err
		}
		out = append(out, lk)
	}
	return out, rs.Err()
}

// StopLane asks the replica holding lk's live lease, when it is not
// holder, to stop the lane's running turn (it sees the count grow at its
// next renewal). false: no other replica holds the lane.
func (s *Store) StopLane(ctx context.Context, lk core.Lane, holder string) (bool, error) {
	tag, err := s.exec(ctx, `UPDATE lane_leases SET stops = stops + 1
		WHERE chat_id = $1 AND thread_id = $2 AND holder <> $3 AND expires >= clock_timestamp()`, lk.ChatID, lk.ThreadID, holder)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// ExpireLanes ends holder's leases at once: a replica that lost its hold
// on them (tests; an operator's `irisgate` could too) lets another take
// them over without waiting for their expiry.
func (s *Store) ExpireLanes(ctx context.Context, holder string) error {
	_, err := s.exec(ctx, `UPDATE lane_leases SET expires = clock_timestamp() - interval '1 millisecond' WHERE holder = $1`, holder)
	return err
}
