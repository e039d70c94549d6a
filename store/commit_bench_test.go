package store

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

// The commit of one message.send as the gateway makes it when its batch
// holds one send: the message, its owed turn and its outbox frame, in one
// transaction (gateway/commands.go). Run both with
//
//	go test -run '^$' -bench 'BenchmarkCommit' -benchtime 3000x ./store/
//
// and read each sub-benchmark's ns/send (wall) and cpu-ns/send against
// its neighbour's: they ran in one process, one after the other.

// sendTexts are message texts of 12–30 words from a vocabulary of 5,000,
// so the index sees new words and known ones as a real history does.
func sendTexts(n int) []string {
	rnd := rand.New(rand.NewSource(1))
	vocab := make([]string, 5000)
	for i := range vocab {
		var b strings.Builder
		for range 3 + rnd.Intn(6) {
			b.WriteByte(byte('a' + rnd.Intn(26)))
		}
		vocab[i] = b.String()
	}
	out := make([]string, n)
	for i := range out {
		w := make([]string, 12+rnd.Intn(19))
		for j := range w {
			w[j] = vocab[int(rnd.ExpFloat64()*600)%len(vocab)]
		}
		out[i] = strings.Join(w, " ")
	}
	return out
}

// commitSends commits one send per iteration of b.Loop, then runs after
// (when set), and reports the time and the CPU (of all the process's
// threads: the indexer's too) they took per send.
func commitSends(b *testing.B, s *Store, after func() error) {
	ctx := context.Background()
	lane := core.Lane{ChatID: core.DefaultChatID}
	texts := sendTexts(4096)
	i := 0
	start, cpu := time.Now(), cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		i++
		m := core.Message{ID: core.NewMessageID(), Lane: lane, Role: core.RoleUser, Text: texts[i%len(texts)], TS: 1700000000000 + int64(i)}
		if err := s.Write(ctx, func(tx Tx) error {
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
			if err := tx.QueueTurn(lane, m.ID); err != nil {
				return err
			}
			_, _, err := tx.AppendEvent(&core.Event{Type: core.EvMessage, Lane: lane, TS: m.TS, Message: &m})
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	if after != nil {
		if err := after(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/send")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/send")
}

// Search indexing in the commit (schema 8's triggers, as before issue 17)
// or after it: "deferred" is the commit alone (the indexer kept waiting),
// "deferred+indexer" the commit with the indexer running beside it as in
// the gateway, its last catch-up timed too, so it counts all the work.
func BenchmarkCommitSend(b *testing.B) {
	for _, c := range []struct {
		name    string
		version int
		delay   time.Duration
	}{
		{"index-in-commit", lazyIndexVersion - 1, 0},
		{"deferred", lazyIndexVersion, time.Hour},
		{"deferred+indexer", lazyIndexVersion, defaultIndexDelay},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := openAt(filepath.Join(b.TempDir(), "b.db"), c.version, withIndexDelay(c.delay))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var after func() error
			if c.delay != time.Hour {
				after = func() error { _, err := s.catchUp(context.Background()); return err }
			}
			commitSends(b, s, after)
		})
	}
}

// The same commit with each durability: FULL syncs the WAL at every
// commit, NORMAL only at checkpoints.
func BenchmarkCommitDurability(b *testing.B) {
	for _, d := range []Durability{DurabilityNormal, DurabilityFull} {
		b.Run(string(d), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "b.db"), WithDurability(d))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			commitSends(b, s, nil)
		})
	}
}

// The indexer's batches by size: ns/message is what indexing costs per
// message, the batch's time how long it holds the writer from commits.
func BenchmarkIndexBatch(b *testing.B) {
	for _, n := range []int{16, 64, 256, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "b.db"), withIndexDelay(time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			lane := core.Lane{ChatID: core.DefaultChatID}
			texts := sendTexts(4096)
			i := 0
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				if err := s.Write(ctx, func(tx Tx) error {
					for range n {
						i++
						if err := tx.InsertMessage(core.Message{ID: fmt.Sprint("m_", i), Lane: lane, Role: core.RoleUser, Text: texts[i%len(texts)], TS: 1}, false); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := s.write(ctx, func(tx *sqliteTx) error { _, _, err := indexSome(tx, n); return err }); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*n), "ns/message")
		})
	}
}

// What each row of a send costs the writer when sends commit 64 a
// transaction (a burst's group commit), without search indexing (see
// BenchmarkIndexBatch): the message, its owed turn and its outbox frame,
// together and alone. Their sum bounds the sends a second one writer
// commits on this machine.
func BenchmarkSendRows(b *testing.B) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	texts := sendTexts(4096)
	// The ids are a message's (core.NewMessageID), or random ones as they
	// were before it: each of those lands on a random page of the three
	// indexes keyed by it.
	random := func() string { return core.NewID("m_") }
	for _, c := range []struct {
		name                 string
		message, turn, frame bool
		id                   func() string
	}{
		{"message+turn+outbox", true, true, true, core.NewMessageID},
		{"message+turn+outbox/random-ids", true, true, true, random},
		{"message", true, false, false, core.NewMessageID},
		{"turn", false, true, false, core.NewMessageID},
		{"outbox", false, false, true, core.NewMessageID},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "b.db"), withIndexDelay(time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if err := s.Write(ctx, func(tx Tx) error {
					for range 64 {
						i++
						m := core.Message{ID: c.id(), Lane: lane, Role: core.RoleUser, Text: texts[i%len(texts)], TS: 1700000000000 + int64(i)}
						if c.message {
							if err := tx.InsertMessage(m, false); err != nil {
								return err
							}
						}
						if c.turn {
							if err := tx.QueueTurn(lane, m.ID); err != nil {
								return err
							}
						}
						if c.frame {
							if _, _, err := tx.AppendEvent(&core.Event{Type: core.EvMessage, Lane: lane, TS: m.TS, Message: &m}); err != nil {
								return err
							}
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/send")
		})
	}
}
