package commit

import (
	"testing"

	"github.com/irisgate/irisgate/core"
)

func TestReplayCacheBounds(t *testing.T) {
	r := newReplayCache(4, 100)
	ev := func(c int64) *core.Event { return &core.Event{Type: core.EvAgentIdle, Cursor: c} }
	for c := int64(1); c <= 6; c++ {
		r.add(ev(c), 10)
	}
	// Four slots: 1 and 2 were evicted, 3..6 are kept.
	for c := int64(1); c <= 6; c++ {
		if got := r.get(c); (got != nil) != (c >= 3) || (got != nil && got.Cursor != c) {
			t.Fatalf("get(%d) = %v", c, got)
		}
	}
	// The byte budget evicts the oldest too.
	r.add(ev(7), 85)
	if r.get(5) != nil || r.get(6) == nil || r.get(7) == nil {
		t.Fatalf("after a large frame: lo=%d hi=%d bytes=%d", r.lo, r.hi, r.bytes)
	}
	// A gap (cursors not contiguous) starts afresh rather than serving a
	// wrong frame.
	r.add(ev(9), 1)
	if r.get(7) != nil || r.get(8) != nil || r.get(9) == nil {
		t.Fatal("a gap must reset the cache")
	}
	r.reset()
	if r.get(9) != nil {
		t.Fatal("reset kept a frame")
	}
	var off *replayCache // ReplayCache < 0
	off.add(ev(1), 1)
	if off.get(1) != nil {
		t.Fatal("a disabled cache returned a frame")
	}
}

func TestReplayCacheGrows(t *testing.T) {
	r := newReplayCache(1<<12, 1<<30)
	for c := int64(1); c <= 3000; c++ {
		r.add(&core.Event{Cursor: c}, 1)
	}
	if len(r.slots) != 4096 {
		t.Fatalf("%d slots for 3000 frames", len(r.slots))
	}
	for c := int64(1); c <= 3000; c++ {
		if got := r.get(c); got == nil || got.Cursor != c {
			t.Fatalf("get(%d) after growing = %v", c, got)
		}
	}
}
