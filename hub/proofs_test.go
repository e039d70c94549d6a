package hub_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/storetest"
)

var (
	_ hub.ProofStore = (*store.Store)(nil)
	_ hub.ProofStore = storetest.Store(nil) // the store contract covers it
)

type noFrames struct{}

func (noFrames) Frames(*core.Event, int64) []hub.Out { return nil }

// What a device proved survives its connection and the hub: it is saved
// through the ProofStore when the device goes, in the stored format, and a
// new hub over the same SQLite file loads it back at the next hello.
func TestProofsOutliveTheHub(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := hub.New(st, log, hub.DefaultLimits)
	c, _, err := h.Add(ctx, "phone", noFrames{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Wrote([]hub.Out{{Cursor: 1}, {Cursor: 2}, {Cursor: 3}, {Cursor: 7}})
	c.Cover()
	c.Proved()
	c.Wrote([]hub.Out{{Cursor: 8}}) // written, never proven
	h.Remove(c)

	got, err := st.LoadProofs(ctx, "phone")
	if err != nil {
		t.Fatal(err)
	}
	if want := []core.CursorRange{{Lo: 1, Hi: 3}, {Lo: 7, Hi: 7}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("saved %v, want %v", got, want)
	}

	h2 := hub.New(st, log, hub.DefaultLimits)
	c2, _, err := h2.Add(ctx, "phone", noFrames{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Remove(c2)
	for cur, want := range map[int64]bool{1: true, 3: true, 4: false, 7: true, 8: false} {
		if c2.Proven(cur) != want {
			t.Errorf("after a restart, Proven(%d) = %v, want %v", cur, !want, want)
		}
	}
	if none, err := st.LoadProofs(ctx, "tablet"); err != nil || len(none) != 0 {
		t.Fatalf("a device never seen has proofs %v (%v)", none, err)
	}
}
