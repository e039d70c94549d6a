package store

import (
	"context"
	"slices"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// SeeDeviceProofs records a hello as SeeDevice does (in the group commit:
// as its sqliteTx) and returns what LoadProofs would then: nothing for a
// device never seen, the saved set for one that proved frames.
func TestSeeDeviceProofsReadsTheRowItWrites(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	see := func(d Device) (int64, []core.CursorRange) {
		t.Helper()
		var last int64
		var proven []core.CursorRange
		if err := s.Write(ctx, func(tx Tx) (err error) {
			last, proven, err = tx.(*sqliteTx).SeeDeviceProofs(d)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return last, proven
	}
	if last, proven := see(Device{ID: "phone", Name: "Pixel", TokenID: "tok_1"}); last != 0 || proven != nil {
		t.Fatalf("a new device: last pushed %d, proofs %v; want 0 and none", last, proven)
	}
	if n, err := s.DeviceName(ctx, "phone"); err != nil || n != "Pixel" {
		t.Fatalf("the row it wrote: name %q, %v", n, err)
	}
	set := []core.CursorRange{{Lo: 1, Hi: 5}, {Lo: 9, Hi: 9}}
	if err := s.SaveProofs(ctx, "phone", set); err != nil {
		t.Fatal(err)
	}
	rawExec(t, s, `UPDATE devices SET last_pushed_cursor = 7 WHERE device_id = 'phone'`)
	last, proven := see(Device{ID: "phone"}) // no name: the stored one stays
	loaded, err := s.LoadProofs(ctx, "phone")
	if err != nil {
		t.Fatal(err)
	}
	if last != 7 || !slices.Equal(proven, set) || !slices.Equal(proven, loaded) {
		t.Fatalf("a known device: last pushed %d, proofs %v (LoadProofs %v); want 7 and %v", last, proven, loaded, set)
	}
	if n, err := s.DeviceName(ctx, "phone"); err != nil || n != "Pixel" {
		t.Fatalf("a hello without a name changed it: %q, %v", n, err)
	}
}
