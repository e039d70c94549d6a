package iris

import (
	"testing"

	"github.com/irisgate/irisgate/core"
)

// A broadcast's frames are made once and shared by every Iris device
// (Frames returns the same slice, which the hub copies from), while the
// requester's copy, with its id, is its own.
func TestFramesSharedPerEventNotPerRequester(t *testing.T) {
	ev := &core.Event{Type: core.EvMessageUpdate, Lane: core.Lane{ChatID: core.DefaultChatID}, StreamID: "m1", Text: "hi"}
	a, b := (codec{}).Frames(ev, 0), (codec{}).Frames(ev, 0)
	if len(a) != 1 || len(b) != 1 || &a[0] != &b[0] {
		t.Fatalf("two devices' frames are not one shared slice: %d, %d", len(a), len(b))
	}
	if a[0].Key != "u\x00m1" {
		t.Fatalf("key %q", a[0].Key)
	}
	r := (codec{}).Frames(ev, 42)
	if len(r) != 1 || &r[0] == &a[0] || string(r[0].Data) == string(a[0].Data) || r[0].Key != a[0].Key {
		t.Fatalf("the requester's frame is not its own encoding, with the same key")
	}
	// An event Iris has no frame for gives none, cached as none.
	none := &core.Event{Type: "no.such.event"}
	if f := (codec{}).Frames(none, 0); f != nil || (codec{}).Frames(none, 0) != nil {
		t.Fatal("a frame for an unknown event")
	}
}
