package postgres

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/store"
)

// BenchmarkLease is what a replica's lane lease costs a turn on a durable
// PostgreSQL: a lone turn's own store writes (the message with its turn
// row and frame, the turn's start with agent.busy, its end with
// agent.idle; a real turn writes its reply besides), without and with the
// statements the runner adds for a turn that arrives alone (take the
// lease and read the queue, read it again after the turn, let it go,
// look once more) and for each further turn of a burst (one statement).
// The ratios are logged (-v).
//
//	go test -run '^$' -bench Lease -benchtime 2s -v ./store/postgres/
func BenchmarkLease(b *testing.B) {
	s, err := Open(bg, pgtest.SharedDurable(b).DB(b), WithLog(quiet))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var n atomic.Int64
	turn := func(b *testing.B, lk core.Lane) string {
		m, ev := sendBatch(n.Add(1))
		m.Lane, ev.Lane = lk, lk
		if err := s.Write(bg, func(tx store.Tx) error {
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
			if err := tx.QueueTurn(lk, m.ID); err != nil {
				return err
			}
			_, _, err := tx.AppendEvent(ev)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return m.ID
	}
	run := func(b *testing.B, lk core.Lane, id string) {
		for _, step := range []func(tx store.Tx) error{
			func(tx store.Tx) error {
				if err := tx.StartTurn(id, ""); err != nil {
					return err
				}
				_, _, err := tx.AppendEvent(&core.Event{Type: core.EvAgentBusy, Lane: lk, TS: 1})
				return err
			},
			func(tx store.Tx) error {
				if err := tx.EndTurn(id); err != nil {
					return err
				}
				_, _, err := tx.AppendEvent(&core.Event{Type: core.EvAgentIdle, Lane: lk, TS: 1})
				return err
			},
		} {
			if err := s.Write(bg, step); err != nil {
				b.Fatal(err)
			}
		}
	}
	take := func(b *testing.B, lk core.Lane, want int) {
		l, err := s.TakeLane(bg, lk, "bench", 15*time.Second)
		if err != nil || !l.Held || len(l.Turns) != want {
			b.Fatalf("%+v, %v", l, err)
		}
	}
	// The three interleave, turn by turn, so the disk's drift (a shared
	// machine's flush times vary twofold within minutes) falls on each.
	names := []string{"lone turn", "lone turn + lease", "turn in a burst + lease"}
	var spent [3]time.Duration
	plain, leased, burst := core.Lane{ChatID: "plain"}, core.Lane{ChatID: "leased"}, core.Lane{ChatID: "burst"}
	for b.Loop() {
		t0 := time.Now()
		run(b, plain, turn(b, plain))
		t1 := time.Now()
		id := turn(b, leased)
		take(b, leased, 1)
		run(b, leased, id)
		take(b, leased, 0)
		if err := s.LetLane(bg, leased, "bench"); err != nil {
			b.Fatal(err)
		}
		if owed, err := s.LaneOwed(bg, leased); err != nil || owed {
			b.Fatal(owed, err)
		}
		t2 := time.Now()
		id = turn(b, burst)
		take(b, burst, 1)
		run(b, burst, id)
		t3 := time.Now()
		spent[0] += t1.Sub(t0)
		spent[1] += t2.Sub(t1)
		spent[2] += t3.Sub(t2)
	}
	res := map[string]float64{}
	for i, name := range names {
		res[name] = float64(spent[i].Nanoseconds()) / float64(b.N)
		b.ReportMetric(res[name], "ns/"+strings.ReplaceAll(name, " ", "_"))
	}
	ratios(b, "ns/turn", names, res)
}
