package diagnose

import (
	"cmp"
	"slices"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// stackDepth is how many user frames a report keeps per callsite: enough to
// see who called the culprit, short enough to read.
const stackDepth = 4

// SiteGroup is a set of live blocks from one place: one line of user code
// reached through one origin (or, for stacks without a user frame, one
// reason).
type SiteGroup struct {
	Place
	Stack []snapshot.Frame // user frames of the group's largest block, innermost first
	Bytes int64            // Σ block sizes
	Count int
	// Largest is the size of the group's largest block.
	Largest uint64
}

// sized is one block (or segment) to group: its place and size.
type sized struct {
	place Place
	size  uint64
}

// groupBySite groups allocations (indices for tl.Allocation) by place.
func groupBySite(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, allocs []int) []SiteGroup {
	return newPlacer(sn, tl, f).group(allocs)
}

// group groups allocations (indices for tl.Allocation) by place.
func (p *placer) group(allocs []int) []SiteGroup {
	items := make([]sized, len(allocs))
	for i, k := range allocs {
		items[i] = sized{p.alloc(k), p.tl.Allocation(k).Size}
	}
	return p.groupSized(items)
}

// groupSized groups items by place, most bytes first; ties keep the order
// of the items, so the result is stable.
func (p *placer) groupSized(items []sized) []SiteGroup {
	byKey := map[string]int{}
	var out []SiteGroup
	for _, it := range items {
		key := it.place.Key()
		g, ok := byKey[key]
		if !ok {
			g = len(out)
			byKey[key] = g
			out = append(out, SiteGroup{Place: it.place})
		}
		grp := &out[g]
		grp.Bytes += int64(it.size)
		grp.Count++
		if it.size > grp.Largest {
			grp.Largest, grp.Place = it.size, it.place
		}
	}
	for i := range out {
		out[i].Stack = p.frames(out[i].Place)
	}
	slices.SortStableFunc(out, func(a, b SiteGroup) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out
}

// siteFinding fills a Finding's callsite fields from a site and its stack;
// a stack without a user frame leaves Callsite nil and says why in the
// evidence.
func siteFinding(fd *Finding, site callsite.Site, stack []snapshot.Frame) {
	fd.Stack = NewStack(stack)
	if site.Known() {
		fr := NewFrame(site.Frame)
		fd.Callsite = &fr
		return
	}
	fd.Evidence["callsite_reason"] = site.String()
}
