package allocsim

import (
	"cmp"
	"slices"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/snapshot"
)

// deviceEvent is a call the model makes to CUDA, as the trace records it:
// segment_alloc, segment_free, segment_map or segment_unmap.
type deviceEvent struct {
	Action snapshot.Action
	Addr   uint64
	Size   uint64
	At     int // the trace event being replayed when it happened
}

// addresser gives new segments and reservations their base address: the
// recorded one in a validation (so that ties between equal free blocks,
// broken by address, go as they went), or a fresh one.
type addresser interface {
	next(a snapshot.Action, size uint64, emitted int) uint64
}

// model is one device's caching allocator (DeviceCachingAllocator).
type model struct {
	s        allocator.Settings
	limit    uint64 // allowed_memory_maximum; 0: none
	capacity uint64 // device memory the process can get; 0: unbounded
	total    uint64 // reservation size of an expandable segment (1.125 x device memory)
	gc       bool   // garbage_collection_threshold acts (needs a fraction below 1)
	addrs    addresser
	streamOf func(snapshot.StreamID) int64

	free     []poolSet            // a few: two pools per stream
	unmapped map[poolKey][]*block // address order
	gcCount  [2]uint64            // get_free_block calls per pool kind while GC acts
	pending  map[*block]struct{}

	reserved, allocated uint64
	stats               Stats
	at                  int // trace event being replayed
	events              []deviceEvent
	lastMapped          *block // the free block mapBlock left
	// spare are blocks that a merge absorbed, for newBlock to reuse: a
	// split and a merge per allocation would otherwise make a garbage
	// block per request of the trace.
	spare []*block
}

// newBlock is a block holding v, reusing a spare one when there is one.
func (m *model) newBlock(v block) *block {
	if n := len(m.spare); n > 0 {
		b := m.spare[n-1]
		m.spare = m.spare[:n-1]
		*b = v
		return b
	}
	b := new(block)
	*b = v
	return b
}

func newModel(s allocator.Settings, cfg Config, streamOf func(snapshot.StreamID) int64, addrs addresser) *model {
	m := &model{s: s, limit: cfg.Limit, capacity: cfg.Capacity, addrs: addrs, streamOf: streamOf,
		unmapped: map[poolKey][]*block{}, pending: map[*block]struct{}{}}
	m.total = 1 << 40
	if cfg.DeviceMemory > 0 {
		m.total = cfg.DeviceMemory / 8 * 9
	}
	m.gc = s.GCThreshold > 0 && m.limit > 0
	return m
}

func (m *model) freeSet(k poolKey) *freeSet {
	for _, p := range m.free {
		if p.key == k {
			return p.fs
		}
	}
	fs := &freeSet{}
	m.free = append(m.free, poolSet{k, fs})
	return fs
}

func (m *model) insertFree(b *block) {
	b.gcBase = m.gcCount[b.seg.key.pool]
	b.seg.fs.insert(b)
}

func (m *model) emit(a snapshot.Action, addr, size uint64) {
	m.events = append(m.events, deviceEvent{Action: a, Addr: addr, Size: size, At: m.at})
	switch a {
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
		m.reserved += size
		m.stats.DeviceAllocs++
		if m.reserved > m.stats.MaxReserved {
			m.stats.MaxReserved = m.reserved
			m.stats.AllocatedAtPeak = m.allocated
		}
	default:
		m.reserved -= size
		m.stats.DeviceFrees++
	}
	m.stats.Reserved = append(m.stats.Reserved, Point{Event: m.at, Bytes: m.reserved})
}

// malloc serves a request of n bytes on stream as DeviceCachingAllocator::malloc
// does; nil means out of memory (after every release and retry).
func (m *model) malloc(n uint64, stream snapshot.StreamID) (*block, failure) {
	size := m.s.Round(n)
	key := poolKey{stream, allocator.PoolOf(size)}
	allocSize := m.s.SegmentSize(size)
	b := m.bestFit(key, size)
	var why failure
	if b == nil {
		if m.gc {
			m.collect()
		}
		b, why = m.allocBlock(key, size, allocSize)
		if b == nil && m.s.MaxSplit != allocator.Unlimited && m.releaseOversize(key, size) {
			b, why = m.allocBlock(key, size, allocSize)
		}
		if b == nil {
			m.releaseCached()
			m.stats.Retries++
			b, why = m.allocBlock(key, size, allocSize)
		}
		if b == nil {
			return nil, why
		}
	}
	if allocator.ShouldSplit(key.pool, m.s.Expandable, size, b.size, m.s.MaxSplit) {
		rest := m.newBlock(block{addr: b.addr + size, size: b.size - size, seg: b.seg, prev: b, next: b.next, mapped: true})
		if b.next != nil {
			b.next.prev = rest
		}
		b.next = rest
		b.size = size
		m.insertFree(rest)
	}
	b.allocated, b.requested = true, n
	m.allocated += b.size
	m.stats.MaxAllocated = max(m.stats.MaxAllocated, m.allocated)
	return b, 0
}

// bestFit is get_free_block: the smallest free block of the stream's pool
// that fits, with the expandable-size preference and the oversize rules.
func (m *model) bestFit(key poolKey, size uint64) *block {
	if m.gc {
		m.gcCount[key.pool]++
	}
	fs := m.freeSet(key)
	i := fs.lowerBound(size)
	if i == len(*fs) {
		return nil
	}
	if (*fs)[i].seg.expandable && m.s.Expandable {
		grow := func(b *block) uint64 {
			if b.next != nil && !b.next.mapped {
				return b.size + b.next.size
			}
			return b.size
		}
		for i+1 < len(*fs) && (*fs)[i].seg.expandable && grow((*fs)[i+1]) < grow((*fs)[i]) {
			i++
		}
	}
	b := (*fs)[i]
	if size < m.s.MaxSplit && b.size >= m.s.MaxSplit {
		return nil
	}
	if size >= m.s.MaxSplit && b.size >= size+m.s.MaxNonSplitRounding {
		return nil
	}
	*fs = slices.Delete(*fs, i, i+1)
	return b
}

// failure says why a device allocation failed.
type failure uint8

const (
	fitted       failure = iota
	overLimit            // the per-process memory fraction
	overCapacity         // the device's memory
)

// room checks an allocation of n more bytes against the limit and the device.
func (m *model) room(n uint64) failure {
	switch {
	case m.limit > 0 && m.reserved+n > m.limit:
		return overLimit
	case m.capacity > 0 && m.reserved+n > m.capacity:
		return overCapacity
	}
	return fitted
}

// allocBlock is alloc_block: new device memory for a rounded request, a
// cudaMalloc of allocSize or pages mapped in an expandable reservation.
func (m *model) allocBlock(key poolKey, size, allocSize uint64) (*block, failure) {
	if m.limit > 0 && m.reserved+allocSize > m.limit {
		return nil, overLimit
	}
	if m.s.Expandable {
		return m.allocExpandable(key, size)
	}
	if why := m.room(allocSize); why != fitted {
		return nil, why
	}
	addr := m.addrs.next(snapshot.ActionSegmentAlloc, allocSize, len(m.events))
	seg := &segment{key: key, fs: m.freeSet(key), base: addr, size: allocSize}
	m.emit(snapshot.ActionSegmentAlloc, addr, allocSize)
	return m.newBlock(block{addr: addr, size: allocSize, seg: seg, mapped: true}), fitted
}

// releaseBlock is release_block: cudaFree of a whole free segment.
func (m *model) releaseBlock(b *block) {
	b.seg.fs.remove(b)
	m.emit(snapshot.ActionSegmentFree, b.addr, b.size)
}

// freeBlock is free_block: the block goes back to its pool, merged with
// its free neighbours.
func (m *model) freeBlock(b *block) {
	b.allocated, b.pending = false, false
	delete(m.pending, b)
	b = m.merge(b, b.prev)
	b = m.merge(b, b.next)
	m.insertFree(b)
}

// merge is try_merge_blocks: src joins dst when it is free, not pending and
// mapped alike; dst keeps the lower address.
func (m *model) merge(dst, src *block) *block {
	if src == nil || src.allocated || src.pending || src.mapped != dst.mapped {
		return dst
	}
	if src.mapped {
		src.seg.fs.remove(src)
	} else {
		m.dropUnmapped(src)
	}
	if dst.prev == src {
		dst.addr = src.addr
		dst.prev = src.prev
		if dst.prev != nil {
			dst.prev.next = dst
		}
	} else {
		dst.next = src.next
		if dst.next != nil {
			dst.next.prev = dst
		}
	}
	dst.size += src.size
	if !src.waited {
		*src = block{}
		m.spare = append(m.spare, src)
	}
	return dst
}

// release frees the caller's block: at once, or when its pending
// record_stream events complete (complete).
func (m *model) release(b *block, deferred bool) {
	m.allocated -= b.size
	if deferred {
		b.allocated, b.pending, b.waited = false, true, true
		m.pending[b] = struct{}{}
		return
	}
	m.freeBlock(b)
}

// syncEvents is synchronize_and_free_events: every pending free completes.
func (m *model) syncEvents() {
	bs := make([]*block, 0, len(m.pending))
	for b := range m.pending {
		bs = append(bs, b)
	}
	slices.SortFunc(bs, func(a, b *block) int { return cmp.Compare(a.addr, b.addr) })
	for _, b := range bs {
		m.freeBlock(b)
	}
}

// releaseOversize is release_available_cached_blocks (max_split_size set):
// the smallest whole cached block of the stream at least max(size,
// max_split_size) large, or else the largest ones down to max_split_size
// until enough is released.
func (m *model) releaseOversize(key poolKey, size uint64) bool {
	want := max(size, m.s.MaxSplit)
	fs := m.freeSet(key)
	if i := fs.lowerBound(want); i < len(*fs) && !(*fs)[i].seg.expandable {
		if b := (*fs)[i]; !b.split() {
			m.releaseBlock(b)
			return true
		}
	}
	var released uint64
	for i := len(*fs) - 1; i >= 0 && released < want; i-- {
		b := (*fs)[i]
		if b.size < m.s.MaxSplit {
			break
		}
		if !b.seg.expandable && !b.split() {
			released += b.size
			m.releaseBlock(b)
		}
	}
	return released >= want
}

// releaseCached is release_cached_blocks, the body of empty_cache(): sync
// every pending free, then free each whole cached segment and unmap the
// whole pages of every free expandable block, large pool first, each in
// the pool's order (stream, size, address).
func (m *model) releaseCached() {
	m.syncEvents()
	for _, pool := range []allocator.Pool{allocator.Large, allocator.Small} {
		var bs []*block
		for _, p := range m.free {
			if p.key.pool == pool {
				bs = append(bs, *p.fs...)
			}
		}
		slices.SortFunc(bs, func(a, b *block) int {
			return cmp.Or(cmp.Compare(m.streamOf(a.seg.key.stream), m.streamOf(b.seg.key.stream)), less(a, b))
		})
		var unmap []*block
		for _, b := range bs {
			switch {
			case b.seg.expandable:
				unmap = append(unmap, b)
			case !b.split():
				m.releaseBlock(b)
			}
		}
		for _, b := range unmap {
			m.unmapBlock(b)
		}
	}
}

// collect is garbage_collect_cached_blocks: above threshold x limit,
// free the whole cached large segments at least as old as the average,
// pass after pass, until the excess is reclaimed or nothing was freed.
func (m *model) collect() {
	threshold := uint64(m.s.GCThreshold * float64(m.limit))
	if m.reserved <= threshold {
		return
	}
	target := m.reserved - threshold
	age := func(b *block) uint64 { return m.gcCount[allocator.Large] - b.gcBase }
	candidate := func(b *block) bool { return !b.split() && !b.seg.expandable }
	var bs []*block
	for _, p := range m.free {
		if p.key.pool == allocator.Large {
			bs = append(bs, *p.fs...)
		}
	}
	slices.SortFunc(bs, func(a, b *block) int {
		return cmp.Or(cmp.Compare(m.streamOf(a.seg.key.stream), m.streamOf(b.seg.key.stream)), less(a, b))
	})
	var totalAge, n uint64
	for _, b := range bs {
		if candidate(b) {
			totalAge += age(b)
			n++
		}
	}
	var reclaimed uint64
	for freed := true; freed && n > 0 && reclaimed < target; {
		avg := float64(totalAge) / float64(n)
		freed = false
		kept := bs[:0]
		for _, b := range bs {
			if candidate(b) && float64(age(b)) >= avg {
				freed = true
				reclaimed += b.size
				totalAge -= age(b)
				n--
				m.releaseBlock(b)
				continue
			}
			kept = append(kept, b)
		}
		bs = kept
	}
}
