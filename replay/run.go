package replay

import (
	"github.com/vramscope/vramscope/internal/hugepage"
	"github.com/vramscope/vramscope/snapshot"
)

// run is step 3: one forward pass over the events. Per event it does a few
// map operations keyed by address and appends at most one Allocation; it
// allocates nothing else per event.
func (r *replayer) run() {
	t := r.t
	n := r.tr.Len()
	// Hundreds of MB of fresh output on the 996 MB bench file: on huge
	// pages (newSeries advises its own), replay took 0.60-0.67 s instead
	// of 0.82-0.90 s (page faults).
	t.allocated, t.active = newSeries(n, minBlockBits), newSeries(n, minBlockBits)
	t.waste = newSeries(n, 0)
	allocs := make([]allocRecord, 0, len(t.allocs)+r.counts[snapshot.ActionAlloc])
	hugepage.Advise(allocs)
	t.allocs = append(allocs, t.allocs...)
	t.poolInitial = append([]Sample(nil), r.pools[1:]...)
	t.poolSteps = make([][]poolStep, len(t.Pools)-1)
	for m := range t.peaks {
		t.peaks[m] = Peak{Index: BeforeRecording, Bytes: t.Initial.get(Metric(m))}
	}

	cur := t.Initial
	nextSeg, nextKnown := 0, 0
	for i := range n {
		e := r.tr.At(i)
		var d Sample
		pool := -1
		switch e.Action {
		case snapshot.ActionAlloc:
			var known uint64
			if nextKnown < len(r.known) && int(r.known[nextKnown].index) == i {
				known = r.known[nextKnown].size
				nextKnown++
			}
			pool = r.alloc(i, e, known, &d)
		case snapshot.ActionFreeRequested:
			pool = r.freeRequested(i, e, &d)
		case snapshot.ActionFreeCompleted:
			pool = r.freeCompleted(i, e, &d)
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
			pool = r.segmentEvent(i, e, t.segInfos[nextSeg], &d)
			nextSeg++
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
	}
}

// alloc replays an alloc; known is the block size from the final snapshot,
// or 0. It returns the pool index touched.
func (r *replayer) alloc(i int, e snapshot.Event, known uint64, d *Sample) int {
	// The Allocation added below gets index k.
	k := int32(len(r.t.allocs))
	if old, ok := r.blocks.set(e.Addr, k); ok {
		// The address is still active: its free was not recorded.
		r.caveats.add(LayoutConflict, i, 0)
		r.end(old, e.Addr, i, d)
	}
	size, seg, ok := r.layout.take(e.Addr, e.Size, known)
	a := Allocation{
		Addr: e.Addr, Size: size, Requested: e.Size,
		Start: int32(i), Free: LiveAtEnd, End: LiveAtEnd,
		Stack: e.Stack, Stream: e.Stream, Origin: Traced,
	}
	switch {
	case seg < 0:
		r.caveats.add(UnknownAddress, i, size)
	case !ok:
		r.caveats.add(LayoutConflict, i, size)
	}
	if seg >= 0 {
		a.Pool = r.layout.segs[seg].pool
	}
	pool := r.poolIndex(a.Pool)
	r.t.add(&a, pool)
	d.Allocated += int64(size)
	d.Requested += int64(e.Size)
	d.Active += int64(size)
	return pool
}

// freeRequested replays a free_requested: the block stops being allocated;
// it stays active (pending) until its free_completed, unless the trace
// records no free_completed at all.
func (r *replayer) freeRequested(i int, e snapshot.Event, d *Sample) int {
	k, ok := r.blocks.get(e.Addr)
	if !ok {
		r.caveats.add(LayoutConflict, i, 0)
		return -1
	}
	rec := &r.t.allocs[k]
	r.t.markFreed(rec, i, d)
	if !r.hasCompleted {
		r.blocks.remove(e.Addr)
		r.end(k, e.Addr, i, d)
	}
	return r.recordPool(rec)
}

// freeCompleted replays a free_completed: the block goes back to the cache.
func (r *replayer) freeCompleted(i int, e snapshot.Event, d *Sample) int {
	k, ok := r.blocks.remove(e.Addr)
	if !ok {
		r.caveats.add(LayoutConflict, i, 0)
		return -1
	}
	r.end(k, e.Addr, i, d)
	return r.recordPool(&r.t.allocs[k])
}

// end ends allocation k, at addr, at event i, which the caller has removed
// from blocks: freed if not yet, no longer active, and its range merged
// back into the free ranges.
func (r *replayer) end(k int32, addr uint64, i int, d *Sample) {
	rec := &r.t.allocs[k]
	r.t.markFreed(rec, i, d)
	rec.end = int32(i)
	size := r.t.size(rec)
	d.Active -= int64(size)
	r.layout.release(addr, size)
}

// markFreed marks r freed at event i, unless it already was, and takes it
// out of the allocated and requested bytes.
func (t *Timeline) markFreed(r *allocRecord, i int, d *Sample) {
	if r.free == LiveAtEnd {
		r.free = int32(i)
		d.Allocated -= int64(t.size(r))
		d.Requested -= int64(t.requested(r))
	}
}

// recordPool is rec's pool index.
func (r *replayer) recordPool(rec *allocRecord) int {
	if rec.full {
		return r.poolIndex(r.t.full[rec.units].Pool)
	}
	return int(rec.pool)
}

// segmentEvent replays a segment event with the info of the range it
// creates (for releases, the segment's own info is used).
func (r *replayer) segmentEvent(i int, e snapshot.Event, info segmentInfo, d *Sample) int {
	release := e.Action == snapshot.ActionSegmentFree || e.Action == snapshot.ActionSegmentUnmap
	if release {
		if s := r.layout.find(e.Addr); s >= 0 {
			info = r.layout.segs[s].segmentInfo
		}
		if _, ok := r.traced.remove(e.Addr, e.Size); !ok {
			r.caveats.add(SegmentsBeforeRecording, i, e.Size)
		}
		d.Reserved -= int64(e.Size)
	} else {
		r.traced.add(e.Addr, e.Size, info, e.Action == snapshot.ActionSegmentMap)
		d.Reserved += int64(e.Size)
	}
	if !r.layout.applySegment(e, info) {
		r.caveats.add(LayoutConflict, i, e.Size)
	}
	return r.poolIndex(info.pool)
}

// compareFinal checks the replayed end state against the final snapshot,
// block by block and in reserved bytes.
func (r *replayer) compareFinal() {
	diff, matched := 0, 0
	for _, fb := range r.finalBlocks {
		k, ok := r.blocks.get(fb.addr)
		if !ok {
			diff++
			continue
		}
		matched++
		a := r.t.Allocation(int(k))
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
