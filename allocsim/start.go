package allocsim

import (
	"fmt"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// initialState is the allocator's state at the first kept event of a trace
// that starts late, as the replay rebuilds it from the dump's segments and
// the trace: segments, live and pending blocks by address, the free space
// between them.
func initialState(sn *snapshot.Snapshot, device int) (*replay.State, error) {
	tl, err := replay.Device(sn, device)
	if err != nil {
		return nil, fmt.Errorf("rebuilding the state before the trace: %w", err)
	}
	return tl.State(replay.BeforeRecording)
}

// seed puts st into the model; it returns the blocks held by callers and
// those waiting on record_stream events, by address.
func (m *model) seed(st *replay.State) (live, waiting map[uint64]*block) {
	live, waiting = map[uint64]*block{}, map[uint64]*block{}
	for _, s := range st.Segments {
		if !s.Pool.IsDefault() {
			// A private pool's: fixed bytes (privatePools).
			m.reserved += s.TotalSize
			m.allocated += s.AllocatedSize
			continue
		}
		pool := allocator.Large
		if s.Type == snapshot.Small {
			pool = allocator.Small
		}
		key := poolKey{s.Stream, pool}
		seg := &segment{key: key, fs: m.freeSet(key), base: s.Address, size: s.TotalSize, expandable: s.Expandable}
		if s.Expandable {
			seg.mapped = s.TotalSize
		}
		m.reserved += s.TotalSize
		var prev *block
		for _, sb := range st.Blocks[s.FirstBlock : s.FirstBlock+s.NumBlocks] {
			b := &block{addr: sb.Address, size: sb.Size, requested: sb.RequestedSize, seg: seg, prev: prev, mapped: true}
			if prev != nil {
				prev.next = b
			}
			prev = b
			switch sb.State {
			case snapshot.ActiveAllocated:
				b.allocated = true
				m.allocated += b.size
				live[b.addr] = b
			case snapshot.ActivePendingFree:
				b.pending, b.waited = true, true
				m.pending[b] = struct{}{}
				waiting[b.addr] = b
			default:
				m.insertFree(b)
			}
		}
	}
	m.stats.MaxReserved, m.stats.MaxAllocated, m.stats.AllocatedAtPeak = m.reserved, m.allocated, m.allocated
	return live, waiting
}
