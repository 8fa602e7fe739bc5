package replay

import (
	"github.com/vramscope/vramscope/allocator"
)

// A small segment's free ranges and the sizes of the blocks placed in it
// are kept by the layout that owns it in arrays by 512-byte unit (dense),
// not in the address maps: on 16 cores the forward pass waited on the
// shard of the bench file's busiest segment, a 2 MiB one with 37% of the
// block events, where each event cost five or six map operations (a trace
// of every goroutine apart: 178 ms of a 207 ms pass, bench/RESULTS.md).
// A segment is kept so while every address and size its events bring is a
// whole number of units; the first that is not moves it back to the maps
// (undense), where the layout goes on as before. The arrays and the maps
// hold the keys of separate segments, as long as each map key lies in the
// segment it belongs to: the first free range that would reach out of its
// segment, or a segment that goes with more in it than one free range
// (entries the maps would keep after it), moves every segment back to the
// maps for the rest of the trace (undenseAll). Traces that the allocator
// wrote never do either; the layout of one that does (a free not recorded,
// a block freed twice) is the maps' alone, as before.

// denseUnits is how many units a dense segment has: a small-pool segment's
// 2 MiB.
const denseUnits = allocator.SmallBuffer >> allocator.MinBlockBits

// dense is one small segment's free ranges and placed blocks, in units
// from its start.
type dense struct {
	addr uint64
	// startEnd[u] is the unit where the free range that starts at u ends
	// (0: none starts there); endStart[u] is 1 + the unit where the free
	// range that ends at u starts (0: none ends there).
	startEnd [denseUnits]uint16
	endStart [denseUnits + 1]uint16
	// size[u] is the size in units of the block placed at u (0: none).
	size [denseUnits]uint16
}

// denseKept reports whether a segment is kept dense by its owner: a
// small-pool segment (2 MiB, not expandable) at a whole unit.
func denseKept(s *segment) bool {
	return keepDense && s.size == allocator.SmallBuffer && !s.expandable && s.addr%allocator.MinBlockSize == 0
}

// keepDense is a variable for TestDenseLayout to replay with the maps
// alone.
var keepDense = true

// unit is addr's unit in d, and whether addr is a whole unit inside d or
// at its end.
func (d *dense) unit(addr uint64) (int, bool) {
	off := addr - d.addr
	return int(off >> allocator.MinBlockBits), addr >= d.addr && off%allocator.MinBlockSize == 0 && off <= allocator.SmallBuffer
}

// unitsOf is size in units, and whether it is a whole number of them.
func unitsOf(size uint64) (int, bool) {
	return int(size >> allocator.MinBlockBits), size%allocator.MinBlockSize == 0 && size <= allocator.SmallBuffer
}

// denseAt is the dense store of segment seg, or nil.
func (l *layout) denseAt(seg int) *dense {
	if uint(seg) < uint(len(l.segs)) {
		return l.segs[seg].dense
	}
	return nil
}

// densifyAll keeps dense from now on every small segment the layout owns,
// moving their free ranges and blocks' sizes out of the maps: before the
// trace, once the shards have theirs. A block outside every segment, which
// a later segment may come to hold, keeps them all in the maps.
func (l *layout) densifyAll() {
	for addr := range l.sizes.all() {
		if l.segs.find(addr) < 0 {
			l.noDense = true
			return
		}
	}
	kept := false
	for i := range l.segs {
		if s := &l.segs[i]; denseKept(s) && l.owns(i) {
			s.dense, kept = &dense{addr: s.addr}, true
		}
	}
	if !kept {
		return
	}
	// Each map's keys move apart (a free range's end key belongs to the
	// segment the range ends in), so that the arrays hold what the maps did.
	l.moveIn(l.freeFrom, l.segs.find, func(d *dense, start, end uint64) bool {
		u, ok1 := d.unit(start)
		e, ok2 := d.unit(end)
		if !ok1 || !ok2 || u >= e {
			return false
		}
		d.startEnd[u] = uint16(e)
		return true
	})
	l.moveIn(l.freeTo, func(end uint64) int { return l.segs.find(end - 1) }, func(d *dense, end, start uint64) bool {
		e, ok1 := d.unit(end)
		u, ok2 := d.unit(start)
		if !ok1 || !ok2 || u >= e {
			return false
		}
		d.endStart[e] = uint16(u + 1)
		return true
	})
	l.moveIn(l.sizes, l.segs.find, func(d *dense, addr, size uint64) bool {
		u, ok1 := d.unit(addr)
		n, ok2 := unitsOf(size)
		if !ok1 || !ok2 || u == denseUnits || n == 0 {
			return false
		}
		d.size[u] = uint16(n)
		return true
	})
}

// moveIn moves the keys of m that lie in a dense segment (seg's) into its
// arrays (put); one that put refuses stays in m, and its segment goes back
// to the maps.
func (l *layout) moveIn(m *addrMap[uint64], seg func(uint64) int, put func(d *dense, k, v uint64) bool) {
	var keys []uint64
	for k := range m.all() {
		if l.denseAt(seg(k)) != nil {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		i := seg(k)
		v, _ := m.remove(k)
		if d := l.denseAt(i); d == nil || !put(d, k, v) {
			m.set(k, v)
			l.undense(i)
		}
	}
}

// densifyNew keeps dense the new segment seg, which holds no free range
// or block yet, if it is one that is kept so.
func (l *layout) densifyNew(seg int) {
	s := &l.segs[seg]
	if l.noDense || !denseKept(s) {
		return
	}
	s.dense = &dense{addr: s.addr}
}

// undense moves segment seg's free ranges and blocks' sizes back to the
// maps: an event of it that is not in whole units, or a segment event
// that changes it.
func (l *layout) undense(seg int) {
	d := l.denseAt(seg)
	if d == nil {
		return
	}
	at := func(u int) uint64 { return d.addr + uint64(u)<<allocator.MinBlockBits }
	for u, e := range d.startEnd {
		if e != 0 {
			l.freeFrom.set(at(u), at(int(e)))
		}
	}
	for e, u := range d.endStart {
		if u != 0 {
			l.freeTo.set(at(e), at(int(u)-1))
		}
	}
	for u, n := range d.size {
		if n != 0 {
			l.sizes.set(at(u), uint64(n)<<allocator.MinBlockBits)
		}
	}
	l.segs[seg].dense = nil
}

// undenseAll moves every segment back to the maps for good, and keeps any
// from being kept dense later: a free range or a block of the maps may be
// about to lie outside its segment, or be left where a segment was.
func (l *layout) undenseAll() {
	for i := range l.segs {
		l.undense(i)
	}
	l.noDense = true
}

// wholeFree reports whether d holds one free range, the whole segment, and
// no block: a segment the allocator releases.
func (d *dense) wholeFree() bool {
	for u, e := range d.startEnd {
		if e != 0 && (u != 0 || e != denseUnits) {
			return false
		}
	}
	for e, u := range d.endStart {
		if u != 0 && (e != denseUnits || u != 1) {
			return false
		}
	}
	for _, n := range d.size {
		if n != 0 {
			return false
		}
	}
	return d.startEnd[0] == denseUnits && d.endStart[denseUnits] == 1
}

// takeDense is take in a dense segment d, with the block's rounded size r;
// done is false, with nothing changed, where an address or a size is not
// a whole unit: take then moves the segment to the maps.
func (l *layout) takeDense(d *dense, seg int, addr, r, known uint64) (size uint64, ok, carved, done bool) {
	u, whole := d.unit(addr)
	if !whole || u == denseUnits {
		return 0, false, false, false
	}
	start, end := u, int(d.startEnd[u])
	ok = end != 0
	if !ok {
		// The free range holding addr, if any: freeContaining's, the one
		// that starts first.
		found := false
		for s := 0; s < u && !found; s++ {
			if e := int(d.startEnd[s]); e > u {
				start, end, found = s, e, true
			}
		}
		if !found {
			return r, false, false, true
		}
	}
	endAddr := d.addr + uint64(end)<<allocator.MinBlockBits
	size = known
	if size == 0 {
		size = blockSize(endAddr-addr, r, &l.segs[seg], l.maxSplit)
	}
	if addr+size > endAddr {
		size, ok = endAddr-addr, false
	}
	n, whole := unitsOf(size)
	if !whole {
		return 0, false, false, false
	}
	d.startEnd[start] = 0
	if start < u {
		d.startEnd[start], d.endStart[u] = uint16(u), uint16(start+1)
	}
	if rest := u + n; rest < end {
		d.startEnd[rest], d.endStart[end] = uint16(end), uint16(rest+1)
	} else {
		d.endStart[end] = 0
	}
	return size, ok, true, true
}

// releaseDense is release in a dense segment d; false, with nothing
// changed, where addr or size is not a whole unit, the range is empty (a
// block of unknown size) or it passes the segment's end.
func (l *layout) releaseDense(d *dense, addr, size uint64) bool {
	start, ok1 := d.unit(addr)
	n, ok2 := unitsOf(size)
	end := start + n
	if !ok1 || !ok2 || n == 0 || end > denseUnits {
		return false
	}
	if start > 0 {
		if prev := int(d.endStart[start]); prev != 0 {
			d.endStart[start] = 0
			start = prev - 1
		}
	}
	if end < denseUnits {
		if next := int(d.startEnd[end]); next != 0 {
			d.startEnd[end] = 0
			end = next
		}
	}
	d.startEnd[start], d.endStart[end] = uint16(end), uint16(start+1)
	return true
}

// blockAt is the size of the block placed at addr in segment seg.
func (l *layout) blockAt(seg int, addr uint64) (uint64, bool) {
	if d := l.denseAt(seg); d != nil {
		if u, ok := d.unit(addr); ok && u < denseUnits {
			n := d.size[u]
			return uint64(n) << allocator.MinBlockBits, n != 0
		}
		l.undense(seg)
	}
	return l.sizes.get(addr)
}

// setBlock notes a block of size bytes placed at addr in segment seg. One
// placed in no segment stays in the maps, where a later segment may come
// to hold it: no segment is kept dense from then on.
func (l *layout) setBlock(seg int, addr, size uint64) {
	if seg < 0 && !l.noDense {
		l.undenseAll()
	}
	if d := l.denseAt(seg); d != nil {
		u, ok := d.unit(addr)
		if n, whole := unitsOf(size); ok && whole && u < denseUnits && n > 0 {
			d.size[u] = uint16(n)
			return
		}
		l.undense(seg)
	}
	l.sizes.set(addr, size)
}

// removeBlock forgets the block placed at addr in segment seg and
// returns its size.
func (l *layout) removeBlock(seg int, addr uint64) (uint64, bool) {
	if d := l.denseAt(seg); d != nil {
		if u, ok := d.unit(addr); ok && u < denseUnits {
			n := d.size[u]
			d.size[u] = 0
			return uint64(n) << allocator.MinBlockBits, n != 0
		}
		l.undense(seg)
	}
	return l.sizes.remove(addr)
}
