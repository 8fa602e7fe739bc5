package replay

import (
	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/internal/hugepage"
	"github.com/vramscope/vramscope/snapshot"
)

// run is step 3: one forward pass over the events, on two goroutines that
// each do about half of the work. The placer (place) keeps the allocator's
// layout: which block each alloc takes, of what size and in which pool,
// and which allocation each free ends, and writes each alloc's record. The
// accountant (account, on this goroutine) ends the records and builds the
// usage series from what the placer found, a batch of events behind it. Per event each does a few
// map operations or record updates; neither allocates per event. On the
// 996 MB bench file (11.4 M events) the pass took 0.65 s on one core.
func (r *replayer) run() {
	t := r.t
	n := r.tr.Len()
	// Hundreds of MB of fresh output on the 996 MB bench file: on huge
	// pages (newSeries advises its own), replay took 0.60-0.67 s instead
	// of 0.82-0.90 s (page faults).
	t.allocated, t.active = newSeries(n, allocator.MinBlockBits), newSeries(n, allocator.MinBlockBits)
	t.waste = newSeries(n, 0)
	// The placer writes each traced alloc's record, the accountant its
	// free and end: records are kept in place, not appended.
	initial := len(t.allocs)
	allocs := make([]allocRecord, initial+r.counts[snapshot.ActionAlloc])
	hugepage.Advise(allocs)
	copy(allocs, t.allocs)
	t.allocs = allocs
	t.poolInitial = append([]Sample(nil), r.pools[1:]...)
	t.poolSteps = make([][]poolStep, len(t.Pools)-1)
	for m := range t.peaks {
		t.peaks[m] = Peak{Index: BeforeRecording, Bytes: t.Initial.get(Metric(m))}
	}

	empty := make(chan placedBatch, placedBatches)
	for range placedBatches {
		empty <- placedBatch{events: make([]snapshot.Event, placedBatchLen), words: make([]int64, placedBatchLen)}
	}
	full := make(chan placedBatch, placedBatches)
	go r.place(n, int32(initial), len(t.full), empty, full)
	r.account(int32(initial), full, empty)
}

// The placer hands the accountant batches of placedBatchLen events, at
// most placedBatches at a time (5 MiB in all). The length is a variable for
// tests to cross batch boundaries with few events.
var placedBatchLen = 1 << 14

const placedBatches = 8

// placedBatch is what the placer found for events start.. of one batch,
// with the events, which it unpacks for both (0.24 s of the accountant's
// 0.56 s on the 996 MB bench file went to unpacking them again):
// per event a word (placedAlloc's, or for a free freeWord's, -1 for none,
// or for a segment event its pool index), and the allocs
// whose word could not say everything.
type placedBatch struct {
	start  int
	events []snapshot.Event
	words  []int64
	rare   []rareAlloc
}

// rareAlloc is an alloc whose block size or pool index does not fit its
// word (which is then -1), with the allocation it ended, if its address
// was still active (-1: none).
type rareAlloc struct {
	index int
	size  uint64
	pool  int
	ended int32
}

// placedAlloc is an alloc's word: its block size and pool index, or -1 if
// they do not fit (the batch's rareAlloc has them).
func placedAlloc(size uint64, pool int) int64 {
	if size >= 1<<47 || pool >= 1<<16 {
		return -1
	}
	return int64(size)<<16 | int64(pool)
}

// place is the placer: it replays the events on the layout and the map of
// active blocks, writes the allocations' records, and sends what it found
// in batches. Allocation k is the k-th record: the next traced alloc gets
// index next; the next full record's Allocation, t.full[nextFull].
func (r *replayer) place(n int, next int32, nextFull int, empty <-chan placedBatch, full chan<- placedBatch) {
	defer close(full)
	nextSeg, nextKnown := 0, 0
	for start := 0; start < n; start += placedBatchLen {
		b := <-empty
		b.start, b.rare = start, b.rare[:0]
		b.events = r.tr.Events(b.events[:cap(b.events)], start)
		b.words = b.words[:len(b.events)]
		for j, e := range b.events {
			i := start + j
			var w int64
			switch e.Action {
			case snapshot.ActionAlloc:
				var known uint64
				if nextKnown < len(r.known) && int(r.known[nextKnown].index) == i {
					known = r.known[nextKnown].size
					nextKnown++
				}
				w = r.placeAlloc(i, e, known, next, &nextFull, &b)
				next++
			case snapshot.ActionFreeRequested:
				w = r.placeFree(i, e, !r.hasCompleted)
			case snapshot.ActionFreeCompleted:
				w = r.placeFree(i, e, true)
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
				w = int64(r.placeSegment(i, e, r.t.segInfos[nextSeg]))
				nextSeg++
			}
			b.words[j] = w
		}
		full <- b
	}
}

// placeAlloc places alloc i, allocation k, and writes its record; known
// is the block size from the final snapshot, or 0. It returns the event's
// word.
func (r *replayer) placeAlloc(i int, e snapshot.Event, known uint64, k int32, nextFull *int, b *placedBatch) int64 {
	ended := int32(-1)
	if old, ok := r.blocks.get(e.Addr); ok {
		// The address is still active: its free was not recorded.
		r.caveats.add(LayoutConflict, i, 0)
		ended = old.ref.index()
		r.layout.release(e.Addr, r.blockSize(old.ref))
	}
	size, seg, ok := r.layout.take(e.Addr, e.Size, known)
	switch {
	case seg < 0:
		r.caveats.add(UnknownAddress, i, size)
	case !ok:
		r.caveats.add(LayoutConflict, i, size)
	}
	pool := 0
	if seg >= 0 {
		pool = r.poolIndex(r.layout.segs[seg].pool)
	}
	r.blocks.set(e.Addr, activeBlock{r.newBlockRef(k, size), e.Size})
	rec := newRecord(&Allocation{Size: size, Start: int32(i), Free: LiveAtEnd, End: LiveAtEnd, Origin: Traced}, pool, *nextFull)
	if rec.full() {
		*nextFull++
	}
	r.t.allocs[k] = rec
	w := placedAlloc(size, pool)
	if w < 0 || ended >= 0 {
		w = -1
		b.rare = append(b.rare, rareAlloc{index: i, size: size, pool: pool, ended: ended})
	}
	return w
}

// placeFree places a free_requested (ends: false unless the trace records
// no free_completed) or a free_completed (ends: true): the one that ends
// the block gives its range back to the layout. It returns freeWord's word
// of the allocation freed, or -1 if no block was active at the address.
func (r *replayer) placeFree(i int, e snapshot.Event, ends bool) int64 {
	var b activeBlock
	var ok bool
	if ends {
		if b, ok = r.blocks.remove(e.Addr); ok {
			r.layout.release(e.Addr, r.blockSize(b.ref))
		}
	} else {
		b, ok = r.blocks.get(e.Addr)
	}
	if !ok {
		r.caveats.add(LayoutConflict, i, 0)
		return -1
	}
	return freeWord(b.ref.index(), b.requested)
}

// A free's word holds the allocation it frees and that allocation's
// requested size, which the accountant would otherwise read from the
// alloc event, far back in the trace: a cache miss and an unpacking per
// free (0.16 s of the accountant's 0.56 s on the 996 MB bench file). A
// size from 2^31 - 1 bytes up is left for it to read (requestedUnknown).
const requestedUnknown = 1<<31 - 1

func freeWord(k int32, requested uint64) int64 {
	return int64(min(requested, requestedUnknown))<<32 | int64(k)
}

// freed is the allocation and the requested size (or requestedUnknown)
// in a free's word.
func freed(w int64) (k int32, requested uint64) { return int32(w), uint64(w >> 32) }

// placeSegment places a segment event with the info of the range it
// creates (for releases, the segment's own info is used), and returns the
// pool index.
func (r *replayer) placeSegment(i int, e snapshot.Event, info segmentInfo) int {
	if e.Action == snapshot.ActionSegmentFree || e.Action == snapshot.ActionSegmentUnmap {
		if s := r.layout.find(e.Addr); s >= 0 {
			info = r.layout.segs[s].segmentInfo
		}
		if _, ok := r.traced.remove(e.Addr, e.Size); !ok {
			r.caveats.add(SegmentsBeforeRecording, i, e.Size)
		}
	} else {
		r.traced.add(e.Addr, e.Size, info, e.Action == snapshot.ActionSegmentMap)
	}
	if !r.layout.applySegment(e, info) {
		r.caveats.add(LayoutConflict, i, e.Size)
	}
	return r.poolIndex(info.pool)
}

// account is the accountant: it turns the placer's batches into the
// records' ends, the usage series, the pool steps and the peaks, and hands
// each batch's words back to be refilled. The next traced alloc is
// allocation next, whose record the placer wrote.
func (r *replayer) account(next int32, full <-chan placedBatch, empty chan<- placedBatch) {
	t := r.t
	cur := t.Initial
	n := t.Len()
	for b := range full {
		rare := b.rare
		for j, w := range b.words {
			i := b.start + j
			e := &b.events[j]
			var d Sample
			pool := -1
			switch e.Action {
			case snapshot.ActionAlloc:
				size, p := uint64(w>>16), int(w&(1<<16-1))
				if w < 0 {
					ra := &rare[0]
					rare = rare[1:]
					if ra.ended >= 0 {
						r.endRecord(ra.ended, i, t.requested(&t.allocs[ra.ended]), &d)
					}
					size, p = ra.size, ra.pool
				}
				pool = p
				if t.allocs[next].full() {
					t.full = append(t.full, Allocation{
						Addr: e.Addr, Size: size, Requested: e.Size, Pool: t.Pools[pool],
						Start: int32(i), Free: LiveAtEnd, End: LiveAtEnd,
						Stack: e.Stack, Stream: e.Stream, Origin: Traced,
					})
				}
				next++
				d.Allocated += int64(size)
				d.Requested += int64(e.Size)
				d.Active += int64(size)
			case snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
				if w < 0 {
					break
				}
				k, requested := freed(w)
				rec := &t.allocs[k]
				if requested == requestedUnknown {
					requested = t.requested(rec)
				}
				if e.Action == snapshot.ActionFreeCompleted || !r.hasCompleted {
					r.endRecord(k, i, requested, &d)
				} else {
					t.markFreed(rec, i, requested, &d)
				}
				pool = r.recordPool(rec)
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
				d.Reserved += int64(e.Size)
				pool = int(w)
			case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
				d.Reserved -= int64(e.Size)
				pool = int(w)
			}
			if pool >= 0 {
				cur.add(d)
				// The default pool is not followed: it is the total minus the
				// private pools.
				if pool > 0 && d != (Sample{}) {
					r.pools[pool].add(d)
					t.poolSteps[pool-1] = append(t.poolSteps[pool-1], poolStep{index: i, Sample: r.pools[pool]})
				}
				if d.Reserved != 0 {
					t.reserved = append(t.reserved, reservedStep{index: int32(i), bytes: cur.Reserved})
				}
				// Only an event that raises a series can make it peak.
				if d.Allocated > 0 || d.Requested > 0 || d.Active > 0 || d.Reserved > 0 {
					for m := range t.peaks {
						if v := cur.get(Metric(m)); v > t.peaks[m].Bytes {
							t.peaks[m] = Peak{Index: i, TimeUS: e.TimeUS, Bytes: v}
						}
					}
				}
			}
			// put, inlined, takes the values of real traces; set, out of line,
			// any value.
			if !t.allocated.put(i, cur.Allocated) || !t.waste.put(i, cur.Allocated-cur.Requested) || !t.active.put(i, cur.Active) {
				t.allocated.set(i, cur.Allocated)
				t.waste.set(i, cur.Allocated-cur.Requested)
				t.active.set(i, cur.Active)
			}
			if endsBlock(i, n) {
				t.allocated.seal(i)
				t.waste.seal(i)
				t.active.seal(i)
			}
		}
		empty <- b
	}
}

// endRecord ends allocation k, whose requested size is requested, at event
// i: freed if not yet, and no longer active.
func (r *replayer) endRecord(k int32, i int, requested uint64, d *Sample) {
	rec := &r.t.allocs[k]
	r.t.markFreed(rec, i, requested, d)
	rec.end = int32(i)
	d.Active -= int64(r.t.size(rec))
}

// markFreed marks r, whose requested size is requested, freed at event i,
// unless it already was, and takes it out of the allocated and requested
// bytes.
func (t *Timeline) markFreed(r *allocRecord, i int, requested uint64, d *Sample) {
	if r.free == LiveAtEnd {
		r.free = int32(i)
		d.Allocated -= int64(t.size(r))
		d.Requested -= int64(requested)
	}
}

// recordPool is rec's pool index.
func (r *replayer) recordPool(rec *allocRecord) int {
	if rec.full() {
		return r.poolIndex(r.t.full[rec.fullIndex()].Pool)
	}
	return rec.pool()
}

// activeBlock is what the placer keeps of an active block: its ref and
// its requested size.
type activeBlock struct {
	ref       blockRef
	requested uint64
}

// blockRef is the allocation of an active block and its size: its allocation's
// index and its size in 512-byte units, or refWide if the size is not a
// whole number of units below 2 TiB (replayer.wideSizes has it then).
type blockRef uint64

const refWide = 1<<32 - 1

func (b blockRef) index() int32 { return int32(b >> 32) }

// newBlockRef returns the ref of allocation k, of size bytes.
func (r *replayer) newBlockRef(k int32, size uint64) blockRef {
	units := size >> allocator.MinBlockBits
	if units<<allocator.MinBlockBits != size || units >= refWide {
		if r.wideSizes == nil {
			r.wideSizes = map[int32]uint64{}
		}
		r.wideSizes[k] = size
		units = refWide
	}
	return blockRef(uint64(uint32(k))<<32 | units)
}

// blockSize is the size of the block b refers to.
func (r *replayer) blockSize(b blockRef) uint64 {
	if units := uint64(b & refWide); units != refWide {
		return units << allocator.MinBlockBits
	}
	return r.wideSizes[b.index()]
}

// compareFinal checks the replayed end state against the final snapshot,
// block by block and in reserved bytes.
func (r *replayer) compareFinal() {
	diff, matched := 0, 0
	for _, fb := range r.finalBlocks {
		b, ok := r.blocks.get(fb.addr)
		if !ok {
			diff++
			continue
		}
		matched++
		a := r.t.Allocation(int(b.ref.index()))
		pending := a.Free != LiveAtEnd
		if a.Size != fb.size || a.Requested != fb.requested || pending != (fb.state == snapshot.ActivePendingFree) {
			diff++
		}
	}
	diff += r.blocks.len() - matched // live in the replay only
	if r.layout.segs.total() != r.finalSegs.total() || len(r.layout.segs) != len(r.finalSegs) {
		diff++
	}
	if diff > 0 {
		r.caveats[FinalMismatch].Count = diff
		r.caveats[FinalMismatch].Index = BeforeRecording
	}
}
