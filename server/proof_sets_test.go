package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/store/record"
)

// A device's proof set stays one range: an outbox frame it gets nothing
// of (here its own read receipts, which go to the other devices) counts
// as covered. (Before, each left a hole: a device reading as it chatted
// grew its set, saved and reloaded at every connection, by a range a
// receipt.)
func TestProofSetsStayOneRange(t *testing.T) {
	g := testgw.Start(t)
	a := g.Dial(t, "phone")
	b := g.Dial(t, "tablet")
	msg := send(t, a, def, "read me")
	a.Expect("agent.idle", nil)
	b.Expect("agent.idle", nil)
	for i := range 40 {
		b.MustDo("read.receipt", def, map[string]any{"message_id": msg})
		createChannel(t, a, fmt.Sprint("c", i), "") // a frame the tablet gets
	}
	ctx, cancel := contextWait()
	defer cancel()
	head, err := g.App.Store.OutboxHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.App.Hub.WaitProven(ctx, "tablet", head); err != nil { // the last channel.created
		t.Fatal(err)
	}
	b.Close()
	// Saved as the connection goes (and every 2 s meanwhile).
	proven := savedProofs(ctx, t, g, "tablet", head)
	if n := strings.Count(proven, ",") + 1; n != 1 {
		t.Fatalf("the tablet's proof set has %d ranges, want 1: %s", n, proven)
	}
}

// Retention drops the proofs of the frames it prunes, from the live
// devices' sets: a device connected for months keeps a set of the frames
// that still exist, not of every frame it ever got.
func TestProofSetsDropWhatRetentionPrunes(t *testing.T) {
	g := testgw.Start(t, func(c *server.AppConfig) { c.OutboxKeep = 50 })
	a := g.Dial(t, "phone")
	for i := range 300 {
		createChannel(t, a, fmt.Sprint("c", i), "")
	}
	ctx, cancel := contextWait()
	defer cancel()
	var floor int64
	for floor == 0 {
		var err error
		if floor, err = g.App.Store.OutboxFloor(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("nothing pruned")
		case <-time.After(5 * time.Millisecond):
		}
	}
	head, _ := g.App.Store.OutboxHead(ctx)
	if err := g.App.Hub.WaitProven(ctx, "phone", head); err != nil {
		t.Fatal(err)
	}
	// The prune pass drops the proofs after it has pruned, and a live
	// device's set is saved every 2 s: a floor read now may be one the
	// pass has not dropped yet, so the set saved must come above the
	// floor as it is when it is read.
	for {
		floor, err := g.App.Store.OutboxFloor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p, err := g.App.Store.LoadProofs(ctx, "phone")
		if err != nil {
			t.Fatal(err)
		}
		proven := record.EncodeProven(p)
		lo, _, _ := strings.Cut(proven, "-")
		if n, _ := strconv.ParseInt(lo, 10, 64); n > floor && strings.HasSuffix(proven, fmt.Sprint("-", head)) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the phone's saved proofs %s still reach below the outbox's floor %d", proven, floor)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// savedProofs waits until the device's stored proofs reach head, and
// returns them as the devices.proven column holds them.
func savedProofs(ctx context.Context, t *testing.T, g *testgw.GW, device string, head int64) string {
	t.Helper()
	var proven string
	for !strings.HasSuffix(proven, fmt.Sprint("-", head)) {
		p, err := g.App.Store.LoadProofs(ctx, device)
		if err != nil {
			t.Fatal(err)
		}
		proven = record.EncodeProven(p)
		select {
		case <-ctx.Done():
			t.Fatalf("the %s's proofs were not saved: %q", device, proven)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return proven
}
