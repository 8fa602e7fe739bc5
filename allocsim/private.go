package allocsim

import (
	"cmp"
	"slices"

	"github.com/vramscope/vramscope/snapshot"
)

// privatePools are the address ranges of the segments that a CUDA graph
// capture or a MemPool owned at the dump. Their blocks never serve the
// default pool's requests and the model does not model their pools: a
// replay keeps them as fixed bytes, their segments reserved and released
// where the trace recorded it and their blocks allocated and freed as
// recorded, whatever the settings. A trace does not say which pool an
// allocation used; segments a private pool released before the dump are
// not known, and are replayed as the default pool's.
type privatePools []addrRange

type addrRange struct{ lo, hi uint64 }

func findPrivatePools(sn *snapshot.Snapshot, device int) privatePools {
	var p privatePools
	for i := range sn.Segments {
		if s := &sn.Segments[i]; s.Device == device && !s.Pool.IsDefault() {
			p = append(p, addrRange{s.Address, s.Address + s.TotalSize})
		}
	}
	slices.SortFunc(p, func(a, b addrRange) int { return cmp.Compare(a.lo, b.lo) })
	return p
}

// holds reports whether addr lies in a private pool's segment.
func (p privatePools) holds(addr uint64) bool {
	if len(p) == 0 {
		return false
	}
	i, found := slices.BinarySearchFunc(p, addr, func(r addrRange, a uint64) int { return cmp.Compare(r.lo, a) })
	if found {
		return true
	}
	return i > 0 && addr < p[i-1].hi
}

// bytes is the size of the private pools' segments.
func (p privatePools) bytes() uint64 {
	var n uint64
	for _, r := range p {
		n += r.hi - r.lo
	}
	return n
}

// fixed replays e, an event of a private pool, as recorded: a device call
// as the trace made it, and the block's rounded size in the allocated
// bytes from its alloc to its free (its free_requested, or its
// free_completed in a trace without those).
func (m *model) fixed(e snapshot.Event, hasRequested bool) {
	switch e.Action {
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap, snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		m.emit(e.Action, e.Addr, e.Size)
	case snapshot.ActionAlloc:
		m.allocated += m.s.Round(e.Size)
		m.stats.MaxAllocated = max(m.stats.MaxAllocated, m.allocated)
	case snapshot.ActionFreeRequested:
		m.allocated -= min(m.s.Round(e.Size), m.allocated)
	case snapshot.ActionFreeCompleted:
		if !hasRequested {
			m.allocated -= min(m.s.Round(e.Size), m.allocated)
		}
	}
}
