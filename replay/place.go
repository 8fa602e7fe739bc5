package replay

import "github.com/vramscope/vramscope/snapshot"

// The placer's work (the allocator's layout: three or four map operations
// on the free ranges an event) held the forward pass back at one busy core
// on 16 (bench/RESULTS.md). It is sharded: each shard keeps the free
// ranges of the segments it owns (layout.owns) and the sizes of the blocks
// placed in them, and places their events; every shard follows every
// segment event, so all know the same segments and owners. Free ranges
// never span segments and a block lives in one, so in a trace the layout
// follows the shards do what one placer would. Where it does not follow
// (a block outside every segment or taken from no free range, a segment
// event at odds with the layout, a new segment over another, a block
// whose segment changed under it), one placer might read what another
// shard holds: the shards then say they were not exact, and the replay
// runs again with one.

// placerShards is how many shards place the events on procs cores: one
// for each 4, up to 4, since each reads every event and the other stages
// of the forward pass take about as long as a quarter of the placer's
// work.
func placerShards(procs int) int { return max(1, min(4, procs/4)) }

// A placer is one shard of the placer.
type placer struct {
	r       *replayer
	layout  *layout
	sizes   *addrMap[uint64] // address of an active block it placed -> its size
	caveats caveatCounter
	// inexact says that the shard met what one placer would have done
	// with another shard's free ranges or blocks.
	inexact bool
}

// placers returns the shards of the placer, their layouts and block
// sizes split from the ones reconstruct made.
func (r *replayer) placers(n int) []*placer {
	ps := make([]*placer, n)
	for k, l := range r.layout.split(n) {
		ps[k] = &placer{r: r, layout: l, sizes: r.sizes}
		if n > 1 {
			ps[k].sizes = newAddrMap[uint64]()
		}
	}
	if n > 1 {
		for addr, size := range r.sizes.all() {
			ps[r.layout.ownerAt(addr, n)].sizes.set(addr, size)
		}
	}
	r.layout = ps[0].layout // every shard's segments are all of them (compareFinal)
	return ps
}

// place replays the matched events of the shard's segments on its layout,
// writing their words and its rare allocs; the last shard to finish a
// batch passes it on.
func (p *placer) place(matched <-chan placedBatch, placed chan<- placedBatch) {
	r, l := p.r, p.layout
	nextSeg, nextKnown := 0, 0
	for b := range matched {
		rare := b.rares[l.shard][:0]
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
				seg := l.find(e.Addr)
				if !l.owns(seg) {
					continue
				}
				*w = p.placeAlloc(i, e, seg, known, int32(*w), &rare)
			case snapshot.ActionFreeRequested:
				if !r.hasCompleted {
					p.placeFree(e, *w)
				}
			case snapshot.ActionFreeCompleted:
				p.placeFree(e, *w)
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
				if pool, owned := p.placeSegment(i, e, r.t.segInfos[nextSeg]); owned {
					*w = int64(pool)
				}
				nextSeg++
			}
		}
		b.rares[l.shard] = rare
		if b.left.Add(-1) == 0 {
			b.rare = mergeRare(b.rare[:0], b.rares)
			placed <- b
		}
	}
}

// mergeRare appends the shards' rare allocs to dst in event order.
func mergeRare(dst []rareAlloc, rares [][]rareAlloc) []rareAlloc {
	if len(rares) == 1 {
		return append(dst, rares[0]...)
	}
	at := make([]int, len(rares))
	for {
		next := -1
		for k, rs := range rares {
			if at[k] < len(rs) && (next < 0 || rs[at[k]].index < rares[next][at[next]].index) {
				next = k
			}
		}
		if next < 0 {
			return dst
		}
		dst = append(dst, rares[next][at[next]])
		at[next]++
	}
}

// placeAlloc places alloc i in segment seg, which the shard owns; known
// is the block size from the final snapshot, or 0, and ended the
// allocation still active at its address (-1: none). It returns the
// event's word, or -1 and appends the alloc to rare.
func (p *placer) placeAlloc(i int, e *snapshot.Event, seg int, known uint64, ended int32, rare *[]rareAlloc) int64 {
	l := p.layout
	if ended >= 0 {
		old, ok := p.sizes.get(e.Addr)
		p.unsure(!ok)
		l.release(seg, e.Addr, old)
	}
	size, ok, carved := l.take(seg, e.Addr, e.Size, known)
	p.sizes.set(e.Addr, size)
	switch {
	case seg < 0:
		p.caveats.add(UnknownAddress, i, size)
		p.unsure(true)
	case !ok:
		// A block taken from inside a free range, or cut short at its
		// end, leaves the free ranges apart; one taken from none may
		// later free a range over another.
		p.caveats.add(LayoutConflict, i, size)
		p.unsure(!carved)
	}
	pool := p.pool(seg)
	w := placedAlloc(size, pool)
	if w < 0 || ended >= 0 {
		w = -1
		*rare = append(*rare, rareAlloc{index: i, size: size, pool: pool, ended: ended})
	}
	return w
}

// pool is the pool index of segment seg (the default pool if none).
func (p *placer) pool(seg int) int {
	if seg < 0 {
		return 0
	}
	return p.r.poolIndex(p.layout.segs[seg].pool)
}

// placeFree gives the block a free ends, whose matcher's word is w (-1:
// none), back to the layout, if it lies in a segment the shard owns.
func (p *placer) placeFree(e *snapshot.Event, w int64) {
	if w < 0 {
		return
	}
	l := p.layout
	seg := l.find(e.Addr)
	if !l.owns(seg) {
		return
	}
	size, ok := p.sizes.remove(e.Addr)
	p.unsure(!ok)
	l.release(seg, e.Addr, size)
}

// placeSegment places a segment event with the info of the range it
// creates (for releases, the segment's own info is used), and returns the
// pool index and whether the shard owns the segment. The first shard
// follows the ranges the trace reserved.
func (p *placer) placeSegment(i int, e *snapshot.Event, info segmentInfo) (pool int, owned bool) {
	l := p.layout
	if e.Action == snapshot.ActionSegmentFree || e.Action == snapshot.ActionSegmentUnmap {
		if s := l.find(e.Addr); s >= 0 {
			info = l.segs[s].segmentInfo
		}
		if l.shard == 0 {
			if _, ok := p.r.traced.remove(e.Addr, e.Size); !ok {
				p.caveats.add(SegmentsBeforeRecording, i, e.Size)
			}
		}
	} else if l.shard == 0 {
		p.r.traced.add(e.Addr, e.Size, info, e.Action == snapshot.ActionSegmentMap)
	}
	owned, ok, clash := l.applySegment(*e, info)
	if owned && !ok {
		p.caveats.add(LayoutConflict, i, e.Size)
	}
	p.unsure(owned && !ok || clash)
	return p.r.poolIndex(info.pool), owned
}

// unsure notes, if b, that a sharded placer cannot vouch for its result:
// one placer might have read what another shard holds.
func (p *placer) unsure(b bool) { p.inexact = p.inexact || b && p.layout.shards > 1 }
