package hub

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/irisgate/irisgate/core"
)

func TestIntervalsMatchesASet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var s Intervals
		want := map[int64]bool{}
		for i := 0; i < 50; i++ {
			lo := r.Int64N(100)
			hi := lo + r.Int64N(5)
			s.Add(lo, hi)
			for v := lo; v <= hi; v++ {
				want[v] = true
			}
		}
		if r.IntN(2) == 0 {
			cut := r.Int64N(100)
			s.DropBelow(cut)
			for v := range want {
				if v < cut {
					delete(want, v)
				}
			}
		}
		for v := int64(-1); v <= 106; v++ {
			if s.Has(v) != want[v] {
				t.Fatalf("round %d: Has(%d) = %v, want %v (set %v)", round, v, s.Has(v), want[v], s.Ranges())
			}
		}
		for i := 1; i < len(s.r); i++ {
			if s.r[i].lo <= s.r[i-1].hi+1 {
				t.Fatalf("ranges not disjoint and separated: %v", s.Ranges())
			}
		}
		back := FromRanges(s.Ranges())
		if !slices.Equal(back.Ranges(), s.Ranges()) {
			t.Fatalf("round trip: %v != %v", back.Ranges(), s.Ranges())
		}
	}
}

func TestIntervalsStayCompactForARun(t *testing.T) {
	var s Intervals
	for v := int64(1); v <= 100000; v++ {
		s.Add(v, v)
	}
	if s.Len() != 1 {
		t.Fatalf("a contiguous run is %d ranges", s.Len())
	}
}

// A store may hand back ranges unsorted or overlapping (a row written by
// hand): the set is rebuilt, never trusted as it came.
func TestFromRangesMergesWhatItIsGiven(t *testing.T) {
	s := FromRanges([]core.CursorRange{{Lo: 7, Hi: 9}, {Lo: 1, Hi: 3}, {Lo: 2, Hi: 5}, {Lo: 6, Hi: 6}, {Lo: 12, Hi: 11}})
	if want := []core.CursorRange{{Lo: 1, Hi: 9}}; !slices.Equal(s.Ranges(), want) {
		t.Fatalf("got %v, want %v", s.Ranges(), want)
	}
}

// A set holds at most MaxRanges ranges, whatever is added: the lowest go.
func TestIntervalsAreBounded(t *testing.T) {
	var s Intervals
	for v := int64(0); v < 3*MaxRanges; v++ {
		s.Add(2*v, 2*v) // never adjacent: a range each
	}
	if s.Len() != MaxRanges {
		t.Fatalf("%d ranges, want %d", s.Len(), MaxRanges)
	}
	if !s.Has(2*(3*MaxRanges-1)) || s.Has(0) {
		t.Fatal("the newest ranges are not the ones kept")
	}
}
