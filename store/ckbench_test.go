package store

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
)

// BenchmarkPacedCommitLatency commits what a message.send writes (its
// message, owed turn and outbox row) once a millisecond, and reports the
// commit latency's tail: with the WAL checkpointed inside the commits
// (SQLite's default, "inline") and beside the writer (checkpoint.go).
// Run it with -benchtime 6000x: the tail needs a few checkpoints.
func BenchmarkPacedCommitLatency(b *testing.B) {
	for _, mode := range []string{"inline", "beside"} {
		b.Run(mode, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "gw.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if mode == "inline" {
				s.stopCheckpointer()
				if _, err := s.w.Exec("PRAGMA wal_autocheckpoint=1000"); err != nil {
					b.Fatal(err)
				}
			}
			text := strings.Repeat("word ", 60)
			lk := core.Lane{ChatID: core.DefaultChatID}
			ds := make([]time.Duration, 0, b.N)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			b.ResetTimer()
			for i := range b.N {
				<-tick.C
				m := core.Message{ID: core.NewMessageID(), Lane: lk, Role: core.RoleUser, Text: text, TS: int64(i + 1)}
				t0 := time.Now()
				err := s.Write(context.Background(), func(tx Tx) error {
					if err := tx.InsertMessage(m, false); err != nil {
						return err
					}
					if err := tx.QueueTurn(lk, m.ID); err != nil {
						return err
					}
					_, _, err := tx.AppendEvent(&core.Event{Type: core.EvMessage, Lane: lk, Message: &m})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(ds)
			over := 0
			for _, d := range ds {
				if d > 5*time.Millisecond {
					over++
				}
			}
			at := func(q float64) float64 { return float64(ds[int(float64(len(ds)-1)*q)]) / 1e6 }
			b.ReportMetric(at(0.5), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(at(0.999), "p999-ms")
			b.ReportMetric(float64(over), "over-5ms")
		})
	}
}
