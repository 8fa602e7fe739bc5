package report

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// StateOf is the allocator state of tl's device right after event i
// (replay.BeforeRecording: before the first event), labelled label.
func (b *Builder) StateOf(sn *snapshot.Snapshot, tl *replay.Timeline, i int, label string) (State, error) {
	st, err := tl.State(i)
	if err != nil {
		return State{}, fmt.Errorf("allocator state %s: %w", label, err)
	}
	return b.state(sn, label, i, st.Segments, st.Blocks), nil
}

// endState is the state the snapshot itself recorded for tl's device: at
// the dump the snapshot is ground truth, the replay a reconstruction.
func (b *Builder) endState(sn *snapshot.Snapshot, tl *replay.Timeline) State {
	var segs []snapshot.Segment
	for _, s := range sn.Segments {
		if s.Device == tl.Device {
			segs = append(segs, s)
		}
	}
	return b.state(sn, "end", tl.Len()-1, segs, sn.Blocks)
}

// state converts segments (whose FirstBlock index blocks) into rows.
func (b *Builder) state(sn *snapshot.Snapshot, label string, event int, segs []snapshot.Segment, blocks []snapshot.Block) State {
	st := State{Label: label, Event: event, Segments: []Segment{}, Sites: []Site{}}
	siteIndex := map[string]int{}
	site := func(stack snapshot.StackID) int {
		s := b.opts.Filter.Site(sn, stack)
		name := s.String()
		if k, ok := siteIndex[name]; ok {
			return k
		}
		frames := []string{}
		for _, f := range b.opts.Filter.UserFrames(sn, stack, b.opts.StackDepth) {
			frames = append(frames, f.String())
		}
		siteIndex[name] = len(st.Sites)
		st.Sites = append(st.Sites, Site{Label: name, Stack: frames})
		return siteIndex[name]
	}
	keep := b.keptSegments(segs)
	for k := range segs {
		s := &segs[k]
		st.ReservedBytes += int64(s.TotalSize)
		st.AllocatedBytes += int64(s.AllocatedSize)
		if !keep[k] {
			st.Truncated++
			continue
		}
		row := Segment{Address: s.Address, Size: s.TotalSize, Pool: poolLabel(s), Stream: sn.Stream(s.Stream), Blocks: []Block{}}
		for _, bl := range blocks[s.FirstBlock : s.FirstBlock+s.NumBlocks] {
			out := Block{Offset: bl.Address - s.Address, Size: bl.Size, State: "free", Site: -1}
			if bl.State.Active() {
				out.Requested = bl.RequestedSize
				out.State = "allocated"
				if bl.State == snapshot.ActivePendingFree {
					out.State = "pending_free"
				}
				out.Site = site(bl.Stack)
			}
			row.Blocks = append(row.Blocks, out)
		}
		st.Segments = append(st.Segments, row)
	}
	return st
}

// keptSegments chooses which segments to draw: all of them when their
// blocks fit in MaxBlocks, else the largest segments that fit, since a
// person looks for where the bytes are.
func (b *Builder) keptSegments(segs []snapshot.Segment) []bool {
	keep := make([]bool, len(segs))
	order := make([]int, len(segs))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(segs[y].TotalSize, segs[x].TotalSize) })
	budget := b.opts.MaxBlocks
	for _, k := range order {
		if segs[k].NumBlocks <= budget {
			keep[k] = true
			budget -= segs[k].NumBlocks
		}
	}
	return keep
}

// poolLabel names a segment's pool as people know it.
func poolLabel(s *snapshot.Segment) string {
	out := s.Type.String()
	if !s.Pool.IsDefault() {
		out += " pool " + s.Pool.String()
	}
	if s.Expandable {
		out += " expandable"
	}
	return out
}
