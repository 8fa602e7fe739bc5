package diagnose

import (
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// LeakedAllocations returns the indexes (for tl.Allocation) of the blocks
// still allocated at the end of the trace whose callsite r judged a leak:
// their sizes add up to the leak sites' AtEnd. sn, tl and f must be the
// ones r was computed from. It is the selection export writes as a pprof
// profile (pprofout.Allocations(tl, tl.Len()-1, idx)); nil without a leak.
func (r *LeakReport) LeakedAllocations(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) []int {
	leaking := map[string]bool{}
	for _, s := range r.Sites {
		if s.Leak {
			leaking[s.key] = true
		}
	}
	if len(leaking) == 0 {
		return nil
	}
	pl := newPlacer(sn, tl, f) // places as measureSites names them
	var idx []int
	for _, k := range tl.AllocatedAt(replay.LiveAtEnd - 1) {
		if a := tl.Allocation(k); leaking[pl.allocKeys(&a).leak] {
			idx = append(idx, k)
		}
	}
	return idx
}
