package replay

import (
	"maps"
	"slices"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/snapshot"
)

// RoundSize is the allocator's round_size without roundup_power2_divisions
// (allocator.RoundSize), kept here for the packages that round what the
// replay reports.
func RoundSize(n uint64) uint64 { return allocator.RoundSize(n) }

// blockSize is the size of the block an allocation of rounded size r takes
// from a free range of gap bytes in seg (allocator.BlockSize).
func blockSize(gap, r uint64, seg *segment, maxSplit uint64) uint64 {
	pool := allocator.Large
	if seg.typ == snapshot.Small {
		pool = allocator.Small
	}
	return allocator.BlockSize(pool, seg.expandable, r, gap, maxSplit)
}

// layout is one device's allocator state during the forward replay: segments
// and the free (inactive) ranges inside them. Active blocks live in the
// replayer's address map. Inactive blocks are exactly the maximal free
// ranges, since free_block merges a freed block with its inactive
// neighbours; so two maps (by start and by end) make alloc, free and merge
// O(1).
type layout struct {
	segs     segmentSet
	freeFrom *addrMap[uint64] // free range start -> end
	freeTo   *addrMap[uint64] // free range end -> start
	maxSplit uint64
	// A layout of a sharded forward pass (place.go) keeps the free
	// ranges of the segments whose owner is shard, of shards; every shard
	// keeps all segments and their owners, which the router gives (the
	// segments before the trace take turns: turn is the next one's). A
	// segment holds its owner's number, not a count to take modulo
	// shards: the router reads it for every block event, and a division
	// per event in the shards' owns took over a quarter of their CPU time
	// in a 16-core profile.
	shard, shards int
	turn          int
	ownerOf       map[ownerKey]int32 // the owners of expandable ranges (newOwner)
	// pageSeg caches find: slot p%len holds 1 + the index in segs of the
	// segment last found in 2 MiB page p (0: none). Consecutive events
	// alternate between the small and large pools' segments, so the
	// last-hit cache it replaces hit 40% of the time (on the bench seed)
	// and mispredicted; this one misses only on a page's first lookup after
	// a segment event, or where segments share a page or a slot. Seed
	// replay: 1.90 M -> 1.50 M branch mispredicts (callgrind --branch-sim),
	// min wall 21 -> 19 ms.
	pageSeg [1024]int32
	// noDense says no small segment it owns is kept in arrays from now on
	// (segment.dense, undenseAll in dense.go). sizes holds the sizes of the
	// blocks placed in the segments kept in the maps, the placer's
	// (place.go).
	noDense bool
	sizes   *addrMap[uint64]
}

// newLayout returns the layout of segs, whose owners are of shards
// (split then makes their layouts).
func newLayout(segs segmentSet, maxSplit uint64, shards int) *layout {
	l := &layout{
		segs:     segs,
		freeFrom: newAddrMap[uint64](),
		freeTo:   newAddrMap[uint64](),
		maxSplit: maxSplit,
		shards:   shards,
		ownerOf:  map[ownerKey]int32{},
	}
	for i := range l.segs {
		l.segs[i].owner = l.nextOwner(l.segs[i].segmentInfo)
	}
	return l
}

// ownerKey is what expandable ranges that may merge share.
type ownerKey struct {
	pool   snapshot.PoolID
	stream snapshot.StreamID
}

// nextOwner is the owner of a segment of info before the trace: the next
// shard in turn, or for an expandable range that of its pool and stream,
// since such ranges merge.
func (l *layout) nextOwner(info segmentInfo) int32 {
	return l.newOwner(info, func() int32 {
		l.turn++
		return int32((l.turn - 1) % l.shards)
	})
}

// newOwner is the owner of a new segment of info: that of the expandable
// ranges of its pool and stream if it is one and they have one, else
// next's.
func (l *layout) newOwner(info segmentInfo, next func() int32) int32 {
	if !info.expandable {
		return next()
	}
	k := ownerKey{info.pool, info.stream}
	o, ok := l.ownerOf[k]
	if !ok {
		o = next()
		l.ownerOf[k] = o
	}
	return o
}

// split returns the layouts of the shards of l, which has not run yet:
// each with all its segments, the free ranges of those it owns and its
// own cache. With one shard, l itself.
func (l *layout) split() []*layout {
	n := l.shards
	if n == 1 {
		return []*layout{l}
	}
	ls := make([]*layout, n)
	for k := range ls {
		ls[k] = l.clone(k)
	}
	for start, end := range l.freeFrom.all() {
		ls[l.ownerAt(start)].addFree(start, end)
	}
	return ls
}

// clone is a layout of l's segments for shard, without free ranges: split's
// shards, and with shard -1 one that owns no segment but follows them
// all (the router, place.go).
func (l *layout) clone(shard int) *layout {
	c := &layout{
		segs: slices.Clone(l.segs), freeFrom: newAddrMap[uint64](), freeTo: newAddrMap[uint64](),
		maxSplit: l.maxSplit, shard: shard, shards: l.shards, turn: l.turn, ownerOf: maps.Clone(l.ownerOf),
	}
	for i := range c.segs {
		c.segs[i].dense = nil // l's arrays are l's
	}
	return c
}

// ownerAt is the shard that owns address addr: that of its segment, or
// the first if none holds it. It reads no cache.
func (l *layout) ownerAt(addr uint64) int {
	if i := l.segs.find(addr); i >= 0 {
		return int(l.segs[i].owner)
	}
	return 0
}

// owns reports whether this shard keeps segment seg's free ranges (seg <
// 0, no segment: the first shard does).
func (l *layout) owns(seg int) bool {
	if seg < 0 {
		return l.shard == 0
	}
	return int(l.segs[seg].owner) == l.shard
}

func (l *layout) addFree(start, end uint64) {
	l.freeFrom.set(start, end)
	l.freeTo.set(end, start)
}

func (l *layout) dropFree(start, end uint64) {
	l.freeFrom.remove(start)
	l.freeTo.remove(end)
}

// freeContaining finds the free range holding [addr, addr+size) when it does
// not start at addr: of ranges that overlap (an inconsistent trace's), the
// one that starts first, whatever the map's order. It scans every free
// range: only reached on unmaps and on inconsistent traces, never per
// ordinary event.
func (l *layout) freeContaining(addr, size uint64) (start, end uint64, ok bool) {
	if end, ok := l.freeFrom.get(addr); ok && end >= addr+size {
		return addr, end, true
	}
	for s, e := range l.freeFrom.all() {
		if s <= addr && addr+size <= e && (!ok || s < start) {
			start, end, ok = s, e, true
		}
	}
	return start, end, ok
}

// take carves the block for an allocation of requested bytes at addr, in
// segment seg (find's; -1: none), out of the free range there. known, when
// non-zero, is the block size the final snapshot reports for this very
// allocation. It returns the block size, whether the layout agreed (a
// free range started at addr and held the block) and whether the block
// came out of a free range at all (carved).
func (l *layout) take(seg int, addr, requested, known uint64) (size uint64, ok, carved bool) {
	r := RoundSize(requested)
	if known != 0 {
		r = known
	}
	if seg < 0 {
		return r, false, false
	}
	if d := l.denseAt(seg); d != nil {
		if size, ok, carved, done := l.takeDense(d, seg, addr, r, known); done {
			return size, ok, carved
		}
		l.undense(seg)
	}
	// The free range is shrunk in place: its start is removed here, its end
	// keeps its key in freeTo.
	end, ok := l.freeFrom.remove(addr)
	start := addr
	if !ok {
		var found bool
		if start, end, found = l.freeContaining(addr, allocator.MinBlockSize); !found {
			return r, false, false
		}
		l.freeFrom.remove(start)
	}
	size = known
	if size == 0 {
		size = blockSize(end-addr, r, &l.segs[seg], l.maxSplit)
	}
	if addr+size > end {
		size, ok = end-addr, false
	}
	if s := &l.segs[seg]; !l.noDense && (start < s.addr || end > s.end()) {
		l.undenseAll() // a range out of its segment: the maps keep every one
	}
	if start < addr {
		l.addFree(start, addr)
	}
	if rest := addr + size; rest < end {
		l.addFree(rest, end)
	} else {
		l.freeTo.remove(end)
	}
	return size, ok, true
}

// find returns the index of the segment containing addr, or -1.
func (l *layout) find(addr uint64) int {
	slot := &l.pageSeg[(addr>>21)%uint64(len(l.pageSeg))]
	if i := int(*slot) - 1; i >= 0 && l.segs[i].addr <= addr && addr < l.segs[i].end() {
		return i
	}
	i := l.segs.find(addr)
	*slot = int32(i + 1)
	return i
}

// release returns [addr, addr+size), in segment seg (find's), to the free
// ranges, merging with free neighbours inside the same segment (never
// across: two cudaMalloc segments may be adjacent in address space).
func (l *layout) release(seg int, addr, size uint64) {
	start, end := addr, addr+size
	if seg < 0 {
		return
	}
	if d := l.denseAt(seg); d != nil {
		if l.releaseDense(d, addr, size) {
			return
		}
		l.undense(seg)
	}
	s := &l.segs[seg]
	if start > s.addr {
		if prev, ok := l.freeTo.remove(start); ok {
			start = prev // freeFrom[prev] is overwritten below
		}
	}
	if end < s.end() {
		if next, ok := l.freeFrom.remove(end); ok {
			end = next // freeTo[next] is overwritten below
		}
	}
	if !l.noDense && (start < s.addr || end > s.end()) {
		l.undenseAll() // a range out of its segment: the maps keep every one
	}
	l.addFree(start, end)
}

// dropSegment drops the free range that a segment event e releases in
// segment seg, which the layout owns, and says whether it found one and
// what it left free on either side.
func (l *layout) dropSegment(seg int, e snapshot.Event) (ok bool, left, right [2]uint64) {
	if d := l.denseAt(seg); d != nil {
		if d.addr == e.Addr && e.Size == allocator.SmallBuffer && d.wholeFree() {
			l.segs[seg].dense = nil // the maps would drop the range and keep nothing
			return true, left, right
		}
		l.undenseAll() // the maps would keep what else it holds
	}
	start, end, found := l.freeContaining(e.Addr, e.Size)
	if !found {
		if !l.noDense {
			l.undenseAll() // the maps may keep what the segment held
		}
		return false, left, right
	}
	l.dropFree(start, end)
	if start < e.Addr {
		l.addFree(start, e.Addr)
		left = [2]uint64{start, e.Addr}
	}
	if e.Addr+e.Size < end {
		l.addFree(e.Addr+e.Size, end)
		right = [2]uint64{e.Addr + e.Size, end}
	}
	return true, left, right
}

// within reports whether the free range r (none if empty) lies in one
// segment.
func (l *layout) within(r [2]uint64) bool {
	if r[0] == r[1] {
		return true
	}
	i := l.segs.find(r[0])
	return i >= 0 && r[1] <= l.segs[i].end()
}

// applySegment replays a segment event: new ranges are free, removed ranges
// must be free, and a new segment (not a range merged into one) goes to
// shard owner. The free ranges change in the shard that owns the
// segment: owned says whether that is this one. ok says whether the event
// matched the layout (where owned), and clash whether a new range
// overlaps a segment, which no caveat tells but which one shard's free
// ranges cannot follow.
func (l *layout) applySegment(e snapshot.Event, info segmentInfo, owner int32) (owned, ok, clash bool) {
	switch e.Action {
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
		clash = l.segs.overlaps(e.Addr, e.Size)
		if clash && !l.noDense {
			l.undenseAll()
		}
		n := len(l.segs)
		i := l.segs.add(e.Addr, e.Size, info, e.Action == snapshot.ActionSegmentMap)
		fresh := l.segs[i].addr == e.Addr && l.segs[i].size == e.Size
		if fresh {
			l.segs[i].owner = owner
		}
		clear(l.pageSeg[:]) // indices moved
		seg := l.find(e.Addr)
		if owned = l.owns(seg); owned {
			if fresh && !clash && len(l.segs) == n+1 {
				// i, not seg: a segment of no size holds no address, and
				// find gives -1 for it.
				l.densifyNew(i)
			}
			l.release(seg, e.Addr, e.Size)
		}
		return owned, true, clash
	case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		okFree := false
		var left, right [2]uint64
		if owned = l.owns(l.segs.find(e.Addr)); owned {
			okFree, left, right = l.dropSegment(l.segs.find(e.Addr), e)
		}
		clear(l.pageSeg[:]) // indices moved
		_, removed := l.segs.remove(e.Addr, e.Size)
		if !l.noDense && (!l.within(left) || !l.within(right)) {
			l.undenseAll()
		}
		return owned, removed && okFree, false
	}
	return true, true, false
}
