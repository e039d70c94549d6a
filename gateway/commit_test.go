package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// A batch is committed as one transaction; a write that fails in it is
// undone alone (its own partial changes too) and the others land.
func TestCommitBatchIsolatesAFailingWrite(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := New(st, hub.New(st, log, hub.DefaultLimits), log, Config{})
	put := func(id string) func(store.Tx) error {
		return func(tx store.Tx) error {
			return tx.PutChannel(core.Channel{ChatID: id, Name: id, Kind: core.KindChannel})
		}
	}
	boom := errors.New("boom")
	ws := []*write{
		{apply: put("chan_a"), ev: &core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: "chan_a"}}, done: make(chan error, 1)},
		{apply: func(tx store.Tx) error {
			if err := put("chan_half")(tx); err != nil {
				return err
			}
			return boom // after a change of its own
		}, ev: &core.Event{Type: core.EvAgentIdle}, done: make(chan error, 1)},
		{apply: put("chan_b"), ev: &core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: "chan_b"}}, done: make(chan error, 1)},
	}
	for _, w := range ws { // queued before the loop runs: one batch
		g.writes <- w
	}
	done := make(chan struct{})
	loop := make(chan error, 1)
	go func() { loop <- g.commitLoop(done) }()
	defer func() { close(done); <-loop }()
	for i, w := range ws {
		select {
		case err := <-w.done:
			if want := i == 1; (err != nil) != want || (want && !errors.Is(err, boom)) {
				t.Fatalf("write %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d never committed", i)
		}
	}
	ctx := context.Background()
	for id, want := range map[string]bool{"chan_a": true, "chan_half": false, "chan_b": true} {
		if _, err := st.Channel(ctx, id); (err == nil) != want {
			t.Errorf("channel %s: %v, want present %v", id, err, want)
		}
	}
	if ws[0].ev.Cursor == 0 || ws[2].ev.Cursor != ws[0].ev.Cursor+1 {
		t.Errorf("cursors %d, %d: the failed write must leave no gap", ws[0].ev.Cursor, ws[2].ev.Cursor)
	}
}
