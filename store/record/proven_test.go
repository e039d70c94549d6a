package record

import (
	"slices"
	"testing"

	"github.com/irisgate/irisgate/core"
)

func TestProvenRoundTrips(t *testing.T) {
	rs := []core.CursorRange{{Lo: 1, Hi: 3}, {Lo: 5, Hi: 5}, {Lo: 7, Hi: 1 << 40}}
	s := EncodeProven(rs)
	if s != "1-3,5-5,7-1099511627776" {
		t.Fatalf("encoded %q: the stored format changed", s)
	}
	if back := DecodeProven(s); !slices.Equal(back, rs) {
		t.Fatalf("round trip: %v, want %v", back, rs)
	}
	if EncodeProven(nil) != "" || len(DecodeProven("")) != 0 {
		t.Fatal("the empty set is not the empty string")
	}
}

func TestDecodeProvenSkipsGarbage(t *testing.T) {
	got := DecodeProven("1-3,x,5-,7-9,-,9-8")
	want := []core.CursorRange{{Lo: 1, Hi: 3}, {Lo: 7, Hi: 9}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
