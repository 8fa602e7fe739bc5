package analyze

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/vramscope/vramscope/breakdown"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// digest is what the analysis keeps of one snapshot: enough to compare it
// with the process's other snapshots, a small fraction of the snapshot.
type digest struct {
	in inputs.Input
	// endUS is the last trace event's time, which orders snapshots whose
	// names carry neither step nor time; 0 without a trace.
	endUS    int64
	devices  []deviceDigest
	findings []diagnose.Finding // from the snapshot's own trace
	// made is what each traced device's memory is made of.
	made  []breakdown.Report
	notes []string
}

// deviceDigest is one device of a snapshot.
type deviceDigest struct {
	device int
	totals
	// Peaks of the device's trace; valid when traced.
	traced                      bool
	peakAllocated, peakReserved int64
	// sites holds the allocated blocks by site key.
	sites map[string]*siteUse
	// chunks are the reserved ranges, each with the site whose allocation
	// made the allocator reserve it.
	chunks map[block]string
}

// totals are a device's allocator totals at the dump.
type totals struct {
	allocated, reserved, requested int64
	// freeInUsed is free memory inside segments that still hold blocks,
	// which empty_cache() cannot release; freeSegments is in fully free
	// segments, which it can.
	freeInUsed, freeSegments int64
	expandable               bool
}

// siteUse is the allocated memory of one site in one snapshot.
type siteUse struct {
	bytes, requested int64
	blocks           []block
}

// block identifies a block or reserved range by address and size: the same
// pair in two snapshots of a process is the same memory, kept in place.
type block struct{ addr, size uint64 }

// digestSnapshot reduces sn. A trace that cannot be replayed costs the
// peaks and the trace's findings, not the snapshot: the note says so.
func (a *Analyzer) digestSnapshot(in inputs.Input, sn *snapshot.Snapshot) *digest {
	d := &digest{in: in}
	// The replay takes most of the time; what needs only the segments and
	// the events (chunk owners, steps) runs beside it on another core.
	var tls []*replay.Timeline
	var replayErr error
	var wg sync.WaitGroup
	wg.Go(func() { tls, replayErr = replay.Devices(sn) })

	res := a.sites.resolver(a.filter, sn, a.opts.StackDepth, a.rank(in))
	byDevice := map[int]*deviceDigest{}
	dev := func(n int) *deviceDigest {
		if dd, ok := byDevice[n]; ok {
			return dd
		}
		dd := &deviceDigest{device: n, sites: map[string]*siteUse{}, chunks: map[block]string{}}
		byDevice[n] = dd
		return dd
	}
	for i := range sn.Segments {
		seg := &sn.Segments[i]
		dd := dev(seg.Device)
		dd.addSegment(sn, seg, res)
	}
	// What the breakdown reads of the events alone is read meanwhile too.
	steps := map[int]diagnose.Steps{}
	events := make([]*breakdown.Events, len(sn.Traces))
	for n, tr := range sn.Traces {
		if tr.Len() == 0 {
			continue
		}
		wg.Go(func() {
			// On half the cores: the replay's forward pass, beside it, keeps
			// the rest (on 16 cores its stages stalled for 40-60 ms while
			// the events were read on all of them).
			events[n] = breakdown.ReadEvents(sn, n, tr, breakdown.Options{Filter: a.filter, Rules: a.opts.Rules, Cores: runtime.GOMAXPROCS(0) / 2})
		})
		d.endUS = max(d.endUS, tr.At(tr.Len()-1).TimeUS)
		dev(n).attributeChunks(tr, res)
		steps[n] = diagnose.TraceSteps(sn, n, tr, a.filter)
	}

	wg.Wait()
	if replayErr != nil {
		d.notes = append(d.notes, fmt.Sprintf("%s: trace not replayed (%v): no peaks or trace findings from it", in, replayErr))
	}
	for _, tl := range tls {
		if tl.Len() < 2 {
			// Without a trace, or with a single event (no history: what
			// enabled="state" or a restarted history leaves), the replay
			// is the dump alone: that is no peak, and printing it as one
			// says a history was read.
			continue
		}
		dd := dev(tl.Device)
		dd.traced = true
		dd.peakAllocated = tl.Peak(replay.Allocated).Bytes
		dd.peakReserved = tl.Peak(replay.Reserved).Bytes
	}
	findings, made, notes := a.traceFindings(sn, tls, steps, events, a.advised(in))
	d.findings, d.made = findings, made
	d.notes = append(d.notes, notes...)

	for _, n := range sn.Devices() {
		d.devices = append(d.devices, *dev(n))
	}
	return d
}

// addSegment adds a segment's totals, its allocated blocks by site and the
// segment as one reserved chunk, blamed on its own stack until the trace
// says better.
func (dd *deviceDigest) addSegment(sn *snapshot.Snapshot, seg *snapshot.Segment, res *siteResolver) {
	dd.reserved += int64(seg.TotalSize)
	dd.allocated += int64(seg.AllocatedSize)
	dd.requested += int64(seg.RequestedSize)
	dd.expandable = dd.expandable || seg.Expandable
	free := int64(seg.TotalSize - seg.ActiveSize)
	if seg.ActiveSize == 0 {
		dd.freeSegments += free
	} else {
		dd.freeInUsed += free
	}
	dd.chunks[block{seg.Address, seg.TotalSize}] = res.key(seg.Stack)
	for _, b := range sn.SegmentBlocks(seg) {
		if b.State != snapshot.ActiveAllocated {
			continue
		}
		k := res.key(b.Stack)
		u := dd.sites[k]
		if u == nil {
			u = &siteUse{}
			dd.sites[k] = u
		}
		u.bytes += int64(b.Size)
		u.requested += int64(b.RequestedSize)
		u.blocks = append(u.blocks, block{b.Address, b.Size})
	}
}

// attributeChunks replaces the segments' own stacks, which torch often
// leaves empty, with the stacks of the trace events that reserved them:
// the allocation that made the allocator call cudaMalloc (or map pages of
// an expandable segment). Ranges released later in the trace are dropped.
func (dd *deviceDigest) attributeChunks(tr snapshot.Trace, res *siteResolver) {
	live := map[block]snapshot.StackID{}
	for _, e := range tr.Others() {
		b := block{e.Addr, e.Size}
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			live[b] = e.Stack
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			delete(live, b)
		}
	}
	if dd.expandable && len(live) > 0 {
		// An expandable segment is one chunk in the snapshot but many
		// mapped ranges in the trace: blame the ranges.
		clear(dd.chunks)
	}
	for b, stack := range live {
		if _, ok := dd.chunks[b]; ok || dd.expandable {
			dd.chunks[b] = res.key(stack)
		}
	}
}
