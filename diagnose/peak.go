package diagnose

import (
	"slices"

	"github.com/vramscope/vramscope/callsite"
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
	// Site is the callsite of the event that reached the allocated peak,
	// and Place its place.
	Site  callsite.Site
	Place Place

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

	// Cause is the pattern recognised at the peak (a dtype upcast, an
	// optimizer's foreach update), or nil.
	Cause *NamedCause

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
	Alloc int // index for Timeline.Allocation
	Place
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
	pl := newPlacer(sn, tl, f)
	r.Site = callsite.Site{Depth: -1, Reason: "the peak is the state before recording started"}
	r.Place = Place{Site: r.Site}
	if i := r.Allocated.Index; i >= 0 {
		r.Place = pl.event(i)
		r.Site = r.Place.Site
	}
	r.EmptyCache, r.ReservedSince, r.AllocatedSince = peaksSince(sn, tl)
	r.ReservedSite = callsite.Site{Depth: -1, Reason: "the reserved peak is the state before recording started, so no stack says who reserved it"}
	if i := r.ReservedSince.Index; i >= 0 {
		id := tl.Trace.StackAt(i)
		r.ReservedSite, r.ReservedStack = f.Site(sn, id), f.UserFrames(sn, id, stackDepth)
	}

	var persistent, transient []int
	best := -1 // the largest transient block
	var bestAlloc replay.Allocation
	for _, k := range tl.AllocatedAt(r.Allocated.Index) {
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
	r.Persistent = pl.group(persistent)
	r.Transient = pl.group(transient)
	r.Cause = upcastCause(pl, append(slices.Clone(persistent), transient...), r.Allocated.Bytes)

	if best >= 0 {
		a := &bestAlloc
		place := pl.alloc(best)
		r.Largest = &Transient{
			Alloc: best, Place: place, Stack: pl.frames(place),
			Bytes: int64(a.Size), Requested: int64(a.Requested),
			PeakWithout: peaksWithout(tl, []replay.Allocation{*a})[0],
		}
		if !lowers(r.Allocated.Bytes, r.Largest.PeakWithout.Bytes) {
			r.Line = bestLine(pl, r.Allocated.Bytes, r.Transient)
		}
	}
	if r.Cause == nil {
		// An optimizer's foreach temporaries set the peak: the line of
		// code is the step, whatever else could be trimmed.
		if c, line := optimizerCause(pl, transient, r.Allocated.Bytes); c != nil {
			r.Cause, r.Line = c, line
		}
	}
	return r
}

// siteName is a site for a sentence: the function and line, or the reason.
func siteName(s callsite.Site) string {
	if !s.Known() {
		return "code with " + s.Reason
	}
	return s.Frame.String()
}
