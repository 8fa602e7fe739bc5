package diagnose

import (
	"cmp"
	"math"
	"slices"

	"github.com/vramscope/vramscope/allocsim"
	"github.com/vramscope/vramscope/internal/parallel"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// lastEmptyCache returns the last segment release of tr that the program
// asked for, with torch.cuda.empty_cache() on its stack, or
// BeforeRecording. Releases without it are the allocator's own (freeing
// its cache to retry a failed cudaMalloc), or have no stack to tell.
func lastEmptyCache(sn *snapshot.Snapshot, tr snapshot.Trace) int {
	last := replay.BeforeRecording
	asked := map[snapshot.StackID]bool{}
	for i, e := range tr.Others() {
		if e.Action != snapshot.ActionSegmentFree && e.Action != snapshot.ActionSegmentUnmap {
			continue
		}
		yes, ok := asked[e.Stack]
		if !ok {
			yes = allocsim.CallsEmptyCache(sn, e.Stack)
			asked[e.Stack] = yes
		}
		if yes {
			last = i
		}
	}
	return last
}

// peaksSince are the reserved and allocated peaks after the program's
// last torch.cuda.empty_cache() (lastEmptyCache), or of the whole trace
// when it made none, with that call's event.
func peaksSince(sn *snapshot.Snapshot, tl *replay.Timeline) (emptyCache int, reserved, allocated replay.Peak) {
	emptyCache = lastEmptyCache(sn, tl.Trace)
	if emptyCache < 0 {
		return emptyCache, tl.Peak(replay.Reserved), tl.Peak(replay.Allocated)
	}
	return emptyCache, peakAfter(tl, replay.Reserved, emptyCache), peakAfter(tl, replay.Allocated, emptyCache)
}

// peakAfter is the first event after event e at which series m reaches its
// maximum over the events after e; the value at e when none follows.
func peakAfter(tl *replay.Timeline, m replay.Metric, e int) replay.Peak {
	at := func(i int) replay.Peak {
		return replay.Peak{Index: i, TimeUS: tl.Trace.At(i).TimeUS, Bytes: tl.Value(m, i)}
	}
	p := at(min(e+1, tl.Len()-1))
	for i := p.Index + 1; i < tl.Len(); i++ {
		if v := tl.Value(m, i); v > p.Bytes {
			p = at(i)
		}
	}
	return p
}

// peaksWithout returns tl's allocated peak once per set of blocks, with
// that set removed from the series. The series changes only where a
// removed block is allocated or freed, so the changes are swept along the
// events, all sets in one pass: a trace has millions of events, a line of
// code a few blocks. The pass runs in ranges of the events on every core;
// each range sorts the changes that fall in it and starts from the sum of
// those before it, and the ranges' peaks are joined in order, the first of
// equal ones kept. (One sort of all the changes, 115 k of them for the
// 996 MB bench file's largest line, took 14-65 ms on 16 busy cores.)
func peaksWithout(tl *replay.Timeline, sets ...[]replay.Allocation) []replay.Peak {
	type change struct {
		at, set int // the first event index it applies to, and its set
		delta   int64
	}
	bounds := parallel.Ranges(tl.Len(), rangeLen)
	ranges := len(bounds) - 1
	// rangeOf is the range holding event i (Ranges cuts evenly).
	rangeOf := func(i int) int {
		r := int(int64(i) * int64(ranges) / int64(max(tl.Len(), 1)))
		for r > 0 && i < bounds[r] {
			r--
		}
		for r < ranges-1 && i >= bounds[r+1] {
			r++
		}
		return r
	}
	// Each block's changes, where it is allocated and freed: counted per
	// range first, so that each range's are stored without growing. The
	// appends' copies were 0.10 of explain's 0.48 s of CPU in three runs on
	// one core (996 MB bench file), which now take 0.34 s.
	each := func(a *replay.Allocation, f func(r int, c change)) {
		lo, hi := max(int(a.Start), 0), min(int(a.Free), tl.Len())
		if lo < hi {
			f(rangeOf(lo), change{at: lo, delta: -int64(a.Size)})
			if hi < tl.Len() {
				f(rangeOf(hi), change{at: hi, delta: int64(a.Size)})
			}
		}
	}
	counts := make([]int, ranges)
	for _, removed := range sets {
		for i := range removed {
			each(&removed[i], func(r int, _ change) { counts[r]++ })
		}
	}
	byRange := make([][]change, ranges)
	for r, n := range counts {
		byRange[r] = make([]change, 0, n)
	}
	peaks := make([]replay.Peak, len(sets))
	for s, removed := range sets {
		initial := tl.Initial.Allocated
		for i := range removed {
			a := &removed[i]
			if a.AllocatedAt(replay.BeforeRecording) {
				initial -= int64(a.Size)
			}
			each(a, func(r int, c change) {
				c.set = s
				byRange[r] = append(byRange[r], c)
			})
		}
		peaks[s] = replay.Peak{Index: replay.BeforeRecording, Bytes: initial}
	}
	// start[r][s] is what set s's changes before range r add up to.
	start := make([][]int64, ranges)
	sum := make([]int64, len(sets))
	for r, cs := range byRange {
		start[r] = slices.Clone(sum)
		for _, c := range cs {
			sum[c.set] += c.delta
		}
	}
	parts := make([][]replay.Peak, ranges)
	parallel.Do(bounds, func(part, lo, hi int) {
		changes := byRange[part]
		slices.SortFunc(changes, func(a, b change) int { return cmp.Compare(a.at, b.at) })
		off := start[part]
		local := make([]replay.Peak, len(sets))
		for s := range local {
			local[s].Bytes = math.MinInt64
		}
		next := 0
		for from, end := range replay.Stretches(lo, hi) {
			// A stretch without changes whose highest value stays at or
			// below every set's peak so far cannot raise one: it is
			// skipped on its blocks' largest offsets (most of the trace;
			// reading every value took 0.07-0.11 s of one core's explain
			// of the 996 MB bench file).
			if next == len(changes) || changes[next].at >= end {
				top := tl.MaxIn(replay.Allocated, from, end)
				below := true
				for s := range local {
					below = below && top+off[s] <= local[s].Bytes
				}
				if below {
					continue
				}
			}
			for i := from; i < end; i++ {
				for ; next < len(changes) && changes[next].at == i; next++ {
					off[changes[next].set] += changes[next].delta
				}
				v := tl.Value(replay.Allocated, i)
				for s := range local {
					if v+off[s] > local[s].Bytes {
						local[s] = replay.Peak{Index: i, TimeUS: tl.Trace.At(i).TimeUS, Bytes: v + off[s]}
					}
				}
			}
		}
		parts[part] = local
	})
	for _, local := range parts {
		for s, p := range local {
			if p.Bytes > peaks[s].Bytes {
				peaks[s] = p
			}
		}
	}
	return peaks
}

// rangeLen is the fewest allocations or events a range of a pass split
// across cores holds: a trace of a few thousand events is one range. A
// variable for tests to split small traces.
var rangeLen = 1 << 16

// maxLineTries bounds the transient callsites at the peak that are tried
// for Line, largest first; each try is a pass over the trace.
const maxLineTries = 3

// bestLine returns the transient callsite among the largest at the peak
// whose blocks, all removed from the trace, lower the peak most; nil if
// none lowers it. Places are matched by key, as placer.group made them.
// The blocks are found in ranges of the allocations on every core, each
// with a placer of its own, and joined in range order.
func bestLine(pl *placer, peak int64, groups []SiteGroup) *TransientLine {
	groups = groups[:min(len(groups), maxLineTries)]
	want := map[string]int{}
	inCall := false // a group is a backward() call's place
	for i, g := range groups {
		want[g.Key()] = i
		inCall = inCall || g.Backward != nil
	}
	tl := pl.tl
	bounds := parallel.Ranges(tl.NumAllocations(), rangeLen)
	// Each range lists its blocks' allocation indices, 4 bytes a block:
	// appending whole Allocations grew and copied 56 bytes a block (15 ms
	// of analyze's 2.25 s of CPU on the 996 MB bench file, 2 cores).
	parts := make([][][]int32, len(bounds)-1)
	parallel.Do(bounds, func(part, lo, hi int) {
		pl := pl
		if part > 0 {
			pl = newPlacer(pl.sn, tl, pl.f)
		}
		blocks := make([][]int32, len(groups))
		// The group of each stack whose blocks all have its own keys (-2:
		// not known yet, -1: none of groups): a string's hash and a whole
		// Allocation per block cost bestLine half its time on the 996 MB
		// bench file.
		byStack := make([]int32, pl.sn.NumStacks())
		for s := range byStack {
			byStack[s] = -2
		}
		for k := lo; k < hi; k++ {
			start, free, _ := tl.Lifetime(k)
			if start == replay.BeforeRecording || free == replay.LiveAtEnd {
				continue
			}
			// A traced block's stack is its alloc event's.
			stack := tl.Trace.StackAt(start)
			i := byStack[stack]
			if i == -2 {
				ks, engine := pl.ownKeys(stack)
				g, wanted := want[ks.key]
				// A block the engine may have allocated is its call's,
				// if it was in one: the call decides only if a group is a
				// call's place or the stack's own is wanted. Else no
				// block of the stack is, and no scan for calls is needed
				// (most of bestLine's time on the 996 MB bench file).
				own := !engine || !inCall && !wanted
				if !own {
					ks = pl.keysAt(stack, int32(start))
					g, wanted = want[ks.key]
				}
				i = -1
				if wanted {
					i = int32(g)
				}
				if own {
					byStack[stack] = i
				}
			}
			if i >= 0 {
				blocks[i] = append(blocks[i], int32(k))
			}
		}
		parts[part] = blocks
	})
	blocks := make([][]replay.Allocation, len(groups))
	for i := range blocks {
		n := 0
		for _, p := range parts {
			n += len(p[i])
		}
		blocks[i] = make([]replay.Allocation, 0, n)
		for _, p := range parts {
			for _, k := range p[i] {
				blocks[i] = append(blocks[i], tl.Allocation(int(k)))
			}
		}
	}
	var best *TransientLine
	for i, p := range peaksWithout(tl, blocks...) {
		if g := groups[i]; best == nil || p.Bytes < best.PeakWithout.Bytes {
			best = &TransientLine{SiteGroup: g, Blocks: len(blocks[i]), PeakWithout: p}
		}
	}
	if best != nil && best.PeakWithout.Bytes >= peak {
		return nil
	}
	return best
}
