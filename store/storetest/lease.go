package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// Leaser is a store several gateways share (PostgreSQL's): lane leases, so
// that one replica at a time runs a lane's turns. SQLite's store serves
// one gateway and has none; its runner needs no lease.
type Leaser interface {
	Store
	TakeLane(ctx context.Context, lk core.Lane, holder string, ttl time.Duration) (store.LaneLease, error)
	LetLane(ctx context.Context, lk core.Lane, holder string) error
	LaneOwed(ctx context.Context, lk core.Lane) (bool, error)
	LaneQueued(ctx context.Context, lk core.Lane) (int, error)
	RenewLanes(ctx context.Context, holder string, ttl time.Duration) ([]store.HeldLane, error)
	OrphanLanes(ctx context.Context, holder string, grace time.Duration, limit int) ([]core.Lane, error)
	StopLane(ctx context.Context, lk core.Lane, holder string) (bool, error)
}

// RunLeases runs the lease cases against stores made by open.
func RunLeases(t *testing.T, open func(t *testing.T) Leaser) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Leaser)
	}{
		{"LeaseOneHolder", testLeaseOneHolder},
		{"LeaseExpiresAndIsTakenOver", testLeaseTakeover},
		{"LeaseLetGoLeavesTheQueue", testLeaseLetGo},
		{"LeaseStopsForwarded", testLeaseStops},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

var (
	laneA = core.Lane{ChatID: "default"}
	laneB = core.Lane{ChatID: "default", ThreadID: "t1"}
)

func take(t *testing.T, s Leaser, lk core.Lane, holder string, ttl time.Duration) store.LaneLease {
	t.Helper()
	l, err := s.TakeLane(bg, lk, holder, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func queueTurns(t *testing.T, s Leaser, lk core.Lane, ids ...string) {
	t.Helper()
	write(t, s, func(tx store.Tx) error {
		for _, id := range ids {
			if err := tx.QueueTurn(lk, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func turnIDs(l store.LaneLease) []string {
	var out []string
	for _, q := range l.Turns {
		id := q.MessageID
		if q.Running {
			id += "(running" + q.ReplyID + ")"
		}
		out = append(out, id)
	}
	return out
}

// One replica holds a lane at a time; the holder reads the lane's queue,
// oldest first, with the turn it started marked, in the statement that
// takes or extends the lease; other lanes are leased apart.
func testLeaseOneHolder(t *testing.T, s Leaser) {
	queueTurns(t, s, laneA, "m1", "m2")
	queueTurns(t, s, laneB, "m3")
	write(t, s, func(tx store.Tx) error { return tx.StartTurn("m1", " r1") })
	a := take(t, s, laneA, "A", time.Minute)
	if !a.Held || a.TakenOver || !slices.Equal(turnIDs(a), []string{"m1(running r1)", "m2"}) || a.Turns[1].Lane != laneA {
		t.Fatalf("first take: %+v", a)
	}
	if b := take(t, s, laneA, "B", time.Minute); b.Held || len(b.Turns) != 0 {
		t.Fatalf("a second replica took a live lease: %+v", b)
	}
	if again := take(t, s, laneA, "A", time.Minute); !again.Held || again.TakenOver {
		t.Fatalf("the holder could not extend its lease: %+v", again)
	}
	if b := take(t, s, laneB, "B", time.Minute); !b.Held || !slices.Equal(turnIDs(b), []string{"m3"}) {
		t.Fatalf("another lane: %+v", b)
	}
	queueTurns(t, s, laneA, store.CronTurnID("job1"))
	if n, err := s.LaneQueued(bg, laneA); err != nil || n != 1 {
		t.Fatalf("queued %d, %v: want m2 (m1 runs, a cron run is not counted)", n, err)
	}
	empty := take(t, s, core.Lane{ChatID: "quiet"}, "A", time.Minute)
	if !empty.Held || len(empty.Turns) != 0 {
		t.Fatalf("a lane with nothing queued: %+v", empty)
	}
	held, err := s.RenewLanes(bg, "A", time.Minute)
	if err != nil || len(held) != 2 {
		t.Fatalf("renewed %+v, %v: want A's two lanes", held, err)
	}
	if orphans, err := s.OrphanLanes(bg, "A", time.Hour, 10); err != nil || len(orphans) != 0 {
		t.Fatalf("orphans %v, %v: turns queued a moment ago are the replica's that queued them", orphans, err)
	}
	if orphans, err := s.OrphanLanes(bg, "C", 0, 10); err != nil || len(orphans) != 0 {
		t.Fatalf("orphans %v, %v: every lane with turns is leased", orphans, err)
	}
	// A holder that lost track of its lease (a statement that failed)
	// finds its own lanes among those to take up.
	if orphans, err := s.OrphanLanes(bg, "A", 0, 10); err != nil || !slices.Equal(orphans, []core.Lane{laneA}) {
		t.Fatalf("A's orphans %v, %v: want its own lane with turns", orphans, err)
	}
}

// A lease that was not renewed expires (its holder died): the lane is an
// orphan until another replica takes it, told it took it over; the old
// holder's renewal then no longer lists the lane.
func testLeaseTakeover(t *testing.T, s Leaser) {
	queueTurns(t, s, laneA, "m1")
	write(t, s, func(tx store.Tx) error { return tx.StartTurn("m1", "") })
	// A lease of no length has expired by the next statement: no waiting.
	if a := take(t, s, laneA, "A", 0); !a.Held {
		t.Fatalf("take: %+v", a)
	}
	orphans, err := s.OrphanLanes(bg, "B", 0, 10)
	if err != nil || !slices.Equal(orphans, []core.Lane{laneA}) {
		t.Fatalf("orphans %v, %v", orphans, err)
	}
	b := take(t, s, laneA, "B", time.Minute)
	if !b.Held || !b.TakenOver || !slices.Equal(turnIDs(b), []string{"m1(running)"}) {
		t.Fatalf("takeover: %+v", b)
	}
	held, err := s.RenewLanes(bg, "A", time.Minute)
	if err != nil || len(held) != 0 {
		t.Fatalf("the old holder still renews %+v, %v", held, err)
	}
	if a := take(t, s, laneA, "A", time.Minute); a.Held {
		t.Fatalf("the old holder took the lane back from a live lease: %+v", a)
	}
}

// A lease let go leaves the lane's queue: a turn queued through another
// replica while the holder still had the lease is found after.
func testLeaseLetGo(t *testing.T, s Leaser) {
	take(t, s, laneA, "A", time.Minute)
	queueTurns(t, s, laneA, "m1") // through B, which could not take the lease
	if b := take(t, s, laneA, "B", time.Minute); b.Held {
		t.Fatalf("B took a live lease: %+v", b)
	}
	if err := s.LetLane(bg, laneA, "B"); err != nil { // not B's: nothing happens
		t.Fatal(err)
	}
	if b := take(t, s, laneA, "B", time.Minute); b.Held {
		t.Fatalf("another replica's LetLane ended A's lease: %+v", b)
	}
	if err := s.LetLane(bg, laneA, "A"); err != nil {
		t.Fatal(err)
	}
	if owed, err := s.LaneOwed(bg, laneA); err != nil || !owed {
		t.Fatalf("owed %v, %v after the lease was let go", owed, err)
	}
	if orphans, _ := s.OrphanLanes(bg, "B", 0, 10); !slices.Equal(orphans, []core.Lane{laneA}) {
		t.Fatalf("orphans %v", orphans)
	}
	if b := take(t, s, laneA, "B", time.Minute); !b.Held || b.TakenOver || !slices.Equal(turnIDs(b), []string{"m1"}) {
		t.Fatalf("B after A let go: %+v (a lease let go is not a takeover)", b)
	}
	write(t, s, func(tx store.Tx) error { return tx.EndTurn("m1") })
	if owed, err := s.LaneOwed(bg, laneA); err != nil || owed {
		t.Fatalf("owed %v, %v with nothing queued", owed, err)
	}
}

// A stop sent through a replica that does not hold the lane reaches the
// holder as a count it renews with; with no other holder it reaches no one.
func testLeaseStops(t *testing.T, s Leaser) {
	if ok, err := s.StopLane(bg, laneA, "B"); err != nil || ok {
		t.Fatalf("a stop with no holder: %v, %v", ok, err)
	}
	a := take(t, s, laneA, "A", time.Minute)
	if ok, err := s.StopLane(bg, laneA, "A"); err != nil || ok {
		t.Fatalf("the holder's own stop is forwarded: %v, %v", ok, err)
	}
	for range 2 {
		if ok, err := s.StopLane(bg, laneA, "B"); err != nil || !ok {
			t.Fatalf("a stop through B: %v, %v", ok, err)
		}
	}
	held, err := s.RenewLanes(bg, "A", time.Minute)
	if err != nil || len(held) != 1 || held[0].Lane != laneA || held[0].Stops != a.Stops+2 {
		t.Fatalf("renewed %+v, %v: want two stops more than %d", held, err, a.Stops)
	}
	take(t, s, laneB, "A", 0) // expired at once
	if ok, err := s.StopLane(bg, laneB, "B"); err != nil || ok {
		t.Fatalf("a stop forwarded to an expired lease: %v, %v", ok, err)
	}
}
