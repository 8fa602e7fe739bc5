package report

import (
	"fmt"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// series downsamples tl's allocated and reserved bytes into min/max
// buckets. X is time when the trace has it and it never goes backwards
// at the buckets' starts; otherwise the event index, which is still an
// honest axis.
func (b *Builder) series(tl *replay.Timeline) Series {
	alloc := tl.Downsample(replay.Allocated, b.opts.Buckets)
	res := tl.Downsample(replay.Reserved, b.opts.Buckets)
	s := Series{
		XUnit: "event",
		X:     make([]int64, len(alloc)), First: make([]int, len(alloc)),
		AllocatedMin: make([]int64, len(alloc)), AllocatedMax: make([]int64, len(alloc)),
		ReservedMin: make([]int64, len(alloc)), ReservedMax: make([]int64, len(alloc)),
	}
	for k, bk := range alloc {
		s.X[k] = int64(bk.First)
		s.First[k] = bk.First
		s.AllocatedMin[k], s.AllocatedMax[k] = bk.Min, bk.Max
		s.ReservedMin[k], s.ReservedMax[k] = res[k].Min, res[k].Max
	}
	if len(alloc) == 0 {
		return s
	}
	start := tl.Trace.At(0).TimeUS
	if start <= 0 {
		return s
	}
	xs := make([]int64, len(alloc))
	for k, bk := range alloc {
		xs[k] = tl.Trace.At(bk.First).TimeUS - start
		if k > 0 && xs[k] < xs[k-1] {
			return s
		}
	}
	s.XUnit, s.StartUS, s.X = "us", start, xs
	return s
}

// x is event i's position on s's axis.
func (s Series) x(tr snapshot.Trace, i int) int64 {
	if s.XUnit == "us" {
		return tr.At(i).TimeUS - s.StartUS
	}
	return int64(i)
}

// markers lists the steps, snapshot() calls, OOMs and the allocated
// peak of tl, each kind thinned to at most MaxMarkers.
func (b *Builder) markers(sn *snapshot.Snapshot, tl *replay.Timeline, s Series) []Marker {
	out := []Marker{}
	if tl.Len() == 0 {
		return out
	}
	tr := tl.Trace
	mark := func(kind string, events []int, label func(k int) string) {
		stride := (len(events) + b.opts.MaxMarkers - 1) / b.opts.MaxMarkers
		for k := 0; k < len(events); k += max(stride, 1) {
			out = append(out, Marker{Kind: kind, Event: events[k], X: s.x(tr, events[k]), Label: label(k)})
		}
	}
	steps := diagnose.DetectSteps(sn, tl, b.opts.Filter).Steps
	var starts []int
	for _, st := range steps {
		starts = append(starts, min(st.First, tl.Len()-1))
	}
	mark("step", starts, func(k int) string { return steps[k].Label })

	var snaps, oomEvents []int
	for i, e := range tr.Others() {
		switch e.Action {
		case snapshot.ActionSnapshot:
			snaps = append(snaps, i)
		case snapshot.ActionOOM:
			oomEvents = append(oomEvents, i)
		}
	}
	mark("snapshot", snaps, func(int) string { return "snapshot()" })
	mark("oom", oomEvents, func(k int) string {
		e := tr.At(oomEvents[k])
		return fmt.Sprintf("OOM: %s requested, %s free on the device", units.Bytes(e.Size), units.Bytes(e.Addr))
	})
	peak := tl.Peak(replay.Allocated)
	if peak.Index >= 0 {
		mark("peak", []int{peak.Index}, func(int) string { return "allocated peak" })
	}
	return out
}
