package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/units"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// FragReport splits one moment's reserved-but-unallocated memory by what
// could give it back.
type FragReport struct {
	Device int
	Index  int    // event index; replay.BeforeRecording: before the first
	When   string // "end", "peak", "reserved peak" or "oom"

	Reserved, Allocated int64
	// Expandable is whether the allocator ran with expandable segments.
	Expandable bool
	// FreeSegments is the fully free segments of the default pool (no
	// active block), as stats counts them.
	FreeSegments      int64
	FreeSegmentsCount int
	// FreePages is the whole free pages of expandable segments that still
	// hold live blocks: empty_cache() unmaps them page by page, wherever
	// they lie (research note 5.4), so it returns them too.
	FreePages      int64
	FreePagesCount int // segments with free pages
	// Trapped is free memory in default-pool segments that still hold
	// live blocks (with expandable segments, the free slivers of pages a
	// live block also uses): only expandable_segments or another
	// allocation order frees it.
	Trapped      int64
	TrappedCount int // segments with trapped bytes
	// PendingFree is freed by the caller but waiting on record_stream
	// events of other streams.
	PendingFree int64
	// PrivatePools is free memory in CUDA-graph or MemPool pools, reused
	// only by that pool and released only with it.
	PrivatePools int64
	// RoundingWaste is Σ size - requested of allocated blocks; it is part
	// of Allocated, not of the free memory above.
	RoundingWaste int64

	Largest []FreeClass     // largest free block per stream, pool and size class
	Pinned  []PinnedSegment // segments with the most trapped bytes, most first
	// Creators groups the fully free segments by the callsite that made
	// the allocator reserve them: who grew the cache.
	Creators []SiteGroup
	Advice   []string
}

// Unallocated is Reserved - Allocated: FreeSegments + FreePages + Trapped
// + PendingFree + PrivatePools.
func (r *FragReport) Unallocated() int64 { return r.Reserved - r.Allocated }

// Releasable is what torch.cuda.empty_cache() returns: the fully free
// segments and the whole free pages of expandable ones.
func (r *FragReport) Releasable() int64 { return r.FreeSegments + r.FreePages }

// FreeClass is the free memory of one allocator free list.
type FreeClass struct {
	Stream  snapshot.StreamID
	Pool    snapshot.PoolID
	Type    snapshot.SegmentType
	Largest uint64
	Free    uint64
	Blocks  int
}

// PinnedSegment is a segment whose free memory is held hostage by live
// blocks, with the callsites of those blocks.
type PinnedSegment struct {
	Address, Size uint64
	Stream        snapshot.StreamID
	Type          snapshot.SegmentType
	Expandable    bool
	Free          uint64 // inactive bytes in the segment
	// Pages is the part of Free in whole pages of an expandable segment,
	// which empty_cache() unmaps: Free - Pages is trapped.
	Pages         uint64
	Holes         int
	LargestHole   uint64
	LargestPinner uint64      // size of the largest live block
	Pinners       []SiteGroup // live blocks of the segment by callsite
}

// maxPinned bounds FragReport.Pinned: the worst few segments explain it.
const maxPinned = 5

// Frag analyses the allocator state right after event i of tl.
func Frag(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, i int, when string) (*FragReport, error) {
	st, err := tl.State(i)
	if err != nil {
		return nil, fmt.Errorf("fragmentation %s: %w", when, err)
	}
	r := &FragReport{Device: tl.Device, Index: i, When: when, Expandable: sn.Settings != nil && sn.Settings.ExpandableSegments}
	classes := map[FreeClass]*FreeClass{}
	pl := newPlacer(sn, tl, f)
	settings := settingsOf(sn)
	var created []sized
	for s := range st.Segments {
		seg := &st.Segments[s]
		r.Reserved += int64(seg.TotalSize)
		r.Allocated += int64(seg.AllocatedSize)
		ps := PinnedSegment{Address: seg.Address, Size: seg.TotalSize, Stream: seg.Stream, Type: seg.Type, Expandable: seg.Expandable}
		var pinners []int
		for b := seg.FirstBlock; b < seg.FirstBlock+seg.NumBlocks; b++ {
			blk := &st.Blocks[b]
			switch blk.State {
			case snapshot.ActiveAllocated:
				r.RoundingWaste += int64(blk.Size - min(blk.RequestedSize, blk.Size))
				pinners = append(pinners, st.Allocation[b])
				ps.LargestPinner = max(ps.LargestPinner, blk.Size)
			case snapshot.ActivePendingFree:
				r.PendingFree += int64(blk.Size)
				pinners = append(pinners, st.Allocation[b])
				ps.LargestPinner = max(ps.LargestPinner, blk.Size)
			case snapshot.Inactive:
				ps.Free += blk.Size
				ps.Holes++
				ps.LargestHole = max(ps.LargestHole, blk.Size)
				key := FreeClass{Stream: seg.Stream, Pool: seg.Pool, Type: seg.Type}
				c := classes[key]
				if c == nil {
					c = &key
					classes[key] = c
				}
				c.Free += blk.Size
				c.Blocks++
				c.Largest = max(c.Largest, blk.Size)
			}
		}
		if ps.Free == 0 {
			continue
		}
		switch {
		case !seg.Pool.IsDefault():
			r.PrivatePools += int64(ps.Free)
		case len(pinners) == 0:
			r.FreeSegments += int64(ps.Free)
			r.FreeSegmentsCount++
			created = append(created, sized{pl.stack(seg.Stack), seg.TotalSize})
			continue
		case seg.Expandable:
			ps.Pages = wholePages(st, seg, &settings)
			if ps.Pages > 0 {
				r.FreePages += int64(ps.Pages)
				r.FreePagesCount++
			}
			if ps.Free == ps.Pages {
				continue // nothing is trapped
			}
			r.Trapped += int64(ps.Free - ps.Pages)
			r.TrappedCount++
		default:
			r.Trapped += int64(ps.Free)
			r.TrappedCount++
		}
		// A private pool's segment without live blocks is held by its
		// pool, not pinned by a tensor.
		if len(pinners) > 0 {
			ps.Pinners = pl.group(pinners)
			r.Pinned = append(r.Pinned, ps)
		}
	}
	for _, c := range classes {
		r.Largest = append(r.Largest, *c)
	}
	// classes is a map: every tie is broken, or equal largest blocks on one
	// stream (a small and a large pool's 2 MiB) print in either order.
	slices.SortFunc(r.Largest, func(a, b FreeClass) int {
		return cmp.Or(cmp.Compare(b.Largest, a.Largest), cmp.Compare(a.Stream, b.Stream),
			cmp.Compare(a.Pool[0], b.Pool[0]), cmp.Compare(a.Pool[1], b.Pool[1]), cmp.Compare(a.Type, b.Type))
	})
	slices.SortStableFunc(r.Pinned, func(a, b PinnedSegment) int { return cmp.Compare(b.Free-b.Pages, a.Free-a.Pages) })
	r.Pinned = r.Pinned[:min(len(r.Pinned), maxPinned)]
	r.Creators = pl.groupSized(created)
	r.Advice = fragAdvice(r)
	return r, nil
}

// wholePages is the free memory of an expandable segment in pages that lie
// entirely inside a free block: what empty_cache() can unmap (only whole
// pages are unmapped, research note 5.4).
func wholePages(st *replay.State, seg *snapshot.Segment, s *allocator.Settings) uint64 {
	page := s.PageSize(allocator.Large)
	if seg.Type == snapshot.Small {
		page = s.PageSize(allocator.Small)
	}
	var n uint64
	for _, b := range st.Blocks[seg.FirstBlock : seg.FirstBlock+seg.NumBlocks] {
		if b.State != snapshot.Inactive {
			continue
		}
		// Mapped ranges start on a page boundary of the reservation.
		lo := (b.Address - seg.Address + page - 1) / page * page
		hi := (b.Address - seg.Address + b.Size) / page * page
		if hi > lo {
			n += hi - lo
		}
	}
	return n
}

// FragFinding returns the fragmentation finding of a device, if free
// memory is trapped at the end or the cache grew well beyond the allocated
// peak (memory reserved that was never needed at once). Growth is judged
// after the program's last torch.cuda.empty_cache(): what the program
// released itself is not held. Numbers and advice come from end; the
// callsite is who pins the trapped memory, or else who made the allocator
// reserve the free segments; others (the peaks) lend their pinners and
// advice when the pinning blocks are gone by the end; failing all of
// those, the allocation that reserved the segment reaching the reserved
// peak. Every finding has a callsite (or the reason there is none) and a
// fix.
func FragFinding(peak *PeakReport, end *FragReport, others ...*FragReport) []Finding {
	reserved, allocated := peak.ReservedSince.Bytes, peak.AllocatedSince.Bytes
	excess := reserved - allocated
	trapped := significant(end.Trapped, end.Reserved)
	// Growth is known only from a trace that saw it: a cache that was
	// already at its peak when recording began may have served a higher
	// allocated peak that was never recorded.
	grown := peak.ReservedSince.Index >= 0 && significant(excess, reserved)
	if !trapped && !grown {
		return nil
	}
	since := ""
	if peak.EmptyCache >= 0 {
		since = " after the program's last torch.cuda.empty_cache()"
	}
	// The share and the bytes at stake count only what triggered.
	var share float64
	var stake int64
	if grown {
		share, stake = float64(excess)/float64(reserved), excess
	}
	if trapped {
		share, stake = max(share, float64(end.Trapped)/float64(end.Reserved)), max(stake, end.Trapped)
	}
	free := fmt.Sprintf("%s in fully free segments", units.Bytes(end.FreeSegments))
	if end.FreePages > 0 {
		free += fmt.Sprintf(", %s in whole free pages", units.Bytes(end.FreePages))
	}
	// The title keeps the peak's figures apart from the end's.
	title := fmt.Sprintf("%s of the %s reserved at the %s is trapped in partly used segments (%s)",
		units.Bytes(end.Trapped), units.Bytes(end.Reserved), end.When, free)
	if grown {
		title = fmt.Sprintf("the cache grew to %s%s with at most %s allocated at once, %s never needed at one time; at the %s %s is reserved: %s, %s trapped in partly used ones",
			units.Bytes(reserved), since, units.Bytes(allocated), units.Bytes(excess), end.When, units.Bytes(end.Reserved), free, units.Bytes(end.Trapped))
	}
	fd := Finding{
		Kind:     KindFragmentation,
		Severity: gradeShare(share, stake, 0.5, 0.25),
		Title:    title,
		Bytes:    end.Unallocated(),
		Device:   end.Device,
		Evidence: map[string]any{
			"reserved_bytes":       end.Reserved,
			"allocated_bytes":      end.Allocated,
			"free_segment_bytes":   end.FreeSegments,
			"free_page_bytes":      end.FreePages,
			"trapped_bytes":        end.Trapped,
			"pending_free_bytes":   end.PendingFree,
			"private_pool_bytes":   end.PrivatePools,
			"rounding_waste_bytes": end.RoundingWaste,
			"peak_reserved_bytes":  reserved,
			"peak_allocated_bytes": allocated,
			"event":                end.Index,
		},
	}
	if peak.EmptyCache >= 0 {
		fd.Evidence["empty_cache_event"] = peak.EmptyCache
		fd.Evidence["reserved_peak_before_empty_cache_bytes"] = peak.Reserved.Bytes
	}
	advice := slices.Clone(end.Advice)
	// Candidates for blame, best first; the first with a user frame wins.
	var blame []SiteGroup
	if trapped && len(end.Pinned) > 0 {
		blame = append(blame, end.Pinned[0].Pinners...)
	}
	blame = append(blame, end.Creators...)
	for _, o := range others {
		// A moment before the program's last empty_cache() says nothing
		// of the cache it kept.
		if trapped || peak.EmptyCache >= 0 && o.Index <= peak.EmptyCache || !significant(o.Trapped, o.Reserved) || len(o.Pinned) == 0 || len(o.Pinned[0].Pinners) == 0 {
			continue
		}
		g := o.Pinned[0].Pinners[0]
		blame = append(blame, g)
		fd.Evidence["trapped_at_"+strings.ReplaceAll(o.When, " ", "_")+"_bytes"] = o.Trapped
		if grown {
			advice = append(advice, fmt.Sprintf(
				"the cache grew to %s%s although at most %s was allocated at once, because new segments were needed while %s sat trapped at the %s behind blocks from %s; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids that growth",
				units.Bytes(reserved), since, units.Bytes(allocated), units.Bytes(o.Trapped), o.When, g.Place))
		}
		break
	}
	blame = append(blame, SiteGroup{Place: Place{Site: peak.ReservedSite}, Stack: peak.ReservedStack})
	g := blame[0]
	for _, c := range blame {
		if c.Site.Known() {
			g = c
			break
		}
	}
	placeFinding(&fd, g.Place, g.Stack)
	if len(advice) == 0 {
		advice = append(advice, grownFix(peak, since, end.Expandable))
	}
	fd.Fix = strings.Join(advice, "; ")
	return []Finding{fd}
}

// grownFix is the advice for a cache that grew beyond the allocated peak
// when no number at the end says more: where it grew and what stops it.
func grownFix(peak *PeakReport, since string, expandable bool) string {
	what := "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in place and reuse that memory, and torch.cuda.empty_cache() after the phase that grew the cache returns what is left free"
	if expandable {
		what = "expandable segments are already on: call torch.cuda.empty_cache() after the phase that grew the cache, or allocate the largest tensors first and reuse them"
	}
	return fmt.Sprintf("the cache grew to %s%s, the last segment reserved for %s, although at most %s was allocated at once: "+
		"freed blocks stayed cached in sizes that later requests could not use, so new segments were reserved; %s",
		units.Bytes(peak.ReservedSince.Bytes), since, siteName(peak.ReservedSite), units.Bytes(peak.AllocatedSince.Bytes), what)
}
