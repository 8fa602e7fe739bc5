package diagnose

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// cacheTrace builds a one-device trace in which the cache grows beyond
// the allocated peak and is released again before the end: 20 MiB of
// weights stay; a 60 MiB tensor gets its own segment and is freed, then a
// 70 MiB one cannot use that segment and gets another (the reserved peak,
// 150 MiB, against an allocated peak of 90 MiB); finally both segments are
// released, by empty_cache() from the script when byProgram is set, by
// the allocator itself otherwise (its release before retrying a failed
// cudaMalloc has the failing allocation's stack, not empty_cache's).
func cacheTrace(byProgram bool) *snapshot.Snapshot {
	const MiB = 1 << 20
	sn := snapshot.New()
	stack := func(frames ...snapshot.Frame) snapshot.StackID {
		ids := make([]snapshot.FrameID, len(frames))
		for i, fr := range frames {
			ids[len(frames)-1-i] = sn.InternFrame(fr)
		}
		return sn.InternStack(ids)
	}
	line := func(fn string, n uint64) snapshot.Frame {
		return snapshot.Frame{Name: fn, Filename: "/home/u/train.py", Line: n}
	}
	load, first, second := stack(line("load_weights", 10)), stack(line("first_batch", 20)), stack(line("grow_cache", 30))
	release := second
	if byProgram {
		release = stack(line("<module>", 40), snapshot.Frame{Name: "empty_cache", Filename: "/venv/lib/python3.12/site-packages/torch/cuda/memory.py", Line: 224})
	}
	const w, a, b = 0x7f0000000000, 0x7f0100000000, 0x7f0200000000
	events := []snapshot.Event{
		{Action: snapshot.ActionSegmentAlloc, Addr: w, Size: 20 * MiB, Stack: load},
		{Action: snapshot.ActionAlloc, Addr: w, Size: 20 * MiB, Stack: load},
		{Action: snapshot.ActionSegmentAlloc, Addr: a, Size: 60 * MiB, Stack: first},
		{Action: snapshot.ActionAlloc, Addr: a, Size: 60 * MiB, Stack: first},
		{Action: snapshot.ActionFreeRequested, Addr: a, Size: 60 * MiB, Stack: first},
		{Action: snapshot.ActionFreeCompleted, Addr: a, Size: 60 * MiB, Stack: first},
		{Action: snapshot.ActionSegmentAlloc, Addr: b, Size: 70 * MiB, Stack: second},
		{Action: snapshot.ActionAlloc, Addr: b, Size: 70 * MiB, Stack: second},
		{Action: snapshot.ActionFreeRequested, Addr: b, Size: 70 * MiB, Stack: second},
		{Action: snapshot.ActionFreeCompleted, Addr: b, Size: 70 * MiB, Stack: second},
		{Action: snapshot.ActionSegmentFree, Addr: a, Size: 60 * MiB, Stack: release},
		{Action: snapshot.ActionSegmentFree, Addr: b, Size: 70 * MiB, Stack: release},
	}
	for i := range events {
		events[i].TimeUS = int64(1000 + 10*i)
	}
	sn.Traces = []snapshot.Trace{snapshot.NewTrace(events, nil)}
	sn.Blocks = []snapshot.Block{{Address: w, Size: 20 * MiB, RequestedSize: 20 * MiB, State: snapshot.ActiveAllocated, Stack: load}}
	sn.Segments = []snapshot.Segment{{
		Address: w, TotalSize: 20 * MiB, AllocatedSize: 20 * MiB, ActiveSize: 20 * MiB, RequestedSize: 20 * MiB,
		Stream: sn.InternStream(0), Stack: load, FirstBlock: 0, NumBlocks: 1,
	}}
	return sn
}

// TestFragCacheReleased checks that a cache the program emptied itself is
// no fragmentation, and that one the allocator released still is, with a
// place and a fix although nothing is left to advise on at the end.
func TestFragCacheReleased(t *testing.T) {
	for _, byProgram := range []bool{true, false} {
		sn := cacheTrace(byProgram)
		tl, err := replay.Device(sn, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Explain(sn, tl, testFilter(t))
		if err != nil {
			t.Fatal(err)
		}
		if r.Peak.Reserved.Bytes != 150<<20 || r.Peak.Allocated.Bytes != 90<<20 {
			t.Fatalf("peaks: reserved %d, allocated %d; want 150 and 90 MiB", r.Peak.Reserved.Bytes, r.Peak.Allocated.Bytes)
		}
		var frag []Finding
		for _, fd := range r.Findings {
			if fd.Kind == KindFragmentation {
				frag = append(frag, fd)
			}
		}
		if byProgram {
			if r.Peak.EmptyCache != tl.Len()-1 || r.Peak.ReservedSince.Bytes != 20<<20 {
				t.Errorf("empty_cache() at event %d, reserved since %d; want the last event and 20 MiB", r.Peak.EmptyCache, r.Peak.ReservedSince.Bytes)
			}
			if len(frag) != 0 {
				t.Errorf("the program's own empty_cache() released the cache, yet: %+v", frag)
			}
			continue
		}
		if r.Peak.EmptyCache != replay.BeforeRecording {
			t.Errorf("the allocator's own release counted as empty_cache() at event %d", r.Peak.EmptyCache)
		}
		if len(frag) != 1 {
			t.Fatalf("%d fragmentation findings, want 1", len(frag))
		}
		fd := frag[0]
		want := "the cache grew to 150.00 MiB, the last segment reserved for grow_cache (/home/u/train.py:30), although at most 90.00 MiB was allocated at once"
		if fd.Callsite == nil || fd.Callsite.Function != "grow_cache" || !strings.Contains(fd.Fix, want) {
			t.Errorf("blamed %+v, fix %q; want grow_cache and %q", fd.Callsite, fd.Fix, want)
		}
	}
}

// TestFragFindingsHavePlaceAndFix checks, on every fixture with a trace,
// that each fragmentation finding names a callsite or says why there is
// none, and has a fix.
func TestFragFindingsHavePlaceAndFix(t *testing.T) {
	files := fixtureFiles(t)
	for _, file := range files {
		sn, tls := replayFile(t, file)
		for _, tl := range tls {
			if tl.Len() == 0 {
				continue
			}
			r, err := Explain(sn, tl, testFilter(t))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, fd := range r.Findings {
				if fd.Kind != KindFragmentation {
					continue
				}
				if fd.Callsite == nil && fd.Evidence["callsite_reason"] == nil || fd.Fix == "" {
					t.Errorf("%s: %q has callsite %v, reason %v, fix %q", file, fd.Title, fd.Callsite, fd.Evidence["callsite_reason"], fd.Fix)
				}
			}
		}
	}
}
