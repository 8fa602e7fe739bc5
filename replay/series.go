package replay

import (
	"github.com/vramscope/vramscope/internal/hugepage"
)

// series is one per-event value of a Timeline. Real values are small
// multiples of a unit (sums of block sizes are multiples of 512 bytes), so
// they are kept as uint32 counts of units: 4 bytes per event instead of 8,
// 130 MiB less for three series on the 11.4 M-event bench file. The first
// value that does not fit (not a multiple of the unit, negative, or 2^32
// units or more) switches the series to plain int64s, so any input
// replays exactly.
type series struct {
	shift  uint8    // the unit is 1<<shift bytes
	narrow []uint32 // value>>shift per event, while every value fits
	wide   []int64  // every value, once one did not fit (narrow is nil)
}

func newSeries(n int, shift uint8) series {
	s := series{shift: shift, narrow: make([]uint32, n)}
	hugepage.Advise(s.narrow)
	return s
}

func (s *series) len() int { return len(s.narrow) + len(s.wide) }

func (s *series) at(i int) int64 {
	if s.wide != nil {
		return s.wide[i]
	}
	return int64(s.narrow[i]) << (s.shift & 63)
}

// put stores v at i if the series is narrow and v fits, and reports
// whether it did. It is set's fast path, small enough to be inlined: the
// replay loop's three puts cost 45 instructions per event where three calls
// of set cost 80 (replay of the 600 k-event grown60 snapshot).
func (s *series) put(i int, v int64) bool {
	// The mask tells the compiler that the shift is below 64, so that it
	// emits a bare shift instead of one with an overflow fixup. n
	// round-trips unless v has bits below the unit or from 32 units up, or
	// is negative. A wide series has no narrow values: i is out of range.
	sh := s.shift & 63
	n := uint32(uint64(v) >> sh)
	if uint(i) >= uint(len(s.narrow)) || int64(n)<<sh != v {
		return false
	}
	s.narrow[i] = n
	return true
}

// set stores v at i, first moving every value to wide if v does not fit.
func (s *series) set(i int, v int64) {
	if s.put(i, v) {
		return
	}
	if s.wide == nil {
		wide := make([]int64, len(s.narrow))
		hugepage.Advise(wide)
		for k := range wide {
			wide[k] = s.at(k)
		}
		s.wide, s.narrow = wide, nil
	}
	s.wide[i] = v
}
