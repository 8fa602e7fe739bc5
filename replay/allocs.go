package replay

import "github.com/vramscope/vramscope/allocator"

// allocRecord is how a Timeline keeps an Allocation: 16 bytes instead of
// 64, for the 3.8 M allocations of the 996 MB bench file 61 MB instead of
// 243 (and of 76 with the 20-byte record before). A traced block's address, requested size, stack and stream are its
// alloc event's, so the record keeps only its event indices, its size in
// 512-byte units and its pool's index. An allocation that is not traced,
// whose size is not a whole number of units below 64 GiB or whose pool
// index is past 15 keeps its whole Allocation in Timeline.full, apart from
// the event indices: the record's are the ones the replay updates.
type allocRecord struct {
	start, free, end int32
	// packed holds the block size in units in its low unitBits bits and
	// the pool index in the poolBits above them, or, with fullBit set, the
	// index of the record's Allocation in Timeline.full.
	packed uint32
}

// The fields of allocRecord.packed. The largest block of the fixtures is
// 4 GiB (2^23 units) and no fixture has more than 3 pools.
const (
	unitBits = 27
	poolBits = 31 - unitBits
	fullBit  = 1 << 31
)

// full reports whether r's Allocation is kept in Timeline.full.
func (r *allocRecord) full() bool { return r.packed&fullBit != 0 }

// fullIndex is the index of a full record's Allocation in Timeline.full.
func (r *allocRecord) fullIndex() int { return int(r.packed &^ fullBit) }

// units is the block size, in 512-byte units, of a record that is not full.
func (r *allocRecord) units() uint32 { return r.packed & (1<<unitBits - 1) }

// pool is the pool index of a record that is not full.
func (r *allocRecord) pool() int { return int(r.packed >> unitBits) }

// NumAllocations is the number of allocations: the blocks active at some
// point of the trace.
func (t *Timeline) NumAllocations() int { return len(t.allocs) }

// Allocation returns allocation k, 0 <= k < NumAllocations. Allocations are
// ordered by Start (blocks live at the first event come first, by
// address).
func (t *Timeline) Allocation(k int) Allocation {
	r := &t.allocs[k]
	if r.full() {
		a := t.full[r.fullIndex()]
		a.Start, a.Free, a.End = r.start, r.free, r.end
		return a
	}
	e := t.Trace.At(int(r.start))
	return Allocation{
		Addr: e.Addr, Size: t.size(r), Requested: e.Size, Pool: t.Pools[r.pool()],
		Start: r.start, Free: r.free, End: r.end,
		Stack: e.Stack, Stream: e.Stream, Origin: Traced,
	}
}

// Lifetime returns allocation k's Start, Free and End without the rest of
// the Allocation: what scans over every allocation test, at a fraction of
// Allocation's cost.
func (t *Timeline) Lifetime(k int) (start, free, end int) {
	r := &t.allocs[k]
	return int(r.start), int(r.free), int(r.end)
}

// add appends a, whose pool is t.Pools[pool], to the allocations and
// returns its index.
func (t *Timeline) add(a *Allocation, pool int) int32 {
	k := int32(len(t.allocs))
	r := newRecord(a, pool, len(t.full))
	if r.full() {
		t.full = append(t.full, *a)
	}
	t.allocs = append(t.allocs, r)
	return k
}

// newRecord is the record of a, whose pool is t.Pools[pool]. A traced
// allocation's address, requested size, stack and stream are its alloc
// event's (alloc makes them so), so a record alone gives it back if its
// size and pool fit. One that does not, or is not traced, is full: a is
// kept whole as t.full[nextFull], which the caller appends.
func newRecord(a *Allocation, pool, nextFull int) allocRecord {
	return allocRecord{start: a.Start, free: a.Free, end: a.End, packed: recordWord(a.Origin == Traced, a.Size, pool, nextFull)}
}

// recordWord is the packed word of the record of a block of size bytes in
// pool index pool, traced or not: its units and pool if they fit and it
// is traced, or else the index nextFull of its Allocation in
// Timeline.full, with fullBit.
func recordWord(traced bool, size uint64, pool, nextFull int) uint32 {
	if units := size >> allocator.MinBlockBits; traced && units<<allocator.MinBlockBits == size && units < 1<<unitBits && uint(pool) < 1<<poolBits {
		return uint32(pool)<<unitBits | uint32(units)
	}
	return fullBit | uint32(nextFull)
}

// size is r's block size.
func (t *Timeline) size(r *allocRecord) uint64 {
	if r.full() {
		return t.full[r.fullIndex()].Size
	}
	return uint64(r.units()) << allocator.MinBlockBits
}

// requested is r's requested size.
func (t *Timeline) requested(r *allocRecord) uint64 {
	if r.full() {
		return t.full[r.fullIndex()].Requested
	}
	return t.Trace.At(int(r.start)).Size
}
