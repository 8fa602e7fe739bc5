package replay

import (
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

// inconsistentTrace holds what a trace that does not match its allocator
// brings: an alloc at an address still active (its free was not recorded),
// an alloc outside every segment, and a second free of a block; and a block
// whose size is not whole 512-byte units (it takes the segment's end).
func inconsistentTrace(reps int) *snapshot.Snapshot {
	var evs []snapshot.Event
	for range reps {
		evs = append(evs,
			snapshot.Event{Action: alloc, Addr: a0, Size: 2 * mib, Stack: 1},
			snapshot.Event{Action: alloc, Addr: a0, Size: 4 * mib, Stack: 2},
			ev(alloc, b0, mib),
			ev(alloc, a0+4*mib, 15*mib+mib/2),
		)
		evs = append(evs, free(a0, 4*mib)...)
		evs = append(evs, free(b0, mib)...)
		evs = append(evs, free(a0+4*mib, 15*mib+mib/2)...)
		evs = append(evs, ev(freeDone, a0, 4*mib))
	}
	return build([]seg{{addr: a0, size: 20*mib - 100, blocks: []blk{{20*mib - 100, 0, inactive}}}}, evs)
}

// The replay keeps going through an inconsistent trace: the alloc at an
// active address ends the block there, the alloc outside the segments and
// the free of no block are counted, and the series follow.
func TestReplayInconsistentTrace(t *testing.T) {
	tl, err := Device(inconsistentTrace(1), 0)
	if err != nil {
		t.Fatal(err)
	}
	rest := 16*mib - 100 // the rest of the segment: its remainder is too small to split off
	want := []Allocation{
		{Addr: a0, Size: 2 * mib, Requested: 2 * mib, Start: 0, Free: 1, End: 1, Stack: 1, Origin: Traced},
		{Addr: a0, Size: 4 * mib, Requested: 4 * mib, Start: 1, Free: 4, End: 5, Stack: 2, Origin: Traced},
		{Addr: b0, Size: mib, Requested: mib, Start: 2, Free: 6, End: 7, Origin: Traced},
		{Addr: a0 + 4*mib, Size: rest, Requested: 15*mib + mib/2, Start: 3, Free: 8, End: 9, Origin: Traced},
	}
	if n := tl.NumAllocations(); n != len(want) {
		t.Fatalf("%d allocations, want %d", n, len(want))
	}
	for k, w := range want {
		if got := tl.Allocation(k); got != w {
			t.Errorf("Allocation(%d) = %+v, want %+v", k, got, w)
		}
	}
	wantAllocated := []uint64{2 * mib, 4 * mib, 5 * mib, 5*mib + rest, mib + rest, mib + rest, rest, rest, 0, 0, 0}
	for i, w := range wantAllocated {
		if got := tl.Value(Allocated, i); got != int64(w) {
			t.Errorf("allocated after event %d = %d, want %d", i, got, w)
		}
	}
	// Repeated, the pattern finds the same layout each time: the block of
	// odd size went back whole.
	for _, reps := range []int{1, 3} {
		tl, err := Device(inconsistentTrace(reps), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := map[CaveatKind]int{}
		for _, c := range tl.Caveats {
			got[c.Kind] = c.Count
		}
		if got[LayoutConflict] != 2*reps || got[UnknownAddress] != reps || len(got) != 2 {
			t.Errorf("%d reps: caveats %v, want %d layout conflicts and %d unknown addresses", reps, tl.Caveats, 2*reps, reps)
		}
		// The matcher finds the first conflict (the alloc at an active
		// address), the placer the alloc outside the segments.
		for _, c := range tl.Caveats {
			if want := map[CaveatKind]int{LayoutConflict: 1, UnknownAddress: 2}[c.Kind]; c.Index != want {
				t.Errorf("%d reps: %v first at event %d, want %d", reps, c.Kind, c.Index, want)
			}
		}
	}
}

// The caveats the matcher and the placer count apart add up to what one
// counter would have counted in event order: a kind's first event is the
// one counted before the forward pass, else the earlier of theirs.
func TestCaveatsMergeRun(t *testing.T) {
	counted := func(index, count int) caveatCounter {
		var cc caveatCounter
		for range count {
			cc.add(LayoutConflict, index, 512)
		}
		return cc
	}
	for _, tt := range []struct {
		name                 string
		before, match, place caveatCounter
		want                 Caveat
	}{
		{"none", caveatCounter{}, caveatCounter{}, caveatCounter{}, Caveat{}},
		{"matcher only", caveatCounter{}, counted(7, 2), caveatCounter{}, Caveat{Count: 2, Bytes: 1024, Index: 7}},
		{"placer only", caveatCounter{}, caveatCounter{}, counted(9, 1), Caveat{Count: 1, Bytes: 512, Index: 9}},
		{"matcher first", caveatCounter{}, counted(3, 1), counted(9, 2), Caveat{Count: 3, Bytes: 1536, Index: 3}},
		{"placer first", caveatCounter{}, counted(30, 1), counted(9, 2), Caveat{Count: 3, Bytes: 1536, Index: 9}},
		{"same event", caveatCounter{}, counted(4, 1), counted(4, 1), Caveat{Count: 2, Bytes: 1024, Index: 4}},
		// Counted while undoing the segment events, backwards: its first
		// is the latest, and stays first.
		{"before the pass", counted(500, 1), counted(3, 1), counted(9, 1), Caveat{Count: 3, Bytes: 1536, Index: 500}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cc := tt.before
			cc.mergeRun(&tt.match, &tt.place)
			if got := cc[LayoutConflict]; got != tt.want {
				t.Errorf("merged %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The placer's batches change nothing: the timeline is the same whatever
// their length, with rare allocs at every position of a batch.
func TestReplayBatches(t *testing.T) {
	batchLen := placedBatchLen
	defer func() { placedBatchLen = batchLen }()
	for name, sn := range map[string]*snapshot.Snapshot{
		"inconsistent": inconsistentTrace(50),
		"steps":        stepTrace(20000),
	} {
		want, err := Device(sn, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 3, 7, 1000} {
			placedBatchLen = n
			got, err := Device(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: batches of %d events give another timeline", name, n)
			}
		}
		placedBatchLen = batchLen
	}
}

// A scan in three ranges, merged in order, is the scan of the whole,
// wherever the trace is cut: the same histories in the same order, the
// same counts.
func TestScanRanges(t *testing.T) {
	a, b, c, d := a0, a0+mib, a0+2*mib, a0+3*mib
	tr := snapshot.NewTrace(events(
		ev(freeDone, c, 512), // freed before any alloc
		ev(alloc, a, mib),
		ev(freeReq, b, 512),
		ev(freeReq, a, mib),
		ev(segAlloc, d, 2*mib),
		ev(freeDone, a, mib),
		ev(alloc, a, mib),
		ev(freeDone, c, 512),
		ev(alloc, b, 512),
		ev(freeReq, c, 512),
		ev(freeReq, a, mib),
		ev(alloc, d, 512),
		ev(freeDone, b, 512),
		ev(freeReq, b, 512),
	), nil)
	whole := newAddrScan()
	whole.run(tr, 0, tr.Len())
	for cut1 := range tr.Len() + 1 {
		for cut2 := cut1; cut2 <= tr.Len(); cut2++ {
			first, second, third := newAddrScan(), newAddrScan(), newAddrScan()
			first.run(tr, 0, cut1)
			second.run(tr, cut1, cut2)
			third.run(tr, cut2, tr.Len())
			first.merge(second)
			first.merge(third)
			if !reflect.DeepEqual(first.history, whole.history) || !reflect.DeepEqual(first.addrs, whole.addrs) || first.counts != whole.counts {
				t.Errorf("cut at %d and %d: %+v %v, want %+v %v", cut1, cut2, first.history, first.counts, whole.history, whole.counts)
			}
			for k, addr := range whole.addrs {
				if j, ok := first.index.get(addr); !ok || int(j) != k {
					t.Errorf("cut at %d and %d: address %#x at %d, want %d", cut1, cut2, addr, j, k)
				}
			}
		}
	}
	// The whole scan itself: c's last free is the completed one, b's after
	// its alloc is the completed one though a request follows, a's last
	// alloc is only requested.
	want := []addrHistory{
		{first: 0, lastAlloc: -1, lastFree: freeDone},
		{first: 1, lastAlloc: 6, lastFree: freeReq},
		{first: 2, lastAlloc: 8, lastFree: freeDone},
		{first: 11, lastAlloc: 11},
	}
	if !reflect.DeepEqual(whole.history, want) {
		t.Errorf("histories %+v, want %+v", whole.history, want)
	}
}

// The batches in flight hold a share of the trace's events, between
// minInFlight and maxInFlight, none more than placedBatchLen: 8 of 8192
// to 16384 on 2 cores, 16 of 4096 to 8192 on 16.
func TestStagesBatches(t *testing.T) {
	for _, tc := range []struct{ procs, events, batches, batchLen int }{
		{1, 1000, 8, 8192},
		{2, 3_297_539, 8, 8587}, // the 288 MB bench file
		{2, 11_400_000, 8, 16384},
		{4, 0, 8, 8192},
		{8, 1000, 16, 4096},
		{16, 3_297_539, 16, 4293},
		{16, 11_400_000, 16, 8192}, // the 996 MB bench file
		{64, 100_000_000, 16, 8192},
	} {
		s := stagesOn(tc.procs)
		if got := s.batchLen(tc.events); s.batches != tc.batches || got != tc.batchLen {
			t.Errorf("%d cores, %d events: %d batches of %d events, want %d of %d", tc.procs, tc.events, s.batches, got, tc.batches, tc.batchLen)
		}
	}
}
