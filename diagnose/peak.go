package diagnose

import (
	"fmt"

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

	// The blocks allocated at the allocated peak, by callsite. Persistent
	// blocks outlive the trace on one side (allocated before it or still
	// allocated at its end); transient ones are born and freed within it,
	// so a different schedule (chunking, freeing earlier) could avoid them.
	Persistent, Transient           []SiteGroup
	PersistentBytes, TransientBytes int64

	// Largest is the largest transient block at the peak (nil if none).
	Largest *Transient
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
			PeakWithout: peakWithout(tl, a),
		}
	}
	return r
}

// peakWithout is tl's allocated peak with block a removed from the series.
func peakWithout(tl *replay.Timeline, a *replay.Allocation) replay.Peak {
	p := replay.Peak{Index: replay.BeforeRecording, Bytes: tl.Initial.Allocated}
	if a.AllocatedAt(replay.BeforeRecording) {
		p.Bytes -= int64(a.Size)
	}
	for i := range tl.Len() {
		v := tl.Value(replay.Allocated, i)
		if a.AllocatedAt(i) {
			v -= int64(a.Size)
		}
		if v > p.Bytes {
			p = replay.Peak{Index: i, TimeUS: tl.Trace.At(i).TimeUS, Bytes: v}
		}
	}
	return p
}

// Findings returns the peak finding: the largest transient block and its
// gain when that gain is worth a change of code, blamed on its callsite.
func (r *PeakReport) Findings() []Finding {
	t := r.Largest
	if t == nil || r.Allocated.Bytes <= 0 {
		return nil
	}
	saving := t.Saving(r.Allocated.Bytes)
	share := float64(saving) / float64(r.Allocated.Bytes)
	sev := gradeShare(share, 0.25, 0.10)
	fd := Finding{
		Kind:     KindPeak,
		Severity: sev,
		Title: fmt.Sprintf("allocated memory peaks at %s; a transient %s block from %s sits on top of it",
			units.Bytes(r.Allocated.Bytes), units.Bytes(t.Bytes), siteName(t.Site)),
		Bytes:  r.Allocated.Bytes,
		Device: r.Device,
		Evidence: map[string]any{
			"peak_allocated_bytes":       r.Allocated.Bytes,
			"peak_event":                 r.Allocated.Index,
			"peak_reserved_bytes":        r.Reserved.Bytes,
			"persistent_bytes":           r.PersistentBytes,
			"transient_bytes":            r.TransientBytes,
			"largest_transient_bytes":    t.Bytes,
			"peak_without_largest_bytes": t.PeakWithout.Bytes,
			"saving_bytes":               saving,
			"recording_from_start":       r.Complete,
			"transient_callsites":        len(r.Transient),
			"persistent_callsites":       len(r.Persistent),
			"end_allocated_bytes":        r.End.Allocated,
			"largest_requested_bytes":    t.Requested,
			"largest_alloc_index":        t.Alloc,
			"peak_callsite":              r.Site.String(),
			"largest_transient_pct":      int(share*100 + 0.5),
		},
		Fix: fmt.Sprintf("%s allocates %s that is freed again before the end; computing it in chunks, or freeing what it replaces before it is created, lowers the peak from %s to %s (-%s)",
			siteName(t.Site), units.Bytes(t.Bytes), units.Bytes(r.Allocated.Bytes), units.Bytes(t.PeakWithout.Bytes), units.Bytes(saving)),
	}
	siteFinding(&fd, t.Site, t.Stack)
	return []Finding{fd}
}

// siteName is a site for a sentence: the function and line, or the reason.
func siteName(s callsite.Site) string {
	if !s.Known() {
		return "code with " + s.Reason
	}
	return s.Frame.String()
}
