package replay

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/snapshot"
)

// State is a device's allocator state right after one event, in the
// snapshot's own types so that code reading a snapshot reads it too.
type State struct {
	Device int
	Index  int // event index; BeforeRecording: before the first event
	// Segments in address order; blocks cover each segment contiguously.
	Segments []snapshot.Segment
	Blocks   []snapshot.Block
	// Allocation[k] is the index (for Timeline.Allocation) of Blocks[k]
	// (its event indices, stream and origin), or -1 for inactive blocks.
	Allocation []int
	// Orphans counts active blocks that fit in no segment: zero unless the
	// trace contradicts itself.
	Orphans int
}

// liveAllocation is an allocation active at a State's event and its index.
type liveAllocation struct {
	k int
	Allocation
}

// State rebuilds the segments and blocks right after event i
// (BeforeRecording: before the first). It costs O(segment events + blocks
// allocated up to i): the segment events are replayed on the initial
// segments, the live blocks come from the Allocation intervals, and the
// inactive blocks are the gaps between them (the allocator always merges
// adjacent inactive blocks).
func (t *Timeline) State(i int) (*State, error) {
	if i < BeforeRecording || i >= t.Len() {
		return nil, fmt.Errorf("allocator state of device %d: event %d outside the trace's %d events", t.Device, i, t.Len())
	}
	segs := slices.Clone(t.initialSegs)
	for k, idx := range t.segEvents {
		if int(idx) > i {
			break
		}
		segs.apply(t.Trace.At(int(idx)), t.segInfos[k])
	}
	var live []liveAllocation
	for _, k := range t.LiveAt(i) {
		live = append(live, liveAllocation{k, t.Allocation(k)})
	}
	slices.SortFunc(live, func(a, b liveAllocation) int { return cmp.Compare(a.Addr, b.Addr) })

	st := &State{
		Device:   t.Device,
		Index:    i,
		Segments: make([]snapshot.Segment, 0, len(segs)),
		Blocks:   make([]snapshot.Block, 0, 2*len(live)+len(segs)),
	}
	inactive := func(addr, size uint64) {
		st.Blocks = append(st.Blocks, snapshot.Block{Address: addr, Size: size, State: snapshot.Inactive, Stack: snapshot.EmptyStack})
		st.Allocation = append(st.Allocation, -1)
	}
	k := 0
	for _, s := range segs {
		seg := snapshot.Segment{
			Device: t.Device, Address: s.addr, TotalSize: s.size,
			Stream: s.stream, Type: s.typ, Pool: s.pool, Expandable: s.expandable, Stack: s.stack,
			FirstBlock: len(st.Blocks),
		}
		cur := s.addr
		for ; k < len(live) && live[k].Addr < s.end(); k++ {
			a := &live[k].Allocation
			if a.Addr < cur || a.Addr+a.Size > s.end() {
				st.Orphans++
				continue
			}
			if a.Addr > cur {
				inactive(cur, a.Addr-cur)
			}
			b := snapshot.Block{Address: a.Addr, Size: a.Size, RequestedSize: a.Requested, State: snapshot.ActivePendingFree, Stack: a.Stack}
			if a.AllocatedAt(i) {
				b.State = snapshot.ActiveAllocated
				seg.AllocatedSize += a.Size
			}
			seg.ActiveSize += a.Size
			seg.RequestedSize += a.Requested
			st.Blocks = append(st.Blocks, b)
			st.Allocation = append(st.Allocation, live[k].k)
			cur = a.Addr + a.Size
		}
		if cur < s.end() {
			inactive(cur, s.end()-cur)
		}
		seg.NumBlocks = len(st.Blocks) - seg.FirstBlock
		st.Segments = append(st.Segments, seg)
	}
	st.Orphans += len(live) - k
	return st, nil
}
