package analyze

import (
	"fmt"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/snapshot"
)

// siteSnapshot builds one snapshot of a 1 GiB segment holding blocks of
// size bytes from cache_result, each holding requested bytes.
func siteSnapshot(blocks int, size, requested uint64) *snapshot.Snapshot {
	sn := snapshot.New()
	stack := sn.InternStack([]snapshot.FrameID{sn.InternFrame(snapshot.Frame{Name: "cache_result", Filename: "/app/train.py", Line: 20})})
	const seg, gib = uint64(0x7f0000000000), uint64(1 << 30)
	next, alloc, req := seg, uint64(0), uint64(0)
	for range blocks {
		sn.Blocks = append(sn.Blocks, snapshot.Block{Address: next, Size: size, RequestedSize: requested, State: snapshot.ActiveAllocated, Stack: stack})
		next += size
		alloc += size
		req += requested
	}
	sn.Blocks = append(sn.Blocks, snapshot.Block{Address: next, Size: seg + gib - next, State: snapshot.Inactive, Stack: snapshot.EmptyStack})
	sn.Segments = []snapshot.Segment{{Address: seg, TotalSize: gib, AllocatedSize: alloc, ActiveSize: alloc, RequestedSize: req,
		FirstBlock: 0, NumBlocks: len(sn.Blocks)}}
	return sn
}

// TestLeakNeedsRequestedGrowth: a callsite whose blocks grow from one
// snapshot to the next while the bytes asked for stay the same holds the
// same tensors in blocks rounded differently, which is no leak; the same
// growth in requested bytes is.
func TestLeakNeedsRequestedGrowth(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name      string
		blocks    []int    // at steps 2, 3, 4
		sizes     []uint64 // block size at each step
		requested []uint64 // bytes asked for per block at each step
		leak      bool
	}{
		{"blocks re-rounded", []int{4, 4, 4}, []uint64{8 * mib, 9 * mib, 10 * mib}, []uint64{8 * mib, 8 * mib, 8 * mib}, false},
		{"more tensors each step", []int{4, 8, 12}, []uint64{8 * mib, 8 * mib, 8 * mib}, []uint64{8 * mib, 8 * mib, 8 * mib}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := New(Options{})
			for i := range c.blocks {
				step := i + 2
				in := inputs.Input{Path: fmt.Sprintf("step%d/trainer_rank0_pid7.pickle", step), Kind: inputs.Snapshot,
					Identity: inputs.Identity{Tag: "trainer", Rank: 0, HasRank: true, PID: 7, HasPID: true, Step: step, HasStep: true}}
				a.AddSnapshot(in, siteSnapshot(c.blocks[i], c.sizes[i], c.requested[i]))
			}
			p := a.Report().Processes[0]
			leaks := 0
			for _, f := range p.Findings {
				if f.Kind == diagnose.KindLeak {
					leaks++
				}
			}
			if (leaks > 0) != c.leak || (p.Verdict == Leak) != c.leak {
				t.Errorf("verdict %s with %d leak findings; want leak = %v", p.Verdict, leaks, c.leak)
			}
		})
	}
}
