package replay

import (
	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/internal/hugepage"
	"github.com/vramscope/vramscope/snapshot"
)

// run is step 3: one forward pass over the events, in a pipeline of
// goroutines a batch of events apart, each with a few map operations or
// record updates per event and no allocation. The matcher (match)
// unpacks the events and keeps the map of active blocks: which allocation
// each free ends. The placer (place) keeps the allocator's layout: which
// block each alloc takes, of what size and in which pool, and writes each
// alloc's record. The accountant (account, on this goroutine) ends the
// records and sums the usage, whose series the writer (write) codes.
// On the 996 MB bench file (11.4 M events) the pass took 0.65 s on one
// core. On 16 it took 0.6 s of wall time as two goroutines (the matcher
// and placer one, the accountant with the writer the other), as long as
// the first alone, and 0.35 s split so; analyze of that file took
// 1.19-1.28 s instead of 1.22-1.51 (4 runs each, alternating), and no
// longer on 2 cores (6 pairs side by side, median 0.93 of the old time;
// bench/RESULTS.md).
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
		b := placedBatch{events: make([]snapshot.Event, placedBatchLen), words: make([]int64, placedBatchLen)}
		for m := range b.values {
			b.values[m] = make([]int64, placedBatchLen)
		}
		empty <- b
	}
	matched, placed := make(chan placedBatch, placedBatches), make(chan placedBatch, placedBatches)
	var matchCaveats, placeCaveats caveatCounter
	go r.match(n, int32(initial), &matchCaveats, empty, matched)
	go r.place(int32(initial), len(t.full), &placeCaveats, matched, placed)
	summed := make(chan placedBatch, placedBatches)
	written := make(chan struct{})
	go func() {
		t.write(summed, empty)
		close(written)
	}()
	r.account(int32(initial), placed, summed)
	<-written
	r.caveats.mergeRun(&matchCaveats, &placeCaveats)
}

// The matcher hands the placer, the placer the accountant and so on,
// batches of placedBatchLen events, at most placedBatches at a time
// (8 MiB in all). The length is a variable for tests to cross batch
// boundaries with few events.
var placedBatchLen = 1 << 13

const placedBatches = 16

// placedBatch is what the matcher and the placer found for events start..
// of one batch, with the events, which the matcher unpacks for all three
// (0.24 s of the accountant's 0.56 s on the 996 MB bench file went to
// unpacking them again): per event a word, and the allocs whose word could
// not say everything. The matcher's word is, for an alloc, the allocation
// it ends at an address still active (-1: none); for a free, freeWord's
// (-1: no block active at the address). The placer replaces an alloc's
// with placedAlloc's and gives a segment event's its pool index. The
// accountant's values are each event's allocated bytes, waste and active
// bytes, for the writer.
type placedBatch struct {
	start  int
	events []snapshot.Event
	words  []int64
	rare   []rareAlloc
	values [3][]int64
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

// match is the matcher: it unpacks the events, keeps the map of active
// blocks and sends its words in batches. The next traced alloc is
// allocation next.
func (r *replayer) match(n int, next int32, caveats *caveatCounter, empty <-chan placedBatch, matched chan<- placedBatch) {
	defer close(matched)
	for start := 0; start < n; start += placedBatchLen {
		b := <-empty
		b.start, b.rare = start, b.rare[:0]
		b.events = r.tr.Events(b.events[:cap(b.events)], start)
		b.words = b.words[:len(b.events)]
		for j := range b.events {
			e := &b.events[j]
			w := int64(-1)
			switch e.Action {
			case snapshot.ActionAlloc:
				if old, ok := r.blocks.get(e.Addr); ok {
					// The address is still active: its free was not recorded.
					caveats.add(LayoutConflict, start+j, 0)
					w = int64(old.k)
				}
				r.blocks.set(e.Addr, activeBlock{next, e.Size})
				next++
			case snapshot.ActionFreeRequested:
				w = r.matchFree(start+j, e, !r.hasCompleted, caveats)
			case snapshot.ActionFreeCompleted:
				w = r.matchFree(start+j, e, true, caveats)
			}
			b.words[j] = w
		}
		matched <- b
	}
}

// matchFree matches a free_requested (ends: false unless the trace
// records no free_completed) or a free_completed (ends: true) with the
// block active at its address: the one that ends the block removes it. It
// returns freeWord's word of the allocation freed, or -1 if no block was
// active at the address.
func (r *replayer) matchFree(i int, e *snapshot.Event, ends bool, caveats *caveatCounter) int64 {
	var b activeBlock
	var ok bool
	if ends {
		b, ok = r.blocks.remove(e.Addr)
	} else {
		b, ok = r.blocks.get(e.Addr)
	}
	if !ok {
		caveats.add(LayoutConflict, i, 0)
		return -1
	}
	return freeWord(b.k, b.requested)
}

// place is the placer: it replays the matched events on the layout,
// writes the allocations' records, and passes the batches on with its
// words. Allocation k is the k-th record: the next traced alloc gets
// index next; the next full record's Allocation, t.full[nextFull].
func (r *replayer) place(next int32, nextFull int, caveats *caveatCounter, matched <-chan placedBatch, placed chan<- placedBatch) {
	defer close(placed)
	nextSeg, nextKnown := 0, 0
	for b := range matched {
		for j := range b.events {
			i := b.start + j
			e := &b.events[j]
			w := &b.words[j]
			switch e.Action {
			case snapshot.ActionAlloc:
				var known uint64
				if nextKnown < len(r.known) && int(r.known[nextKnown].index) == i {
					known = r.known[nextKnown].size
					nextKnown++
				}
				*w = r.placeAlloc(i, e, known, next, int32(*w), &nextFull, &b, caveats)
				next++
			case snapshot.ActionFreeRequested:
				if !r.hasCompleted {
					r.placeFree(e, *w)
				}
			case snapshot.ActionFreeCompleted:
				r.placeFree(e, *w)
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
				*w = int64(r.placeSegment(i, e, r.t.segInfos[nextSeg], caveats))
				nextSeg++
			}
		}
		placed <- b
	}
}

// placeAlloc places alloc i, allocation k, and writes its record; known
// is the block size from the final snapshot, or 0, and ended the
// allocation still active at its address (-1: none). It returns the
// event's word.
func (r *replayer) placeAlloc(i int, e *snapshot.Event, known uint64, k, ended int32, nextFull *int, b *placedBatch, caveats *caveatCounter) int64 {
	if ended >= 0 {
		r.layout.release(e.Addr, r.blockSize(ended))
	}
	size, seg, ok := r.layout.take(e.Addr, e.Size, known)
	switch {
	case seg < 0:
		caveats.add(UnknownAddress, i, size)
	case !ok:
		caveats.add(LayoutConflict, i, size)
	}
	pool := 0
	if seg >= 0 {
		pool = r.poolIndex(r.layout.segs[seg].pool)
	}
	rec := newRecord(&Allocation{Size: size, Start: int32(i), Free: LiveAtEnd, End: LiveAtEnd, Origin: Traced}, pool, *nextFull)
	if rec.full() {
		*nextFull++
		r.keepFullSize(k, size)
	}
	r.t.allocs[k] = rec
	w := placedAlloc(size, pool)
	if w < 0 || ended >= 0 {
		w = -1
		b.rare = append(b.rare, rareAlloc{index: i, size: size, pool: pool, ended: ended})
	}
	return w
}

// placeFree gives the block a free ends, whose matcher's word is w (-1:
// none), back to the layout.
func (r *replayer) placeFree(e *snapshot.Event, w int64) {
	if w >= 0 {
		k, _ := freed(w)
		r.layout.release(e.Addr, r.blockSize(k))
	}
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
func (r *replayer) placeSegment(i int, e *snapshot.Event, info segmentInfo, caveats *caveatCounter) int {
	if e.Action == snapshot.ActionSegmentFree || e.Action == snapshot.ActionSegmentUnmap {
		if s := r.layout.find(e.Addr); s >= 0 {
			info = r.layout.segs[s].segmentInfo
		}
		if _, ok := r.traced.remove(e.Addr, e.Size); !ok {
			caveats.add(SegmentsBeforeRecording, i, e.Size)
		}
	} else {
		r.traced.add(e.Addr, e.Size, info, e.Action == snapshot.ActionSegmentMap)
	}
	if !r.layout.applySegment(*e, info) {
		caveats.add(LayoutConflict, i, e.Size)
	}
	return r.poolIndex(info.pool)
}

// account is the accountant: it turns the placer's batches into the
// records' ends, the usage, the pool steps and the peaks, and hands each
// batch with its values to the writer. The next traced alloc is
// allocation next, whose record the placer wrote.
func (r *replayer) account(next int32, placed <-chan placedBatch, summed chan<- placedBatch) {
	t := r.t
	cur := t.Initial
	for b := range placed {
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
			b.values[0][j], b.values[1][j], b.values[2][j] = cur.Allocated, cur.Allocated-cur.Requested, cur.Active
		}
		summed <- b
	}
	close(summed)
}

// write is the writer: it codes the values of each batch into the
// series and hands the batch back to the matcher.
func (t *Timeline) write(summed <-chan placedBatch, empty chan<- placedBatch) {
	n := t.Len()
	for b := range summed {
		for m, s := range []*series{&t.allocated, &t.waste, &t.active} {
			for j, v := range b.values[m][:len(b.words)] {
				// put, inlined, takes the values of real traces; set, out
				// of line, any value.
				i := b.start + j
				if !s.put(i, v) {
					s.set(i, v)
				}
				if endsBlock(i, n) {
					s.seal(i)
				}
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

// activeBlock is what the matcher keeps of an active block: its
// allocation and its requested size.
type activeBlock struct {
	k         int32
	requested uint64
}

// blockSize is the block size of allocation k, as the placer knows it:
// its record's, or for a full record the copy keepFullSize made, as
// Timeline.full grows on the accountant's goroutine meanwhile.
func (r *replayer) blockSize(k int32) uint64 {
	if rec := &r.t.allocs[k]; !rec.full() {
		return uint64(rec.units()) << allocator.MinBlockBits
	}
	return r.fullSizes[k]
}

// keepFullSize notes the block size of allocation k, whose record is full.
func (r *replayer) keepFullSize(k int32, size uint64) {
	if r.fullSizes == nil {
		r.fullSizes = map[int32]uint64{}
	}
	r.fullSizes[k] = size
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
		a := r.t.Allocation(int(b.k))
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
