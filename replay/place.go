package replay

import (
	"slices"

	"github.com/vramscope/vramscope/snapshot"
)

// The placer's work (the allocator's layout: three or four map operations
// on the free ranges an event) held the forward pass back at one busy core
// on 16 (bench/RESULTS.md). It is sharded: each shard keeps the free
// ranges of the segments it owns (layout.owns) and the sizes of the blocks
// placed in them, and places their events, which a router (route) lists
// for it; the router and every shard follow every segment event, so all
// know the same segments and owners. Free ranges
// never span segments and a block lives in one, so in a trace the layout
// follows the shards do what one placer would. Where it does not follow
// (a block outside every segment or taken from no free range, a segment
// event at odds with the layout, a new segment over another, a block
// whose segment changed under it), one placer might read what another
// shard holds: the shards then say they were not exact, and the replay
// runs again with one.

// placerShards is how many shards place the events on procs cores: one
// for each 4, up to 4. More would not help: the shard of a trace's
// busiest segment holds the pass back (route).
func placerShards(procs int) int { return max(1, min(4, procs/4)) }

// A placer is one shard of the placer.
type placer struct {
	r       *replayer
	layout  *layout // with the sizes of the blocks the shard placed
	caveats caveatCounter
	// inexact says that the shard met what one placer would have done
	// with another shard's free ranges or blocks.
	inexact bool
	// The next segment event's index in segInfos, and the next alloc's of
	// a known size in known.
	nextSeg, nextKnown int
}

// placers returns the shards of the placer, their layouts and block
// sizes split from the ones reconstruct made.
func (r *replayer) placers() []*placer {
	n := r.layout.shards
	ps := make([]*placer, n)
	for k, l := range r.layout.split() {
		ps[k] = &placer{r: r, layout: l}
		l.sizes = r.sizes
		if n > 1 {
			l.sizes = newAddrMap[uint64]()
		}
	}
	if n > 1 {
		for addr, size := range r.sizes.all() {
			ps[r.layout.ownerAt(addr)].layout.sizes.set(addr, size)
		}
	}
	for _, p := range ps {
		p.layout.densifyAll()
	}
	r.layout = ps[0].layout // every shard's segments are all of them (compareFinal)
	return ps
}

// place replays the matched events of the shard's segments on its layout,
// writing their words and its rare allocs; the last shard to finish a
// batch passes it on. One placer reads every event; shards read the ones
// the router listed for them.
func (p *placer) place(matched <-chan placedBatch, placed chan<- placedBatch) {
	r, l := p.r, p.layout
	for b := range matched {
		rare := b.rares[l.shard][:0]
		if b.routes == nil {
			// The events the router would list, found so.
			for j := range b.events {
				switch e := &b.events[j]; {
				case r.placed(e.Action):
					p.placeEvent(b.start+j, e, &b.words[j], l.find(e.Addr), &rare)
				case isSegmentEvent(e.Action):
					p.placeEvent(b.start+j, e, &b.words[j], 0, &rare) // a new segment's owner: the one placer
				}
			}
		} else {
			for _, x := range b.routes[l.shard] {
				p.placeEvent(b.start+int(x.j), &b.events[x.j], &b.words[x.j], int(x.arg), &rare)
			}
		}
		b.rares[l.shard] = rare
		if b.left.Add(-1) == 0 {
			b.rare = mergeRare(b.rare[:0], b.rares)
			placed <- b
		}
	}
}

// placeEvent places event i, e, whose word is w, in the shard: an alloc or
// a free the placer places (placed) in segment arg (-1: none), which the
// shard owns, or a segment event whose new segment, if it makes one, goes
// to shard arg.
func (p *placer) placeEvent(i int, e *snapshot.Event, w *int64, arg int, rare *[]rareAlloc) {
	r := p.r
	switch e.Action {
	case snapshot.ActionAlloc:
		for p.nextKnown < len(r.known) && int(r.known[p.nextKnown].index) < i {
			p.nextKnown++ // an alloc of another shard's
		}
		var known uint64
		if p.nextKnown < len(r.known) && int(r.known[p.nextKnown].index) == i {
			known = r.known[p.nextKnown].size
			p.nextKnown++
		}
		*w = p.placeAlloc(i, e, arg, known, int32(*w), rare)
	case snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
		p.placeFree(e, *w, arg)
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
		if pool, owned := p.placeSegment(i, e, r.t.segInfos[p.nextSeg], int32(arg)); owned {
			*w = int64(pool)
		}
		p.nextSeg++
	}
}

// placed reports whether the placer places a block event of action a: an
// alloc, or the free that ends the block.
func (r *replayer) placed(a snapshot.Action) bool {
	return a == snapshot.ActionAlloc || a == snapshot.ActionFreeCompleted || a == snapshot.ActionFreeRequested && !r.hasCompleted
}

// routedEvent is an event of a batch a shard places: its index in the
// batch and placeEvent's arg, for an alloc or a free its segment (-1:
// none), for a segment event the shard a new segment goes to.
type routedEvent struct{ j, arg int32 }

// route is the router of a placer in shards. A shard read every event,
// found its segment and skipped those of others' segments: on 16 cores
// the shard of the bench file's busiest segment (a 2 MiB one of the small
// pool with 37% of its allocs and frees) was then at one whole core
// throughout the forward pass (bench/RESULTS.md). The router follows the
// segments on l, which owns none, as each shard does, and lists for each
// shard the block events in its segments and every segment event.
//
// It also gives each new segment its owner: the shard with the fewest
// block events so far. With segments given in turn, one shard of four
// placed 58% of the bench seed's allocs and frees; given so, 39%, where
// its busiest segment alone has 37% (TestRouterBalance).
func (r *replayer) route(l *layout, matched <-chan placedBatch, routed []chan placedBatch) {
	defer func() {
		for _, c := range routed {
			close(c)
		}
	}()
	nextSeg := 0
	load := make([]int, l.shards) // block events routed to each shard
	leastLoaded := func() int32 { return int32(slices.Index(load, slices.Min(load))) }
	for b := range matched {
		for k := range b.routes {
			b.routes[k] = b.routes[k][:0]
		}
		for j := range b.events {
			e := &b.events[j]
			switch {
			case r.placed(e.Action):
				seg := l.find(e.Addr)
				owner := 0
				if seg >= 0 {
					owner = int(l.segs[seg].owner)
				}
				load[owner]++
				b.routes[owner] = append(b.routes[owner], routedEvent{int32(j), int32(seg)})
			case isSegmentEvent(e.Action):
				info := r.t.segInfos[nextSeg]
				nextSeg++
				owner := int32(-1) // a release makes no segment
				if e.Action == snapshot.ActionSegmentAlloc || e.Action == snapshot.ActionSegmentMap {
					owner = l.newOwner(info, leastLoaded)
				}
				l.applySegment(*e, info, owner)
				for k := range b.routes {
					b.routes[k] = append(b.routes[k], routedEvent{int32(j), owner})
				}
			}
		}
		b.left.Store(int32(len(routed)))
		for _, c := range routed {
			c <- b
		}
	}
	r.routed = load
}

// isSegmentEvent reports whether a reserves or releases device memory.
func isSegmentEvent(a snapshot.Action) bool {
	return a == snapshot.ActionSegmentAlloc || a == snapshot.ActionSegmentFree || a == snapshot.ActionSegmentMap || a == snapshot.ActionSegmentUnmap
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
		old, ok := l.blockAt(seg, e.Addr)
		p.unsure(!ok)
		l.release(seg, e.Addr, old)
	}
	size, ok, carved := l.take(seg, e.Addr, e.Size, known)
	l.setBlock(seg, e.Addr, size)
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
// none), back to the layout: to segment seg, which the shard owns.
func (p *placer) placeFree(e *snapshot.Event, w int64, seg int) {
	if w < 0 {
		return
	}
	l := p.layout
	size, ok := l.removeBlock(seg, e.Addr)
	p.unsure(!ok)
	l.release(seg, e.Addr, size)
}

// placeSegment places a segment event with the info of the range it
// creates (for releases, the segment's own info is used), a new segment
// going to shard owner, and returns the pool index and whether the shard
// owns the segment. The first shard
// follows the ranges the trace reserved.
func (p *placer) placeSegment(i int, e *snapshot.Event, info segmentInfo, owner int32) (pool int, owned bool) {
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
	owned, ok, clash := l.applySegment(*e, info, owner)
	if owned && !ok {
		p.caveats.add(LayoutConflict, i, e.Size)
	}
	p.unsure(owned && !ok || clash)
	return p.r.poolIndex(info.pool), owned
}

// unsure notes, if b, that a sharded placer cannot vouch for its result:
// one placer might have read what another shard holds.
func (p *placer) unsure(b bool) { p.inexact = p.inexact || b && p.layout.shards > 1 }
