package replay

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/snapshot"
)

// smallSegmentTrace works a 2 MiB small-pool segment before the trace
// (with a block live at its start) and one the trace creates: blocks split
// and merged on both sides, the segment freed whole and created again at
// the same address, then freed with a block still placed in it (which
// moves every segment to the maps), and allocs at an address inside a
// block's units and of a size that is not whole units.
func smallSegmentTrace() *snapshot.Snapshot {
	c0 := a0 + 2*mib
	evs := events(
		ev(alloc, a0+kib, 3*kib), ev(alloc, a0+4*kib, kib), ev(alloc, a0+5*kib, 512),
		free(a0+4*kib, kib), free(a0+kib, 3*kib), free(a0+5*kib, 512),
		ev(segAlloc, c0, 2*mib),
		ev(alloc, c0, 8*kib), ev(alloc, c0+8*kib, 8*kib), free(c0, 8*kib), ev(alloc, c0, 4*kib),
		free(c0+8*kib, 8*kib), free(c0, 4*kib), ev(segFree, c0, 2*mib),
		ev(segAlloc, c0, 2*mib), ev(alloc, c0+16*kib, kib), ev(segFree, c0, 2*mib),
		ev(alloc, a0+kib+100, 300), free(a0+kib+100, 300),
		ev(alloc, a0+kib, 700), free(a0+kib, 700),
	)
	return build([]seg{{addr: a0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{
		{kib, kib, allocated}, {2*mib - kib, 0, inactive},
	}}}, evs)
}

// unalignedSmallSegment has a 2 MiB small-pool segment whose free ranges
// before the trace start off the units: the maps keep it.
func unalignedSmallSegment() *snapshot.Snapshot {
	evs := events(free(a0, 1000), free(a0+4096, 1000), ev(alloc, a0+4096, 512), free(a0+4096, 512), free(a0+8192, 1000))
	return build([]seg{{addr: a0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{
		{1000, 1000, allocated}, {3096, 0, inactive}, {1000, 1000, allocated}, {3096, 0, inactive},
		{1000, 1000, allocated}, {2*mib - 9192, 0, inactive},
	}}}, evs)
}

// outsideThenSegment places a block in no segment, then creates a small
// segment around it, frees the block there and allocates over it: the
// maps keep its size, and the layout the range its free gives back.
func outsideThenSegment() *snapshot.Snapshot {
	c0 := a0 + 2*mib
	evs := events(ev(alloc, c0+kib, 2*kib), ev(segAlloc, c0, 2*mib), ev(alloc, c0+8*kib, kib),
		free(c0+kib, 2*kib), free(c0+8*kib, kib), ev(alloc, c0+kib, 3*kib), ev(alloc, c0+2*kib, kib))
	return build([]seg{{addr: a0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{{2 * mib, 0, inactive}}}}, evs)
}

// emptySegmentThenSmall creates a segment of no size, which holds no
// address (FuzzReplay's crasher 23cee67b7b1d64c2 had one), then a small
// segment at the same address that blocks split and merge in.
func emptySegmentThenSmall() *snapshot.Snapshot {
	c0 := a0 + 2*mib
	evs := events(ev(segAlloc, c0, 0), ev(segAlloc, c0, 2*mib), ev(alloc, c0, 4*kib), ev(alloc, c0+4*kib, kib),
		free(c0, 4*kib), ev(alloc, c0, 2*kib))
	return build([]seg{{addr: a0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{{2 * mib, 0, inactive}}}}, evs)
}

// Keeping small segments in arrays changes no timeline: every fixture, the
// allocator what-if snapshots, the bench seed and the traces above replay
// the same with the maps alone, on one placer and on shards.
func TestDenseLayout(t *testing.T) {
	paths := testutil.Fixtures(t)
	more, _ := filepath.Glob(filepath.Join("..", "testdata", "allocsim", "out", "*", "*.pickle.gz"))
	paths = append(paths, more...)
	paths = append(paths, filepath.Join("..", "testdata", "scenarios", "out", "bench_source", "bench_source.pickle.gz"))
	snaps := map[string]*snapshot.Snapshot{
		"small":        smallSegmentTrace(),
		"unaligned":    unalignedSmallSegment(),
		"outside":      outsideThenSegment(),
		"empty":        emptySegmentThenSmall(),
		"inconsistent": inconsistentTrace(3),
		"steps":        stepTrace(3000),
	}
	for _, path := range paths {
		snaps[strings.TrimPrefix(path, "../")] = testutil.Snapshot(t, path)
	}
	defer func() { keepDense = true }()
	dense := 0
	for name, sn := range snaps {
		for d := range sn.Devices() {
			var tr snapshot.Trace
			if d < len(sn.Traces) {
				tr = sn.Traces[d]
			}
			for _, st := range []stages{{1, 1, 1, 1}, {4, 2, 3, 16}} {
				keepDense = false
				want := replayDevice(sn, d, tr, st)
				keepDense = true
				got := replayDevice(sn, d, tr, st)
				if got.inexact != want.inexact || !reflect.DeepEqual(got.t, want.t) {
					t.Errorf("%s device %d, %d shards: the dense layout gives another timeline", name, d, st.shards)
				}
			}
			if small(sn) {
				dense++
			}
		}
	}
	if dense < 10 {
		t.Errorf("%d snapshots have a small segment, want 10 or more to compare on", dense)
	}
}

// small reports whether sn has a segment a layout keeps dense.
func small(sn *snapshot.Snapshot) bool {
	for _, s := range sn.Segments {
		if denseKept(&segment{addr: s.Address, size: s.TotalSize, segmentInfo: segmentInfo{expandable: s.Expandable}}) {
			return true
		}
	}
	return false
}
