package replay

import (
	"github.com/vramscope/vramscope/allocator"
	"slices"

	"github.com/vramscope/vramscope/snapshot"
)

// segmentInfo is what a segment carries besides its range. Trace events do
// not say it (segment_alloc has no pool, no type): it comes from the final
// snapshot's segments, carried backwards to the event that created them.
type segmentInfo struct {
	pool       snapshot.PoolID
	stream     snapshot.StreamID
	typ        snapshot.SegmentType
	expandable bool
	stack      snapshot.StackID
}

// segment is one reserved range: a cudaMalloc, or one contiguous mapped range
// of an expandable segment.
type segment struct {
	addr, size uint64
	segmentInfo
	owner int32 // which shard of the forward pass keeps its free ranges (layout.nextOwner)
	// dense, in the layout that owns the segment, holds its free ranges
	// and blocks in arrays (dense.go); nil: the maps do.
	dense *dense
}

func (s *segment) end() uint64 { return s.addr + s.size }

// segmentSet is one device's segments in address order. Segment events are
// rare next to block events, so a sorted slice with binary search is both
// the simplest and the fastest choice.
type segmentSet []segment

// find returns the index of the segment containing addr, or -1. layout.find
// caches it per block event; the plain loop (no closure call per step, as
// in BinarySearchFunc) matters for the cache's misses and for State.
func (ss segmentSet) find(addr uint64) int {
	if len(ss) == 0 {
		return -1
	}
	i, n := 0, len(ss) // ss[i].addr <= addr, if any segment's is
	for n > 1 {
		half := n / 2
		if ss[i+half].addr <= addr {
			i += half
		}
		n -= half
	}
	if ss[i].addr <= addr && addr < ss[i].end() {
		return i
	}
	return -1
}

// insertAt returns where a segment starting at addr belongs.
func (ss segmentSet) insertAt(addr uint64) int {
	i, _ := slices.BinarySearchFunc(ss, addr, func(s segment, a uint64) int {
		if s.addr < a {
			return -1
		}
		if s.addr > a {
			return 1
		}
		return 0
	})
	return i
}

// add reserves [addr, addr+size). With merge (expandable mappings) the range
// joins the segments that end at addr or start at addr+size when they belong
// to the same stream and pool, as the snapshot reports one segment per
// contiguous mapped range. It returns the index of the resulting segment.
func (ss *segmentSet) add(addr, size uint64, info segmentInfo, merge bool) int {
	s := *ss
	i := s.insertAt(addr)
	joins := func(o *segment) bool {
		return merge && o.expandable && o.stream == info.stream && o.pool == info.pool
	}
	prev := i > 0 && s[i-1].end() == addr && joins(&s[i-1])
	next := i < len(s) && s[i].addr == addr+size && joins(&s[i])
	switch {
	case prev && next:
		s[i-1].size += size + s[i].size
		*ss = slices.Delete(s, i, i+1)
		return i - 1
	case prev:
		s[i-1].size += size
		return i - 1
	case next:
		s[i].addr, s[i].size = addr, s[i].size+size
		return i
	}
	*ss = slices.Insert(s, i, segment{addr: addr, size: size, segmentInfo: info})
	return i
}

// overlaps reports whether [addr, addr+size) overlaps a segment.
func (ss segmentSet) overlaps(addr, size uint64) bool {
	i := ss.insertAt(addr)
	return i > 0 && ss[i-1].end() > addr || i < len(ss) && ss[i].addr < addr+size
}

// remove releases [addr, addr+size), which must lie inside one segment: the
// segment shrinks, disappears, or (an unmap in the middle of a mapped range)
// splits in two. It returns the affected segment's info and false when no
// segment contains the range.
func (ss *segmentSet) remove(addr, size uint64) (segmentInfo, bool) {
	s := *ss
	i := s.find(addr)
	if i < 0 || addr+size > s[i].end() {
		return segmentInfo{}, false
	}
	seg := s[i]
	var keep []segment
	if seg.addr < addr {
		keep = append(keep, segment{addr: seg.addr, size: addr - seg.addr, segmentInfo: seg.segmentInfo, owner: seg.owner})
	}
	if end := addr + size; end < seg.end() {
		keep = append(keep, segment{addr: end, size: seg.end() - end, segmentInfo: seg.segmentInfo, owner: seg.owner})
	}
	*ss = slices.Replace(s, i, i+1, keep...)
	return seg.segmentInfo, true
}

// infoNear returns the info of a segment adjacent to [addr, addr+size) on
// stream, for re-adding an unmapped range while undoing the trace.
func (ss segmentSet) infoNear(addr, size uint64, stream snapshot.StreamID) (segmentInfo, bool) {
	i := ss.insertAt(addr)
	if i > 0 && ss[i-1].end() == addr && ss[i-1].expandable && ss[i-1].stream == stream {
		return ss[i-1].segmentInfo, true
	}
	if i < len(ss) && ss[i].addr == addr+size && ss[i].expandable && ss[i].stream == stream {
		return ss[i].segmentInfo, true
	}
	return segmentInfo{}, false
}

// apply replays segment event e forward, with info for the events that
// create a range. It reports whether the event matched the set.
func (ss *segmentSet) apply(e snapshot.Event, info segmentInfo) bool {
	switch e.Action {
	case snapshot.ActionSegmentAlloc:
		ss.add(e.Addr, e.Size, info, false)
	case snapshot.ActionSegmentMap:
		ss.add(e.Addr, e.Size, info, true)
	case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		_, ok := ss.remove(e.Addr, e.Size)
		return ok
	}
	return true
}

func (ss segmentSet) total() uint64 {
	var n uint64
	for i := range ss {
		n += ss[i].size
	}
	return n
}

// guessSegmentInfo describes a range whose segment is not in the final
// snapshot: only the event's stream and size are known. 2 MiB is the small
// pool's segment (and page) size; large segments are never that small
// unless mapped.
func guessSegmentInfo(e snapshot.Event) segmentInfo {
	info := segmentInfo{
		stream:     e.Stream,
		expandable: e.Action == snapshot.ActionSegmentMap || e.Action == snapshot.ActionSegmentUnmap,
		stack:      e.Stack,
	}
	if e.Size == allocator.SmallBuffer {
		info.typ = snapshot.Small
	}
	return info
}
