package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// gatedStore holds the commit log's transactions at a gate, before they
// take SQLite's one writer connection, while the gate is shut.
type gatedStore struct {
	Store
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (s *gatedStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return s.Store.Write(ctx, fn)
}

// fcm.register waits for every write queued on the commit log before it,
// the hello's own device row among them (seeDevice), before it stores an
// address: the row it adds the address to names the hello's token, and a
// row lost with the queue fails the request instead of leaving an
// address no revocation ends.
func TestRegisterPushWaitsForWritesQueuedBeforeIt(t *testing.T) {
	st, sq := openStore(t)
	gs := &gatedStore{Store: st}
	g := New(gs, hub.New(sq, quiet(), hub.DefaultLimits), quiet(), Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-g.Recovered():
	case <-time.After(within):
		t.Fatal("the gateway never finished recovering")
	}
	gate := make(chan struct{})
	gs.mu.Lock()
	gs.gate = gate
	gs.mu.Unlock()
	opened := false
	open := func() {
		if !opened {
			opened = true
			gs.mu.Lock()
			gs.gate = nil
			gs.mu.Unlock()
			close(gate)
		}
	}
	defer open()
	row, err := g.commits.Enqueue(ctx, func(tx store.Tx) error {
		_, err := tx.SeeDevice(store.Device{ID: "phone", TokenID: "tok_phone"})
		return err
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- g.RegisterPush(ctx, hub.Caller{Conn: &hub.Conn{DeviceID: "phone"}}, "", "phone-topic-1", "")
	}()
	// A wrong early return shows at once; a slow machine can only make
	// this pass.
	select {
	case err := <-done:
		t.Fatalf("fcm.register returned (%v) while the hello's row still waited to commit", err)
	case <-time.After(200 * time.Millisecond):
	}
	open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := row.Wait(); err != nil {
		t.Fatal(err)
	}
	d, err := sq.Device(context.Background(), "phone")
	if err != nil || d.NtfyTopic != "phone-topic-1" || d.TokenID != "tok_phone" {
		t.Fatalf("device row %+v (%v), want the topic on the row naming tok_phone", d, err)
	}
}
