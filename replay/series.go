package replay

import (
	"math"
	"slices"

	"github.com/vramscope/vramscope/internal/hugepage"
)

// A series is coded in blocks of blockLen consecutive events.
const (
	blockBits = 5
	blockLen  = 1 << blockBits
	blockMask = blockLen - 1
)

// series is one per-event value of a Timeline. Real values are small
// multiples of a unit (sums of block sizes are multiples of 512 bytes) and
// change little from one event to the next, so they are kept as counts of
// units, frame-of-reference coded: per block of 32 events a base (the
// block's smallest count) and per event a 16-bit offset from it. A block
// whose counts span 2^16 or more also keeps the high halves of its
// offsets in high. On the three 1 GB grown bench files, where 40-100% of
// blocks fit in 16 bits, the three series take 6.9-8.6 bytes per event
// instead of 12 as uint32s: 84 MB instead of 137 on the 11.4 M-event
// bench file.
//
// The first value that does not fit (not a multiple of the unit,
// negative, or 2^32 units or more) switches the series to plain int64s,
// so any input replays exactly.
//
// Values are written in order, i = 0, 1, ...: put (or set) stages each in
// staged, and seal codes a block once its last event is in.
type series struct {
	shift  uint8 // the unit is 1<<shift bytes
	n      int   // events
	blocks []seriesBlock
	low    []uint16 // per event, the low 16 bits of its offset from its block's base
	// high is blockLen zeros, which every block whose offsets fit in 16
	// bits points to, then blockLen high halves of offsets per block that
	// does not: at reads them without a branch.
	high   []uint16
	staged [blockLen]uint32 // the counts of the block being written
	wide   []int64          // every value, once one did not fit (blocks, low and high are nil)
}

// seriesBlock is the frame of reference of one block of a series.
type seriesBlock struct {
	base uint32 // the block's smallest count
	high uint32 // where its high halves start in series.high, in blocks
}

func newSeries(n int, shift uint8) series {
	s := series{
		shift:  shift,
		n:      n,
		blocks: make([]seriesBlock, (n+blockMask)>>blockBits),
		low:    make([]uint16, n),
		high:   make([]uint16, blockLen),
	}
	hugepage.Advise(s.low)
	return s
}

func (s *series) len() int { return s.n }

func (s *series) at(i int) int64 {
	if s.wide != nil {
		return s.wide[i]
	}
	b := s.blocks[i>>blockBits]
	offset := uint32(s.low[i]) | uint32(s.high[int(b.high)<<blockBits|i&blockMask])<<16
	return int64(b.base+offset) << (s.shift & 63)
}

// put stages v for event i if the series is not wide and v fits, and
// reports whether it did. It is set's fast path, small enough to be
// inlined: the replay loop makes three puts per event, and three calls of
// set once cost it nearly twice the instructions (80 per event instead of
// 45 on the 600 k-event grown60 snapshot).
func (s *series) put(i int, v int64) bool {
	// The mask tells the compiler that the shift is below 64, so that it
	// emits a bare shift instead of one with an overflow fixup. n
	// round-trips unless v has bits below the unit or from 32 units up, or
	// is negative.
	sh := s.shift & 63
	n := uint32(uint64(v) >> sh)
	if s.wide != nil || int64(n)<<sh != v {
		return false
	}
	s.staged[i&blockMask] = n
	return true
}

// set stores v for event i, first moving every value so far to wide if v
// does not fit.
func (s *series) set(i int, v int64) {
	if s.put(i, v) {
		return
	}
	if s.wide == nil {
		wide := make([]int64, s.n)
		hugepage.Advise(wide)
		first := i &^ blockMask // the first event of i's block, which is not sealed
		for k := range first {
			wide[k] = s.at(k)
		}
		for k := first; k < i; k++ {
			wide[k] = int64(s.staged[k&blockMask]) << (s.shift & 63)
		}
		s.wide, s.blocks, s.low, s.high = wide, nil, nil, nil
	}
	s.wide[i] = v
}

// seal codes the block of event i, the block's last event or the
// series' last: its staged counts become the block's base and offsets.
func (s *series) seal(i int) {
	if s.wide != nil {
		return
	}
	counts := s.staged[:i&blockMask+1]
	base := slices.Min(counts)
	b := seriesBlock{base: base}
	if slices.Max(counts)-base > math.MaxUint16 {
		b.high = uint32(len(s.high) >> blockBits)
		s.high = slices.Grow(s.high, blockLen)[:len(s.high)+blockLen]
		high := s.high[len(s.high)-blockLen:]
		for k, c := range counts {
			high[k] = uint16((c - base) >> 16)
		}
	}
	s.blocks[i>>blockBits] = b
	low := s.low[i&^blockMask:]
	for k, c := range counts {
		low[k] = uint16(c - base)
	}
}

// endsBlock reports whether event i is the last of its block in a series
// of n events: the one after which the block is sealed.
func endsBlock(i, n int) bool { return i&blockMask == blockMask || i == n-1 }
