package hub

import (
	"sort"

	"github.com/irisgate/irisgate/core"
)

// Intervals is a set of int64 values kept as sorted, disjoint, non-adjacent
// closed ranges. A device's proven cursors are mostly one long run, so the
// set stays a handful of ranges however many frames it holds.
type Intervals struct {
	r []span
}

type span struct{ lo, hi int64 }

// Add puts [lo, hi] into the set.
func (s *Intervals) Add(lo, hi int64) {
	if hi < lo {
		return
	}
	// First range that could touch [lo,hi]: the first whose hi >= lo-1.
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= lo-1 })
	j := i
	for j < len(s.r) && s.r[j].lo <= hi+1 {
		lo = min(lo, s.r[j].lo)
		hi = max(hi, s.r[j].hi)
		j++
	}
	if i == j {
		s.r = append(s.r, span{})
		copy(s.r[i+1:], s.r[i:])
		s.r[i] = span{lo, hi}
		s.capRanges()
		return
	}
	s.r[i] = span{lo, hi}
	s.r = append(s.r[:i+1], s.r[j:]...)
}

// Has reports whether v is in the set.
func (s *Intervals) Has(v int64) bool {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= v })
	return i < len(s.r) && s.r[i].lo <= v
}

// DropBelow removes every value < v (cursors that retention pruned).
func (s *Intervals) DropBelow(v int64) {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= v })
	s.r = s.r[i:]
	if len(s.r) > 0 && s.r[0].lo < v {
		s.r[0].lo = v
	}
}

// MaxRanges bounds a set's ranges: past it, the lowest go. A proof set
// stays a handful of ranges (cursors a device needs no frame for count as
// covered, and retention drops what is below the outbox's floor); the
// bound is what holds whatever happens, and forgetting a proof costs at
// most a frame replayed twice.
const MaxRanges = 4096

// capRanges drops the lowest ranges past MaxRanges.
func (s *Intervals) capRanges() {
	if n := len(s.r) - MaxRanges; n > 0 {
		s.r = append(s.r[:0], s.r[n:]...)
	}
}

// Len is the number of ranges.
func (s *Intervals) Len() int { return len(s.r) }

// Ranges returns the set's ranges in increasing order (for storing it).
func (s *Intervals) Ranges() []core.CursorRange {
	out := make([]core.CursorRange, len(s.r))
	for i, r := range s.r {
		out[i] = core.CursorRange{Lo: r.lo, Hi: r.hi}
	}
	return out
}

// FromRanges makes the set of the given ranges, in any order, overlapping
// or not (what a store loads back).
func FromRanges(rs []core.CursorRange) Intervals {
	var s Intervals
	for _, r := range rs {
		s.Add(r.Lo, r.Hi)
	}
	return s
}
