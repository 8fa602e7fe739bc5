package diagnose

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// settingsOf is the allocator settings sn recorded, which decide the
// rounding, the segment sizes and the expandable pages (package allocator
// holds the rules); the defaults when they do not parse.
func settingsOf(sn *snapshot.Snapshot) allocator.Settings {
	s, err := allocator.FromSnapshot(sn.Settings)
	if err != nil {
		return allocator.Defaults()
	}
	return s
}

// OOMReport explains one failed allocation of a trace.
type OOMReport struct {
	Device int
	Index  int // the oom event
	TimeUS int64
	// Request is the oom event's size; Rounded is it rounded as the
	// allocator rounds under the recorded settings.
	Request, Rounded uint64
	Class            snapshot.SegmentType // the pool the request belongs to
	SegmentSize      uint64               // what cudaMalloc was asked for
	Stream           snapshot.StreamID
	DeviceFree       uint64 // cudaMemGetInfo free at the failure
	// FractionLimited: the device had at least SegmentSize free, so
	// cudaMalloc failed because of a set_per_process_memory_fraction cap
	// (the message's "allowed"), not a full GPU. The cap lies in
	// (Reserved, Reserved+SegmentSize).
	FractionLimited bool
	// Expandable: the snapshot's allocator ran with expandable_segments.
	Expandable bool

	Site  callsite.Site
	Stack []snapshot.Frame
	Frag  *FragReport // the allocator state at the failure
	// Candidates is the largest free block of each free list, largest
	// first, each with why it could not serve the request.
	Candidates []Candidate
	// Live is the allocated memory at the failure by callsite.
	Live []SiteGroup
}

// Candidate is a free block that might have served a request.
type Candidate struct {
	FreeClass
	Why string // empty if it could have served it (the replay then disagrees with torch)
}

// OOMs explains every oom event of tl.
func OOMs(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) ([]*OOMReport, error) {
	return explainOOMs(sn, tl, f, oomEvents(tl.Trace))
}

// oomEvents returns the indices of tr's oom events.
func oomEvents(tr snapshot.Trace) []int {
	var out []int
	for i, e := range tr.Others() {
		if e.Action == snapshot.ActionOOM {
			out = append(out, i)
		}
	}
	return out
}

// explainOOMs explains the oom events at indices events of tl.
func explainOOMs(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, events []int) ([]*OOMReport, error) {
	var out []*OOMReport
	for _, i := range events {
		r, err := OOM(sn, tl, f, i)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// OOM explains the oom event at index i of tl.
func OOM(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, i int) (*OOMReport, error) {
	e := tl.Trace.At(i)
	if e.Action != snapshot.ActionOOM {
		return nil, fmt.Errorf("explaining OOM: event %d of device %d is %v", i, tl.Device, e.Action)
	}
	frag, err := Frag(sn, tl, f, i, "oom")
	if err != nil {
		return nil, err
	}
	s := settingsOf(sn)
	r := &OOMReport{
		Device: tl.Device, Index: i, TimeUS: e.TimeUS,
		Request: e.Size, Rounded: s.Round(e.Size), Stream: e.Stream, DeviceFree: e.Addr,
		Site: f.Site(sn, e.Stack), Stack: f.UserFrames(sn, e.Stack, stackDepth),
		Frag: frag,
		Live: groupBySite(sn, tl, f, tl.AllocatedAt(i)),
	}
	r.Class = snapshot.Large
	if allocator.PoolOf(r.Rounded) == allocator.Small {
		r.Class = snapshot.Small
	}
	r.SegmentSize = s.SegmentSize(r.Rounded)
	r.FractionLimited = r.DeviceFree >= r.SegmentSize
	r.Expandable = sn.Settings != nil && sn.Settings.ExpandableSegments
	var maxSplit uint64
	if sn.Settings != nil && sn.Settings.MaxSplitSize > 0 {
		maxSplit = uint64(sn.Settings.MaxSplitSize)
	}
	for _, c := range frag.Largest {
		r.Candidates = append(r.Candidates, Candidate{FreeClass: c, Why: r.whyNot(sn, c, maxSplit)})
	}
	slices.SortStableFunc(r.Candidates, func(a, b Candidate) int { return cmp.Compare(b.Largest, a.Largest) })
	return r, nil
}

// whyNot says why the largest block of free list c could not serve the
// request: a block only serves its own stream, pool and size class, must be
// big enough, and (with max_split_size) an oversize block serves only
// requests that are oversize too.
func (r *OOMReport) whyNot(sn *snapshot.Snapshot, c FreeClass, maxSplit uint64) string {
	switch {
	case c.Stream != r.Stream:
		return fmt.Sprintf("it is cached for stream %#x and the request ran on stream %#x", sn.Stream(c.Stream), sn.Stream(r.Stream))
	case !c.Pool.IsDefault():
		return fmt.Sprintf("it belongs to private pool %v (CUDA graph or MemPool)", c.Pool)
	case c.Type != r.Class && c.Type == snapshot.Small:
		return "it is in the small pool, which serves only requests up to 1 MiB"
	case c.Type != r.Class:
		return "it is in the large pool and requests up to 1 MiB use the small pool"
	case c.Largest < r.Rounded:
		return fmt.Sprintf("it is %s short", units.Bytes(r.Rounded-c.Largest))
	case maxSplit > 0 && c.Largest >= maxSplit && r.Rounded < maxSplit:
		return fmt.Sprintf("it is at least max_split_size (%s) and the request is below it", units.Bytes(maxSplit))
	}
	return ""
}

// maxTop is how many live callsites an explanation names.
const maxTop = 3

// facts are the oom event's numbers for the explanation it shares with
// pasted messages. A trace records neither the GPU's capacity nor the cap:
// a device with room for the segment means a cap refused it.
func (r *OOMReport) facts() oomFacts {
	o := oomFacts{
		who:         "the program",
		request:     r.Rounded,
		segment:     new(int64(r.SegmentSize)),
		allocated:   new(r.Frag.Allocated),
		reserved:    new(r.Frag.Reserved),
		trapped:     new(r.Frag.Unallocated()),
		free:        new(int64(r.DeviceFree)),
		capInferred: r.FractionLimited,
		expandable:  r.Expandable,
	}
	if r.Site.Known() {
		o.who = r.Site.Frame.String()
	}
	if c, ok := r.bestCandidate(); ok {
		o.largestFree = fmt.Sprintf("The largest free block, %s, could not serve it: %s", units.Bytes(c.Largest), c.Why)
		if c.Why == "" {
			o.largestFree = fmt.Sprintf("The replay finds a free %s block that could have served it; the trace may be incomplete", units.Bytes(c.Largest))
		}
	}
	for _, g := range r.Live[:min(len(r.Live), maxTop)] {
		o.top = append(o.top, fmt.Sprintf("%s (%s in %d)", siteName(g.Site), units.Bytes(g.Bytes), g.Count))
	}
	return o
}

// Cause decides the OOM's cause, as for a pasted message.
func (r *OOMReport) Cause() OOMCause { return r.facts().decide() }

// Explanation is the report's plain paragraph.
func (r *OOMReport) Explanation() string {
	o := r.facts()
	return o.paragraph(o.decide())
}

// Fix is the paragraph's advice alone: what to change.
func (r *OOMReport) Fix() string {
	o := r.facts()
	return o.remedy(o.decide())
}

// bestCandidate is the free block closest to serving the request: the
// largest one on the request's own stream, pool and size class, else the
// largest of all.
func (r *OOMReport) bestCandidate() (Candidate, bool) {
	for _, c := range r.Candidates {
		if c.Stream == r.Stream && c.Pool.IsDefault() && c.Type == r.Class {
			return c, true
		}
	}
	if len(r.Candidates) == 0 {
		return Candidate{}, false
	}
	return r.Candidates[0], true
}

// Findings returns the OOM finding, blamed on the failed request's callsite.
func (r *OOMReport) Findings() []Finding {
	fd := Finding{
		Kind:     KindOOM,
		Severity: High,
		Title:    fmt.Sprintf("out of memory: %s for %s could not be served", units.Bytes(r.Rounded), siteName(r.Site)),
		Bytes:    int64(r.Rounded),
		Device:   r.Device,
		Evidence: map[string]any{
			"event":             r.Index,
			"request_bytes":     r.Rounded,
			"segment_bytes":     r.SegmentSize,
			"device_free_bytes": r.DeviceFree,
			"allocated_bytes":   r.Frag.Allocated,
			"reserved_bytes":    r.Frag.Reserved,
			"trapped_bytes":     r.Frag.Unallocated(),
			"fraction_limited":  r.FractionLimited,
		},
		Fix: r.Fix(),
	}
	r.Cause().evidence(fd.Evidence)
	if c, ok := r.bestCandidate(); ok {
		fd.Evidence["largest_free_block_bytes"] = c.Largest
		fd.Evidence["largest_free_block_why"] = c.Why
	}
	siteFinding(&fd, r.Site, r.Stack)
	return []Finding{fd}
}
