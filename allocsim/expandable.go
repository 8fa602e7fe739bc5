package allocsim

import (
	"cmp"
	"slices"

	"github.com/vramscope/vramscope/snapshot"
)

func (m *model) addUnmapped(b *block) {
	us := m.unmapped[b.seg.key]
	i, _ := slices.BinarySearchFunc(us, b.addr, func(u *block, a uint64) int { return cmp.Compare(u.addr, a) })
	m.unmapped[b.seg.key] = slices.Insert(us, i, b)
}

func (m *model) dropUnmapped(b *block) {
	us := m.unmapped[b.seg.key]
	if i := slices.Index(us, b); i >= 0 {
		m.unmapped[b.seg.key] = slices.Delete(us, i, i+1)
	}
}

// allocExpandable is try_allocate_expandable_block: find room in the
// stream's reservations (a new one when none has it), map the pages it
// needs, and take the merged free block.
func (m *model) allocExpandable(key poolKey, size uint64) (*block, failure) {
	c := m.findExpandable(key, size)
	if !c.mapped {
		if why := m.mapBlock(c, min(c.size, size)); why != fitted {
			return nil, why
		}
		c = m.lastMapped
	}
	for c.size < size {
		next := c.next
		if next == nil || next.mapped || !next.usable() {
			return nil, overCapacity // find_expandable_block promised room: a trace the model cannot follow
		}
		if why := m.mapBlock(next, min(size-c.size, next.size)); why != fitted {
			return nil, why
		}
		c = m.lastMapped
	}
	m.freeSet(key).remove(c)
	return c, fitted
}

// findExpandable is find_expandable_block: the lowest unmapped block of
// the stream (or the free block just before it) from which free and
// unmapped blocks in a row add up to size; else a new reservation.
func (m *model) findExpandable(key poolKey, size uint64) *block {
	room := func(b *block) bool {
		var n uint64
		for ; n < size && b.usable(); b = b.next {
			n += b.size
		}
		return n >= size
	}
	for _, u := range m.unmapped[key] {
		c := u
		if c.prev.usable() {
			c = c.prev
		}
		if room(c) {
			return c
		}
	}
	base := m.addrs.next(snapshot.ActionSegmentMap, m.total, len(m.events))
	seg := &segment{key: key, fs: m.freeSet(key), base: base, size: m.total, expandable: true}
	b := m.newBlock(block{addr: base, size: m.total, seg: seg})
	m.addUnmapped(b)
	return b
}

// mapBlock is map_block: map the pages covering the first n bytes of the
// unmapped block b; they become a free block merged with its free mapped
// neighbours (kept in m.lastMapped). Pages are created one by one, so a
// map that the device cannot hold fails whole.
func (m *model) mapBlock(b *block, n uint64) failure {
	page := m.s.PageSize(b.seg.key.pool)
	mapped := min((n+page-1)/page*page, b.size)
	if why := m.room(mapped); why != fitted {
		return why
	}
	m.dropUnmapped(b)
	if mapped < b.size {
		rest := m.newBlock(block{addr: b.addr + mapped, size: b.size - mapped, seg: b.seg, prev: b, next: b.next})
		if b.next != nil {
			b.next.prev = rest
		}
		b.next = rest
		b.size = mapped
		m.addUnmapped(rest)
	}
	b.mapped = true
	b.seg.mapped += mapped
	m.emit(snapshot.ActionSegmentMap, b.addr, mapped)
	b = m.merge(b, b.prev)
	b = m.merge(b, b.next)
	m.insertFree(b)
	m.lastMapped = b
	return fitted
}

// unmapBlock is unmap_block: unmap the whole pages inside the free block
// b; the margins stay mapped and free.
func (m *model) unmapBlock(b *block) {
	page := m.s.PageSize(b.seg.key.pool)
	lo := (b.addr - b.seg.base + page - 1) / page * page
	hi := (b.addr + b.size - b.seg.base) / page * page
	if lo >= hi {
		return
	}
	start, n := b.seg.base+lo, hi-lo
	b.seg.fs.remove(b)
	if before := start - b.addr; before > 0 {
		f := m.newBlock(block{addr: b.addr, size: before, seg: b.seg, prev: b.prev, next: b, mapped: true})
		if b.prev != nil {
			b.prev.next = f
		}
		b.prev = f
		m.insertFree(f)
	}
	if after := b.addr + b.size - (start + n); after > 0 {
		f := m.newBlock(block{addr: start + n, size: after, seg: b.seg, prev: b, next: b.next, mapped: true})
		if b.next != nil {
			b.next.prev = f
		}
		b.next = f
		m.insertFree(f)
	}
	b.addr, b.size, b.mapped = start, n, false
	b.seg.mapped -= n
	m.emit(snapshot.ActionSegmentUnmap, start, n)
	b = m.merge(b, b.prev)
	b = m.merge(b, b.next)
	m.addUnmapped(b)
}
