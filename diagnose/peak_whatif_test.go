package diagnose

import (
	"cmp"
	"maps"
	"slices"
	"testing"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/replay/replaytest"
)

// TestPeaksWithoutSkips checks peaksWithout, which skips the stretches of
// events that cannot raise a peak, against every event's value read one
// by one, on every format and scenario fixture, with the blocks of each
// trace's three commonest stacks taken out in turn.
func TestPeaksWithoutSkips(t *testing.T) {
	defer func(n int) { rangeLen = n }(rangeLen)
	rangeLen = 1000
	skipped := 0
	for d := range replaytest.Fixtures(t) {
		tl := d.Tl
		byStack := map[int][]replay.Allocation{}
		for k := range tl.NumAllocations() {
			a := tl.Allocation(k)
			byStack[int(a.Stack)] = append(byStack[int(a.Stack)], a)
		}
		stacks := slices.SortedFunc(maps.Keys(byStack), func(a, b int) int {
			return cmp.Or(cmp.Compare(len(byStack[b]), len(byStack[a])), cmp.Compare(a, b))
		})
		var sets [][]replay.Allocation
		for _, s := range stacks[:min(3, len(stacks))] {
			sets = append(sets, byStack[s])
		}
		got := peaksWithout(tl, sets...)
		for s, set := range sets {
			if want := peakWithoutByEvent(tl, set); got[s] != want {
				t.Errorf("%s device %d, set %d: peaksWithout = %+v, every event read: %+v", d.File, tl.Device, s, got[s], want)
			}
		}
		if tl.Len() >= 4*replay.StretchLen {
			skipped++
		}
	}
	if skipped < 10 {
		t.Errorf("%d traces had four stretches to skip, want 10+", skipped)
	}
}

// peakWithoutByEvent is the first highest allocated value with removed's
// blocks taken out, each event's value computed on its own: what the
// removed blocks hold after each event is summed from their starts and
// frees first.
func peakWithoutByEvent(tl *replay.Timeline, removed []replay.Allocation) replay.Peak {
	n := tl.Len()
	held := make([]int64, n+1) // held[i] - held[i-1]: the change at event i
	initial := tl.Value(replay.Allocated, replay.BeforeRecording)
	for _, a := range removed {
		if a.AllocatedAt(replay.BeforeRecording) {
			initial -= int64(a.Size)
		}
		lo, hi := max(int(a.Start), 0), min(int(a.Free), n)
		if lo < hi {
			held[lo] += int64(a.Size)
			held[hi] -= int64(a.Size)
		}
	}
	best := replay.Peak{Index: replay.BeforeRecording, Bytes: initial}
	sum := int64(0)
	for i := range n {
		sum += held[i]
		if v := tl.Value(replay.Allocated, i) - sum; v > best.Bytes {
			best = replay.Peak{Index: i, TimeUS: tl.Trace.At(i).TimeUS, Bytes: v}
		}
	}
	return best
}
