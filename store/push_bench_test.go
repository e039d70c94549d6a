package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// PushDevices runs for every event that wakes someone: with the 10,000
// device rows kept without a push registration and 10 with one, what a
// call costs (devices_push lets it read the 10).
func BenchmarkPushDevices(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Write(ctx, func(tx Tx) error {
		for i := range 10_000 {
			if _, err := tx.SeeDevice(Device{ID: fmt.Sprintf("dev-%05d", i), TokenID: "env"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		if err := s.SetPushRegistration(ctx, fmt.Sprintf("dev-%05d", i*997), "", fmt.Sprintf("topic-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		ds, err := s.PushDevices(ctx)
		if err != nil || len(ds) != 10 {
			b.Fatalf("%d devices, %v", len(ds), err)
		}
	}
}
