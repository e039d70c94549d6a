package store

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkHelloState is a hello's read of its device's row: after=write
// has another device's row committed before each read (a hello queues
// one), so each read finds the database changed.
func BenchmarkHelloState(b *testing.B) {
	for _, mode := range []string{"quiet", "after-write", "quiet-cancellable"} {
		b.Run(mode, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "g.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if mode == "quiet-cancellable" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			for i := range 1000 {
				if err := s.Write(ctx, func(tx Tx) error { _, err := tx.SeeDevice(Device{ID: "d" + strconv.Itoa(i)}); return err }); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if mode == "after-write" {
					b.StopTimer()
					s.Write(ctx, func(tx Tx) error { _, err := tx.SeeDevice(Device{ID: "w" + strconv.Itoa(i)}); return err })
					b.StartTimer()
				}
				if _, _, err := s.HelloState(ctx, "new"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
