package replay

import (
	"math"
	"slices"
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
// Values are written in order, i = 0, 1, ... (write): put (or set) stages
// each in staged, and seal codes a block once its last event is in; a
// whole block that fits is coded at once (codeWhole).
type series struct {
	shift  uint8 // the unit is 1<<shift bytes
	n      int   // events
	blocks []seriesBlock
	// high holds the high halves of the offsets of the blocks whose
	// offsets do not fit in 16 bits, blockLen per block, in chunks of
	// highChunkLen blocks that are never copied: grown by doubling, the
	// copies' fresh pages cost analyze of the 996 MB bench file about
	// 25 ms of its 2.25 s of CPU. highs is the number of such blocks, plus
	// one: no block's high halves are number 0, which marks a block
	// without.
	high   [][]uint16
	highs  uint32
	staged [blockLen]uint32 // the counts of the block being written
	wide   []int64          // every value, once one did not fit (blocks and high are nil)
}

// highChunkBits sizes series.high's chunks: 2048 blocks, 128 KiB. The first
// chunk starts small and grows, so that a small trace's series do not
// pay for a whole one.
const (
	highChunkBits = 11
	highChunkLen  = 1 << highChunkBits
	highChunkMask = highChunkLen - 1
)

// seriesBlock is one block of a series: its frame of reference and the
// low halves of its offsets, side by side for a scan to read one stream.
type seriesBlock struct {
	base uint32 // the block's smallest count
	high uint32 // the number of its offsets' high halves in series.high (highOf), or 0: none
	// A block's largest offset kept here (4 bytes more a block) saved
	// maxIn 25 ms of a 2-core analyze's 2.17 s of CPU on the 996 MB bench
	// file, but the 300 MB kv_generate file's analyze then peaked at
	// 144.0-144.5 thousand KiB instead of 140.9-141.7 (0.49x instead of
	// 0.48x, 1 core): not kept.
	low [blockLen]uint16
}

func newSeries(n int, shift uint8) series {
	s := series{
		shift:  shift,
		n:      n,
		blocks: make([]seriesBlock, (n+blockMask)>>blockBits),
		highs:  1,
	}
	return s
}

func (s *series) len() int { return s.n }

// maxIn returns the largest value of events lo..hi-1 (lo < hi), a block
// at a time where a block lies wholly inside: its largest offset, found
// without decoding each value.
func (s *series) maxIn(lo, hi int) int64 {
	if s.wide != nil {
		return slices.Max(s.wide[lo:hi])
	}
	best := int64(math.MinInt64)
	for i := lo; i < hi; {
		b := &s.blocks[i>>blockBits]
		if i&blockMask != 0 || hi-i < blockLen || b.high != 0 {
			best = max(best, s.at(i))
			i++
			continue
		}
		best = max(best, int64(b.base+uint32(slices.Max(b.low[:])))<<(s.shift&63))
		i += blockLen
	}
	return best
}

func (s *series) at(i int) int64 {
	if s.wide != nil {
		return s.wide[i]
	}
	b := &s.blocks[i>>blockBits]
	k := i & blockMask
	offset := uint32(b.low[k])
	// A branch that goes the same way for 32 events: Downsample's scans
	// of the 1 GB bench files took 3.4 ns per event with it, 3.7 without.
	if b.high != 0 {
		offset |= uint32(s.highOf(b.high)[k]) << 16
	}
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
		first := i &^ blockMask // the first event of i's block, which is not sealed
		for k := range first {
			wide[k] = s.at(k)
		}
		for k := first; k < i; k++ {
			wide[k] = int64(s.staged[k&blockMask]) << (s.shift & 63)
		}
		s.wide, s.blocks, s.high, s.highs = wide, nil, nil, 0
	}
	s.wide[i] = v
}

// write writes vs, the values of events start, start+1, ..., which follow
// the last ones written (start is 0 at first). A whole block of values
// that fit is counted, framed and coded in one pass (codeWhole); any other
// value goes through put, or set where put refuses, and its block is
// sealed after its last event: the same series either way. Value by
// value, with seal's passes over each block, the writers ran 582 M of
// BenchmarkReplay's 3,108 M instructions; a block at once, 320 M of
// 2,846 M (and analyze of a 288 MB bench-shaped file on one core 11.69 G
// instead of 11.92 G).
func (s *series) write(start int, vs []int64) {
	for len(vs) > 0 {
		k := start & blockMask
		m := min(blockLen-k, len(vs))
		if k != 0 || m < blockLen || !s.codeWhole(start, (*[blockLen]int64)(vs)) {
			for j, v := range vs[:m] {
				i := start + j
				if !s.put(i, v) {
					s.set(i, v)
				}
				if endsBlock(i, s.n) {
					s.seal(i)
				}
			}
		}
		start += m
		vs = vs[m:]
	}
	if start == s.n {
		// Done: what staged holds depends on where the batches fell (a
		// whole block is coded without it), so it is cleared, and series
		// written in other batches are equal.
		s.staged = [blockLen]uint32{}
	}
}

// codeWhole codes the block whose first event is i from its values vs, if
// the series is not wide and they all fit, as put for each and then seal
// would; it reports whether it did. It checks them all at once, their
// smallest, their largest and the bits of all: one pass that stores
// nothing, then the offsets straight from the values (BenchmarkSeriesWrite
// 1.27-1.43 ns a value, against 2.03-2.09 staging each count).
func (s *series) codeWhole(i int, vs *[blockLen]int64) bool {
	if s.wide != nil {
		return false
	}
	sh := s.shift & 63 // as in put
	lo, hi, bits := vs[0], vs[0], uint64(0)
	for _, v := range vs {
		lo, hi, bits = min(lo, v), max(hi, v), bits|uint64(v)
	}
	if lo < 0 || bits&(1<<sh-1) != 0 || uint64(hi)>>sh > math.MaxUint32 {
		return false
	}
	code(s, i>>blockBits, vs[:], sh, uint32(uint64(lo)>>sh), uint32(uint64(hi)>>sh))
	return true
}

// seal codes the block of event i, the block's last event or the
// series' last: its staged counts become the block's base and offsets.
func (s *series) seal(i int) {
	if s.wide != nil {
		return
	}
	counts := s.staged[:i&blockMask+1]
	code(s, i>>blockBits, counts, 0, slices.Min(counts), slices.Max(counts))
}

// code makes block bi of s from xs, counts of units shifted left by sh
// (staged counts, with sh 0, or whole values), whose smallest count is lo
// and largest hi.
func code[T uint32 | int64](s *series, bi int, xs []T, sh uint8, lo, hi uint32) {
	b := &s.blocks[bi]
	b.base = lo
	if hi-lo > math.MaxUint16 {
		b.high = s.newHigh()
		high := s.highOf(b.high)[:len(xs)]
		for k, x := range xs {
			high[k] = uint16((uint32(uint64(x)>>(sh&63)) - lo) >> 16)
		}
	}
	low := b.low[:len(xs)]
	for k, x := range xs {
		low[k] = uint16(uint32(uint64(x)>>(sh&63)) - lo)
	}
}

// newHigh makes room for a block's high halves and returns their number.
func (s *series) newHigh() uint32 {
	h := s.highs
	s.highs++
	c, need := int(h>>highChunkBits), int(h&highChunkMask+1)<<blockBits
	switch {
	case c == len(s.high) && c == 0:
		s.high = append(s.high, make([]uint16, need, 8<<blockBits))
	case c == len(s.high):
		s.high = append(s.high, make([]uint16, highChunkLen<<blockBits))
	case need > cap(s.high[c]): // the first chunk, full
		grown := make([]uint16, need, min(2*cap(s.high[c]), highChunkLen<<blockBits))
		copy(grown, s.high[c])
		s.high[c] = grown
	default:
		s.high[c] = s.high[c][:need]
	}
	return h
}

// highOf is the high halves of the block whose number is h (newHigh).
func (s *series) highOf(h uint32) []uint16 {
	return s.high[h>>highChunkBits][(h&highChunkMask)<<blockBits:][:blockLen]
}

// endsBlock reports whether event i is the last of its block in a series
// of n events: the one after which the block is sealed.
func endsBlock(i, n int) bool { return i&blockMask == blockMask || i == n-1 }
