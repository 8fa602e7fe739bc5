package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// PeakReport is when and why one device's memory was highest.
type PeakReport struct {
	Device    int
	Allocated replay.Peak // allocated bytes: torch's max_memory_allocated
	Reserved  replay.Peak // reserved bytes: torch's max_memory_reserved
	// AllocatedAtReservedPeak is the allocated series at the reserved
	// peak; the difference is what the cache held on top of live tensors.
	AllocatedAtReservedPeak int64
	End                     replay.Sample // usage after the last event
	// Complete is true when the trace starts with an empty allocator and
	// no reconstruction caveat: recording began at process start, so
	// Allocated.Bytes equals max_memory_allocated. Otherwise the real peak
	// may predate the trace and Allocated is a lower bound.
	Complete bool
	// Site is the callsite of the event that reached the allocated peak.
	Site callsite.Site

	// EmptyCache is the last event at which the program released cached
	// segments itself, with torch.cuda.empty_cache(); BeforeRecording when
	// it did not in the trace. ReservedSince and AllocatedSince are the
	// peaks after it: what the cache grew to and kept, which is what
	// fragmentation is judged on (they equal Reserved and Allocated
	// without an empty_cache()).
	EmptyCache                    int
	ReservedSince, AllocatedSince replay.Peak
	// ReservedSite is the callsite of the allocation that made the
	// allocator reserve the segment that reached ReservedSince, and
	// ReservedStack its user frames.
	ReservedSite  callsite.Site
	ReservedStack []snapshot.Frame

	// The blocks allocated at the allocated peak, by callsite. Persistent
	// blocks outlive the trace on one side (allocated before it or still
	// allocated at its end); transient ones are born and freed within it,
	// so a different schedule (chunking, freeing earlier) could avoid them.
	Persistent, Transient           []SiteGroup
	PersistentBytes, TransientBytes int64

	// Largest is the largest transient block at the peak (nil if none).
	Largest *Transient
	// Line is set when removing Largest saves little (the next block of
	// the same line reaches the peak again): the transient line of code
	// whose blocks, all removed, lower the peak most. Nil when Largest
	// saves enough, or no line helps.
	Line *TransientLine
}

// TransientLine is one callsite's transient blocks, over the whole trace,
// and what removing them all gains: what computing that line in chunks
// would.
type TransientLine struct {
	SiteGroup // its blocks allocated at the peak
	// Blocks counts the site's transient blocks in the trace.
	Blocks      int
	PeakWithout replay.Peak
}

// Transient is one transient block of the peak and what removing it gains.
type Transient struct {
	Alloc     int // index for Timeline.Allocation
	Site      callsite.Site
	Stack     []snapshot.Frame
	Bytes     int64 // block size
	Requested int64
	// PeakWithout is the allocated peak of the same trace with this block
	// never allocated: the gain of chunking it or freeing it before the
	// next big allocation (seed 002).
	PeakWithout replay.Peak
}

// Saving is how much lower the peak would be without the block.
func (t *Transient) Saving(peak int64) int64 { return peak - t.PeakWithout.Bytes }

// worthIt reports whether removing the block saves enough of peak to be
// advice.
func (t *Transient) worthIt(peak int64) bool {
	return float64(t.Saving(peak)) >= minPeakSaving*float64(peak)
}

// Peak analyses tl's allocated and reserved peaks.
func Peak(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) *PeakReport {
	r := &PeakReport{
		Device:    tl.Device,
		Allocated: tl.Peak(replay.Allocated),
		Reserved:  tl.Peak(replay.Reserved),
		End:       tl.At(tl.Len() - 1),
		Complete:  tl.Initial == replay.Sample{} && len(tl.Caveats) == 0,
	}
	r.AllocatedAtReservedPeak = tl.Value(replay.Allocated, r.Reserved.Index)
	r.Site = callsite.Site{Depth: -1, Reason: "the peak is the state before recording started"}
	if i := r.Allocated.Index; i >= 0 {
		r.Site = f.Site(sn, tl.Trace.At(i).Stack)
	}
	r.EmptyCache = lastEmptyCache(sn, tl.Trace)
	r.ReservedSince, r.AllocatedSince = r.Reserved, r.Allocated
	if r.EmptyCache >= 0 {
		r.ReservedSince = peakAfter(tl, replay.Reserved, r.EmptyCache)
		r.AllocatedSince = peakAfter(tl, replay.Allocated, r.EmptyCache)
	}
	r.ReservedSite = callsite.Site{Depth: -1, Reason: "the reserved peak is the state before recording started, so no stack says who reserved it"}
	if i := r.ReservedSince.Index; i >= 0 {
		id := tl.Trace.At(i).Stack
		r.ReservedSite, r.ReservedStack = f.Site(sn, id), f.UserFrames(sn, id, stackDepth)
	}

	var persistent, transient []int
	best := -1 // the largest transient block
	var bestAlloc replay.Allocation
	for _, k := range allocatedAt(tl, r.Allocated.Index) {
		a := tl.Allocation(k)
		if a.Start == replay.BeforeRecording || a.Free == replay.LiveAtEnd {
			persistent = append(persistent, k)
			r.PersistentBytes += int64(a.Size)
			continue
		}
		transient = append(transient, k)
		r.TransientBytes += int64(a.Size)
		// Largest first; the earliest born wins a tie (the upcast, not the
		// op that consumes it).
		if best < 0 || a.Size > bestAlloc.Size {
			best, bestAlloc = k, a
		}
	}
	r.Persistent = groupBySite(sn, tl, f, persistent)
	r.Transient = groupBySite(sn, tl, f, transient)

	if best >= 0 {
		a := &bestAlloc
		r.Largest = &Transient{
			Alloc: best, Site: f.Site(sn, a.Stack), Stack: f.UserFrames(sn, a.Stack, stackDepth),
			Bytes: int64(a.Size), Requested: int64(a.Requested),
			PeakWithout: peaksWithout(tl, []replay.Allocation{*a})[0],
		}
		if !r.Largest.worthIt(r.Allocated.Bytes) {
			r.Line = bestLine(sn, tl, f, r.Allocated.Bytes, r.Transient)
		}
	}
	return r
}

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
			yes = slices.ContainsFunc(sn.Stack(e.Stack), func(id snapshot.FrameID) bool {
				fr := sn.Frames[id]
				return fr.Name == "empty_cache" && strings.HasSuffix(strings.ReplaceAll(fr.Filename, `\`, "/"), "torch/cuda/memory.py")
			})
			asked[e.Stack] = yes
		}
		if yes {
			last = i
		}
	}
	return last
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
// removed block is allocated or freed, so the changes are sorted and swept
// along the events, all sets in one pass: a trace has millions of events,
// a line of code a few blocks.
func peaksWithout(tl *replay.Timeline, sets ...[]replay.Allocation) []replay.Peak {
	type change struct {
		at, set int // the first event index it applies to, and its set
		delta   int64
	}
	var changes []change
	peaks := make([]replay.Peak, len(sets))
	for s, removed := range sets {
		initial := tl.Initial.Allocated
		for _, a := range removed {
			if a.AllocatedAt(replay.BeforeRecording) {
				initial -= int64(a.Size)
			}
			lo, hi := max(int(a.Start), 0), min(int(a.Free), tl.Len())
			if lo < hi {
				changes = append(changes, change{lo, s, -int64(a.Size)}, change{hi, s, int64(a.Size)})
			}
		}
		peaks[s] = replay.Peak{Index: replay.BeforeRecording, Bytes: initial}
	}
	slices.SortFunc(changes, func(a, b change) int { return cmp.Compare(a.at, b.at) })
	off := make([]int64, len(sets))
	next := 0
	for i := range tl.Len() {
		for ; next < len(changes) && changes[next].at == i; next++ {
			off[changes[next].set] += changes[next].delta
		}
		v := tl.Value(replay.Allocated, i)
		for s := range peaks {
			if v+off[s] > peaks[s].Bytes {
				peaks[s] = replay.Peak{Index: i, TimeUS: tl.Trace.At(i).TimeUS, Bytes: v + off[s]}
			}
		}
	}
	return peaks
}

// maxLineTries bounds the transient callsites at the peak that are tried
// for Line, largest first; each try is a pass over the trace.
const maxLineTries = 3

// bestLine returns the transient callsite among the largest at the peak
// whose blocks, all removed from the trace, lower the peak most; nil if
// none lowers it. Sites are matched by key, as groupBySite made them.
func bestLine(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, peak int64, groups []SiteGroup) *TransientLine {
	groups = groups[:min(len(groups), maxLineTries)]
	want := map[string]int{}
	for i, g := range groups {
		want[g.Site.Key()] = i
	}
	blocks := make([][]replay.Allocation, len(groups))
	keys := map[snapshot.StackID]string{}
	for k := range tl.NumAllocations() {
		a := tl.Allocation(k)
		if a.Start == replay.BeforeRecording || a.Free == replay.LiveAtEnd {
			continue
		}
		key, ok := keys[a.Stack]
		if !ok {
			key = f.Site(sn, a.Stack).Key()
			keys[a.Stack] = key
		}
		if i, ok := want[key]; ok {
			blocks[i] = append(blocks[i], a)
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

// minPeakSaving is the share of the peak that a what-if must save to be
// advice: trimming a block that lowers 32 GiB by 5 MiB, or by nothing
// because the next layer's block of the same size reaches the same peak,
// is no fix.
const minPeakSaving = 0.01

// maxPeakHolders is how many persistent callsites a peak finding names.
const maxPeakHolders = 3

// Findings returns the peak finding. Where removing the largest transient
// block lowers the peak, it is that block and its gain, blamed on its
// callsite; failing that, the line of code whose transient blocks, all
// removed, lower it; otherwise the peak is set by the blocks that stay
// allocated, and the finding names them instead.
func (r *PeakReport) Findings() []Finding {
	if r.Allocated.Bytes <= 0 {
		return nil
	}
	if t := r.Largest; t != nil && t.worthIt(r.Allocated.Bytes) {
		return []Finding{r.transientFinding(t)}
	}
	if l := r.Line; l != nil && float64(r.Allocated.Bytes-l.PeakWithout.Bytes) >= minPeakSaving*float64(r.Allocated.Bytes) {
		return []Finding{r.lineFinding(l)}
	}
	if len(r.Persistent) == 0 {
		return nil
	}
	return []Finding{r.persistentFinding()}
}

// evidence is what every peak finding quotes.
func (r *PeakReport) evidence() map[string]any {
	return map[string]any{
		"peak_allocated_bytes": r.Allocated.Bytes,
		"peak_event":           r.Allocated.Index,
		"peak_reserved_bytes":  r.Reserved.Bytes,
		"persistent_bytes":     r.PersistentBytes,
		"transient_bytes":      r.TransientBytes,
		"recording_from_start": r.Complete,
		"transient_callsites":  len(r.Transient),
		"persistent_callsites": len(r.Persistent),
		"end_allocated_bytes":  r.End.Allocated,
		"peak_callsite":        r.Site.String(),
	}
}

// transientFinding is the peak finding of a transient block whose removal
// lowers the peak.
func (r *PeakReport) transientFinding(t *Transient) Finding {
	saving := t.Saving(r.Allocated.Bytes)
	share := float64(saving) / float64(r.Allocated.Bytes)
	ev := r.evidence()
	ev["largest_transient_bytes"] = t.Bytes
	ev["peak_without_largest_bytes"] = t.PeakWithout.Bytes
	ev["saving_bytes"] = saving
	ev["largest_requested_bytes"] = t.Requested
	ev["largest_alloc_index"] = t.Alloc
	ev["largest_transient_pct"] = int(share*100 + 0.5)
	fd := Finding{
		Kind:     KindPeak,
		Severity: gradeShare(share, saving, 0.25, 0.10),
		Title: fmt.Sprintf("allocated memory peaks at %s; a transient %s block from %s sits on top of it",
			units.Bytes(r.Allocated.Bytes), units.Bytes(t.Bytes), siteName(t.Site)),
		Bytes:    r.Allocated.Bytes,
		Device:   r.Device,
		Evidence: ev,
		Fix: fmt.Sprintf("%s allocates %s that is freed again before the end; computing it in chunks, or freeing what it replaces before it is created, lowers the peak from %s to %s (-%s)",
			siteName(t.Site), units.Bytes(t.Bytes), units.Bytes(r.Allocated.Bytes), units.Bytes(t.PeakWithout.Bytes), units.Bytes(saving)),
	}
	siteFinding(&fd, t.Site, t.Stack)
	return fd
}

// lineFinding is the peak finding of a line of code whose transient blocks
// take turns at the peak: removing the largest one saves little, removing
// them all saves more.
func (r *PeakReport) lineFinding(l *TransientLine) Finding {
	saving := r.Allocated.Bytes - l.PeakWithout.Bytes
	share := float64(saving) / float64(r.Allocated.Bytes)
	ev := r.evidence()
	ev["line_transient_bytes_at_peak"] = l.Bytes
	ev["line_transient_blocks"] = l.Blocks
	ev["peak_without_line_bytes"] = l.PeakWithout.Bytes
	ev["saving_bytes"] = saving
	ev["largest_transient_bytes"] = r.Largest.Bytes
	ev["peak_without_largest_bytes"] = r.Largest.PeakWithout.Bytes
	fd := Finding{
		Kind:     KindPeak,
		Severity: gradeShare(share, saving, 0.25, 0.10),
		Title: fmt.Sprintf("allocated memory peaks at %s; transient blocks from %s (%s at the peak) sit on top of it",
			units.Bytes(r.Allocated.Bytes), siteName(l.Site), units.Bytes(l.Bytes)),
		Bytes:    r.Allocated.Bytes,
		Device:   r.Device,
		Evidence: ev,
		Fix: fmt.Sprintf("%s allocates %s that %s freed again before the end; removing only the largest barely moves the peak, since the next one reaches it again, "+
			"but computing them in chunks, or freeing what they replace before they are created, lowers the peak from %s to %s (-%s)",
			siteName(l.Site), units.Plural(l.Blocks, "block"), isAre(l.Blocks), units.Bytes(r.Allocated.Bytes), units.Bytes(l.PeakWithout.Bytes), units.Bytes(saving)),
	}
	siteFinding(&fd, l.Site, l.Stack)
	return fd
}

// isAre agrees a verb with a count.
func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// persistentFinding is the peak finding when no transient block sets the
// peak: it names the callsites of the blocks that outlive the trace, which
// make it up, blamed on the largest of them with a user frame.
func (r *PeakReport) persistentFinding() Finding {
	holders := r.Persistent[:min(len(r.Persistent), maxPeakHolders)]
	blame := r.Persistent[0]
	for _, g := range r.Persistent {
		if g.Site.Known() {
			blame = g
			break
		}
	}
	names := make([]string, len(holders))
	for i, g := range holders {
		names[i] = fmt.Sprintf("%s from %s", units.Bytes(g.Bytes), siteName(g.Site))
	}
	trim := "No block freed within the trace is part of the peak. "
	ev := r.evidence()
	if t := r.Largest; t != nil {
		after := "stays at " + units.Bytes(t.PeakWithout.Bytes).String()
		if t.PeakWithout.Bytes < r.Allocated.Bytes {
			after = "drops only to " + units.Bytes(t.PeakWithout.Bytes).String()
		}
		trim = fmt.Sprintf("Trimming what is freed within the trace does not lower it: without the largest such block (%s from %s) the peak %s. ",
			units.Bytes(t.Bytes), siteName(t.Site), after)
		ev["largest_transient_bytes"] = t.Bytes
		ev["peak_without_largest_bytes"] = t.PeakWithout.Bytes
		ev["saving_bytes"] = t.Saving(r.Allocated.Bytes)
	}
	ev["largest_persistent_bytes"] = blame.Bytes
	ev["largest_persistent_blocks"] = blame.Count
	fd := Finding{
		Kind:     KindPeak,
		Severity: Low,
		Title: fmt.Sprintf("allocated memory peaks at %s, %s of it in blocks that stay allocated; %s holds %s of them",
			units.Bytes(r.Allocated.Bytes), units.Bytes(r.PersistentBytes), siteName(blame.Site), units.Bytes(blame.Bytes)),
		Bytes:    r.Allocated.Bytes,
		Device:   r.Device,
		Evidence: ev,
		Fix: trim + fmt.Sprintf("The peak is what stays allocated (from before the trace began, or to its end): %s. "+
			"To lower it, hold less of that at once: drop references to what is no longer needed before this point, keep it in a lower precision, or shard or offload it; "+
			"activations kept for backward shrink with activation checkpointing (torch.utils.checkpoint) or a smaller batch.",
			strings.Join(names, ", ")),
	}
	siteFinding(&fd, blame.Site, blame.Stack)
	return fd
}

// siteName is a site for a sentence: the function and line, or the reason.
func siteName(s callsite.Site) string {
	if !s.Known() {
		return "code with " + s.Reason
	}
	return s.Frame.String()
}
