package analyze

import (
	"fmt"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/snapshot"
)

// stepSnapshot builds one snapshot of a 1 GiB segment holding the
// optimizer state (adam_step, 512 MiB at a step-dependent address: the
// allocator put it elsewhere each time) and `cached` blocks of 8 MiB from
// cache_result.
func stepSnapshot(step int, cached int) *snapshot.Snapshot {
	sn := snapshot.New()
	frame := func(name string, line uint64) snapshot.StackID {
		return sn.InternStack([]snapshot.FrameID{sn.InternFrame(snapshot.Frame{Name: name, Filename: "/app/train.py", Line: line})})
	}
	opt, cache := frame("adam_step", 10), frame("cache_result", 20)
	const seg, mib = uint64(0x7f0000000000), uint64(1 << 20)
	optAt := seg + uint64(step%3)*256*mib // moves between snapshots
	var blocks []snapshot.Block
	add := func(addr, size uint64, st snapshot.BlockState, stack snapshot.StackID) {
		req := uint64(0)
		if st == snapshot.ActiveAllocated {
			req = size
		}
		blocks = append(blocks, snapshot.Block{Address: addr, Size: size, RequestedSize: req, State: st, Stack: stack})
	}
	if optAt > seg {
		add(seg, optAt-seg, snapshot.Inactive, snapshot.EmptyStack)
	}
	add(optAt, 512*mib, snapshot.ActiveAllocated, opt)
	next := optAt + 512*mib
	for range cached {
		add(next, 8*mib, snapshot.ActiveAllocated, cache)
		next += 8 * mib
	}
	add(next, seg+1024*mib-next, snapshot.Inactive, snapshot.EmptyStack)
	var alloc uint64
	for _, b := range blocks {
		if b.State == snapshot.ActiveAllocated {
			alloc += b.Size
		}
	}
	sn.Blocks = blocks
	sn.Segments = []snapshot.Segment{{Address: seg, TotalSize: 1024 * mib, AllocatedSize: alloc,
		ActiveSize: alloc, RequestedSize: alloc, FirstBlock: 0, NumBlocks: len(blocks)}}
	return sn
}

// Seed 003: the optimizer state "moved" between snapshots. Blocks that
// change address but not size from one step to the next are not a leak;
// a callsite beside them that gains blocks every step is.
func TestMovedBlocksAreNotLeaks(t *testing.T) {
	for _, c := range []struct {
		name   string
		cached []int // cache_result blocks at steps 2, 3, 4
		leak   bool
	}{
		{"optimizer state moves", []int{4, 4, 4}, false},
		{"moves beside a leak", []int{4, 8, 12}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := New(Options{})
			for i, n := range c.cached {
				step := i + 2
				in := inputs.Input{Path: fmt.Sprintf("step%d/trainer_rank0_pid7.pickle", step), Kind: inputs.Snapshot,
					Identity: inputs.Identity{Tag: "trainer", Rank: 0, HasRank: true, PID: 7, HasPID: true, Step: step, HasStep: true}}
				a.AddSnapshot(in, stepSnapshot(step, n))
			}
			r := a.Report()
			if len(r.Processes) != 1 {
				t.Fatalf("processes = %d, want 1", len(r.Processes))
			}
			p := r.Processes[0]
			var leaks []string
			for _, f := range p.Findings {
				if f.Kind == diagnose.KindLeak {
					leaks = append(leaks, fmt.Sprintf("%s %d/step", f.Callsite.Function, f.BytesPerStep))
				}
			}
			if !c.leak {
				if p.Verdict != Healthy || len(leaks) != 0 {
					t.Errorf("verdict %s, leaks %v; want healthy and none", p.Verdict, leaks)
				}
				return
			}
			if p.Verdict != Leak || len(leaks) != 1 || leaks[0] != "cache_result 33554432/step" {
				t.Errorf("verdict %s, leaks %v; want one leak: cache_result 33554432/step", p.Verdict, leaks)
			}
		})
	}
}
