package replay

import "github.com/vramscope/vramscope/allocator"

// allocRecord is how a Timeline keeps an Allocation: 20 bytes instead of
// 64, for the 3.8 M allocations of the 996 MB bench file 72 MiB instead of
// 232 (analyze's peak RSS 754 -> 592 MB). A traced block's address,
// requested size, stack and stream are its alloc event's, so the record
// keeps only its event indices, its size in 512-byte units and its pool's
// index. An allocation that is not traced, whose size is not a whole
// number of units below 2 TiB or whose pool index is past 65535 keeps its
// whole Allocation in Timeline.full, apart from the event indices: the
// record's are the ones the replay updates.
type allocRecord struct {
	start, free, end int32
	// units is the block size in 512-byte units; for a full record, the
	// index of its Allocation in Timeline.full.
	units uint32
	pool  uint16 // index in Timeline.Pools; unused by a full record
	full  bool
}

// NumAllocations is the number of allocations: the blocks active at some
// point of the trace.
func (t *Timeline) NumAllocations() int { return len(t.allocs) }

// Allocation returns allocation k, 0 <= k < NumAllocations. Allocations are
// ordered by Start (blocks live at the first event come first, by
// address).
func (t *Timeline) Allocation(k int) Allocation {
	r := &t.allocs[k]
	if r.full {
		a := t.full[r.units]
		a.Start, a.Free, a.End = r.start, r.free, r.end
		return a
	}
	e := t.Trace.At(int(r.start))
	return Allocation{
		Addr: e.Addr, Size: t.size(r), Requested: e.Size, Pool: t.Pools[r.pool],
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
	if r.full {
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
	r := allocRecord{start: a.Start, free: a.Free, end: a.End, units: uint32(a.Size >> allocator.MinBlockBits), pool: uint16(pool)}
	// units round-trips unless the size has bits below 512 or from 2 TiB up.
	if a.Origin != Traced || uint64(r.units)<<allocator.MinBlockBits != a.Size || int(r.pool) != pool {
		r.units, r.full = uint32(nextFull), true
	}
	return r
}

// size is r's block size.
func (t *Timeline) size(r *allocRecord) uint64 {
	if r.full {
		return t.full[r.units].Size
	}
	return uint64(r.units) << allocator.MinBlockBits
}

// requested is r's requested size.
func (t *Timeline) requested(r *allocRecord) uint64 {
	if r.full {
		return t.full[r.units].Requested
	}
	return t.Trace.At(int(r.start)).Size
}
