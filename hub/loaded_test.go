package hub_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
)

// countingProofs is a ProofStore in memory that counts its loads.
type countingProofs struct {
	mu    sync.Mutex
	sets  map[string][]core.CursorRange
	loads int
}

func (p *countingProofs) LoadProofs(_ context.Context, id string) ([]core.CursorRange, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loads++
	return p.sets[id], nil
}

func (p *countingProofs) SaveProofs(_ context.Context, id string, v []core.CursorRange) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sets[id] = v
	return nil
}

// A hello that read the device's proofs in its own statement gives them
// to AddLoaded, which then asks the store nothing — unless a proof set
// was saved after they were read (a connection of the device that ended
// meanwhile): then the store's, newer, set is loaded.
func TestAddLoadedUsesProofsReadAtHello(t *testing.T) {
	ctx := context.Background()
	ps := &countingProofs{sets: map[string][]core.CursorRange{}}
	h := hub.New(ps, slog.New(slog.NewTextHandler(io.Discard, nil)), hub.DefaultLimits)

	read := hub.Loaded{Saves: h.Saves(), Proven: []core.CursorRange{{Lo: 1, Hi: 4}}, Ok: true}
	c, _, err := h.AddLoaded(ctx, "phone", noFrames{}, nil, read)
	if err != nil {
		t.Fatal(err)
	}
	if ps.loads != 0 {
		t.Fatalf("AddLoaded with proofs read at hello loaded them again (%d loads)", ps.loads)
	}
	if !c.Proven(4) || c.Proven(5) {
		t.Fatalf("Proven(4), Proven(5) = %v, %v; want the set read at hello, 1-4", c.Proven(4), c.Proven(5))
	}
	// The device proves more and leaves: its set is saved.
	c.Wrote([]hub.Out{{Cursor: 5}})
	c.Cover()
	c.Proved()
	stale := hub.Loaded{Saves: h.Saves(), Proven: []core.CursorRange{{Lo: 1, Hi: 4}}, Ok: true} // read before the save
	h.Remove(c)
	if h.Saves() == stale.Saves {
		t.Fatal("saving the device's proofs was not counted")
	}
	c2, _, err := h.AddLoaded(ctx, "phone", noFrames{}, nil, stale)
	if err != nil {
		t.Fatal(err)
	}
	if ps.loads != 1 {
		t.Fatalf("proofs read before a save were used: %d loads, want 1", ps.loads)
	}
	if !c2.Proven(5) {
		t.Fatal("the proof saved after the hello read its set is lost")
	}
	h.Remove(c2)

	// Without proofs read (a store that cannot), Add's load.
	if _, _, err := h.AddLoaded(ctx, "tablet", noFrames{}, nil, hub.Loaded{Saves: h.Saves()}); err != nil {
		t.Fatal(err)
	}
	if ps.loads != 2 {
		t.Fatalf("%d loads, want 2: a Loaded without Ok must load", ps.loads)
	}
}

// A frame written before retention pruned it and proven after does not
// come back into the device's set below the floor: a device connected
// for months keeps a set of frames that still exist.
func TestProofAfterPruneStaysAboveTheFloor(t *testing.T) {
	ctx := context.Background()
	ps := &countingProofs{sets: map[string][]core.CursorRange{}}
	h := hub.New(ps, slog.New(slog.NewTextHandler(io.Discard, nil)), hub.DefaultLimits)
	c, _, err := h.AddLoaded(ctx, "phone", noFrames{}, nil, hub.Loaded{Saves: h.Saves()})
	if err != nil {
		t.Fatal(err)
	}
	c.Wrote([]hub.Out{{Cursor: 3}, {Cursor: 4}, {Cursor: 5}})
	c.Cover()
	h.DropBelow(5) // pruned 1-4 while the ping was in flight
	c.Proved()
	if c.Proven(3) || c.Proven(4) || !c.Proven(5) {
		t.Fatalf("Proven(3, 4, 5) = %v, %v, %v; want only 5: 3 and 4 are pruned", c.Proven(3), c.Proven(4), c.Proven(5))
	}
	h.Remove(c)
	if got := ps.sets["phone"]; len(got) != 1 || got[0] != (core.CursorRange{Lo: 5, Hi: 5}) {
		t.Fatalf("saved set %v, want 5-5", got)
	}
}
