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

// SiteGroup is a set of live blocks blamed on one line of user code (or, for
// stacks without one, on one reason).
type SiteGroup struct {
	Site  callsite.Site
	Stack []snapshot.Frame // user frames of the group's largest block, innermost first
	Bytes int64            // Σ block sizes
	Count int
	// Largest is the size of the group's largest block.
	Largest uint64
}

// sized is one block (or segment) to group: its stack and size.
type sized struct {
	stack snapshot.StackID
	size  uint64
}

// groupBySite groups allocations (indices for tl.Allocation) by callsite.
func groupBySite(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, allocs []int) []SiteGroup {
	items := make([]sized, len(allocs))
	for i, k := range allocs {
		a := tl.Allocation(k)
		items[i] = sized{a.Stack, a.Size}
	}
	return groupSized(sn, f, items)
}

// groupSized groups items by callsite, most bytes first; ties keep the
// order of the items, so the result is stable.
func groupSized(sn *snapshot.Snapshot, f *callsite.Filter, items []sized) []SiteGroup {
	byKey := map[string]int{}
	var out []SiteGroup
	stacks := []snapshot.StackID{} // stack of each group's largest item
	for _, it := range items {
		site := f.Site(sn, it.stack)
		g, ok := byKey[site.Key()]
		if !ok {
			g = len(out)
			byKey[site.Key()] = g
			out = append(out, SiteGroup{Site: site})
			stacks = append(stacks, it.stack)
		}
		grp := &out[g]
		grp.Bytes += int64(it.size)
		grp.Count++
		if it.size > grp.Largest {
			grp.Largest, stacks[g] = it.size, it.stack
		}
	}
	for i := range out {
		out[i].Stack = f.UserFrames(sn, stacks[i], stackDepth)
	}
	slices.SortStableFunc(out, func(a, b SiteGroup) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out
}

// allocatedAt returns the allocations allocated (not pending free) right
// after event i: the blocks that make up the allocated series there.
func allocatedAt(tl *replay.Timeline, i int) []int {
	live := tl.LiveAt(i)
	out := live[:0]
	for _, k := range live {
		if a := tl.Allocation(k); a.AllocatedAt(i) {
			out = append(out, k)
		}
	}
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
