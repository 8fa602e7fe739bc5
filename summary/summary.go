// Package summary computes what `vramscope stats` reports about one
// snapshot: byte and count totals per device and per allocator pool, trace
// event counts and time span, and the caveats that limit what the file can
// tell.
//
//  1. Of walks the final segments once, adding each segment into its
//     device's Usage and into the Usage of its pool (pool id, stream, size
//     class).
//  2. It counts each device's trace events by action and replays the
//     alloc/free events by address, to find live blocks whose allocation is
//     not in the trace (the ring buffer wrapped, or recording started late).
//  3. What limits the analysis comes back as Caveats, never as errors.
//
// Pure computation: no I/O, and the snapshot is not modified.
package summary

import (
	"cmp"
	"slices"
	"time"

	"github.com/vramscope/vramscope/snapshot"
)

// Summary is the statistics of one snapshot.
type Summary struct {
	Devices []Device `json:"devices"`
	// Caveats that concern the whole file (unknown fields, old format);
	// device-specific ones are in Device.Caveats.
	Caveats []Caveat `json:"caveats"`
}

// Usage is the memory held by a set of segments. The four byte totals are
// sums of the segment fields, so they equal torch.cuda.memory_stats()'s
// reserved_bytes, allocated_bytes, active_bytes and requested_bytes
// ("all.current") for the same set.
type Usage struct {
	ReservedBytes  uint64 `json:"reserved_bytes"`  // Σ segment total_size
	AllocatedBytes uint64 `json:"allocated_bytes"` // Σ segment allocated_size
	ActiveBytes    uint64 `json:"active_bytes"`    // Σ segment active_size: allocated + pending free
	RequestedBytes uint64 `json:"requested_bytes"` // Σ segment requested_size (active blocks, unrounded)

	Segments int `json:"segments"`
	// FreeSegments have no active block: empty_cache() can release them.
	FreeSegments      int `json:"free_segments"`
	Blocks            int `json:"blocks"`
	AllocatedBlocks   int `json:"allocated_blocks"`
	PendingFreeBlocks int `json:"pending_free_blocks"`
	FreeBlocks        int `json:"free_blocks"`

	// InternalWasteBytes is Σ (size − requested_size) over allocated blocks:
	// rounding inside memory that tensors hold (as _memory_viz stats counts
	// it). Pending-free blocks are left out; their requested size belongs to
	// a tensor that is already gone.
	InternalWasteBytes uint64 `json:"internal_waste_bytes"`
	// FreeInUsedSegmentsBytes is Σ inactive blocks in segments that still
	// hold an active block: cached memory that empty_cache() cannot release
	// and that only requests that fit a hole can reuse.
	FreeInUsedSegmentsBytes uint64 `json:"free_in_used_segments_bytes"`
	// FreeSegmentBytes is Σ total_size of FreeSegments.
	FreeSegmentBytes uint64 `json:"free_segment_bytes"`
	// LargestFreeBlockBytes bounds the largest request served without
	// growing the pool.
	LargestFreeBlockBytes uint64 `json:"largest_free_block_bytes"`
}

// FreeBytes is reserved memory that no tensor holds, pending frees excluded.
func (u Usage) FreeBytes() uint64 { return u.FreeInUsedSegmentsBytes + u.FreeSegmentBytes }

// PoolKey identifies one allocator free list: a free block serves only
// requests of the same pool, stream and size class.
type PoolKey struct {
	ID     snapshot.PoolID
	Stream int64 // raw cudaStream_t value
	Type   snapshot.SegmentType
}

// Pool is the usage of one free list's segments.
type Pool struct {
	PoolKey
	Usage
}

// Device is the summary of one device ordinal.
type Device struct {
	Device int `json:"device"`
	Usage

	// Events counts trace events by action.
	Events      EventCounts `json:"events"`
	TraceEvents int         `json:"trace_events"`
	// FirstEventUS and LastEventUS are the first and last non-zero event
	// times (Unix µs); zero when no event has a time (torch < 2.2).
	FirstEventUS int64 `json:"first_event_us,omitempty"`
	LastEventUS  int64 `json:"last_event_us,omitempty"`

	Caveats []Caveat `json:"caveats"`

	// Pools splits Usage by free list, default pool first.
	Pools []Pool `json:"pools"`
}

// Span is the time between the first and last timed events.
func (d Device) Span() time.Duration {
	return time.Duration(d.LastEventUS-d.FirstEventUS) * time.Microsecond
}

// Of summarizes sn.
func Of(sn *snapshot.Snapshot) *Summary {
	s := &Summary{Devices: []Device{}, Caveats: fileCaveats(sn)}
	for _, dev := range sn.Devices() {
		d := Device{Device: dev, Pools: []Pool{}, Events: EventCounts{}}
		pools := map[PoolKey]*Usage{}
		for i := range sn.Segments {
			seg := &sn.Segments[i]
			if seg.Device != dev {
				continue
			}
			key := PoolKey{ID: seg.Pool, Stream: sn.Stream(seg.Stream), Type: seg.Type}
			pu := pools[key]
			if pu == nil {
				pu = &Usage{}
				pools[key] = pu
			}
			blocks := sn.SegmentBlocks(seg)
			d.Usage.addSegment(seg, blocks)
			pu.addSegment(seg, blocks)
		}
		for key, u := range pools {
			d.Pools = append(d.Pools, Pool{PoolKey: key, Usage: *u})
		}
		slices.SortFunc(d.Pools, func(a, b Pool) int { return comparePoolKeys(a.PoolKey, b.PoolKey) })

		var trace snapshot.Trace
		if dev < len(sn.Traces) {
			trace = sn.Traces[dev]
		}
		d.TraceEvents = trace.Len()
		// Counted in an array: a map per event took 0.4 s of the 11.4 M
		// events of the 996 MB bench file.
		var counts [256]int
		for _, e := range trace.All() {
			counts[e.Action]++
			if e.TimeUS != 0 {
				if d.FirstEventUS == 0 {
					d.FirstEventUS = e.TimeUS
				}
				d.LastEventUS = e.TimeUS
			}
		}
		for a, n := range counts {
			if n > 0 {
				d.Events[snapshot.Action(a)] = n
			}
		}
		d.Caveats = deviceCaveats(sn, dev, trace)
		s.Devices = append(s.Devices, d)
	}
	return s
}

// addSegment adds seg, whose blocks are blocks, to u.
func (u *Usage) addSegment(seg *snapshot.Segment, blocks []snapshot.Block) {
	u.ReservedBytes += seg.TotalSize
	u.AllocatedBytes += seg.AllocatedSize
	u.ActiveBytes += seg.ActiveSize
	u.RequestedBytes += seg.RequestedSize
	u.Segments++
	u.Blocks += len(blocks)

	var free uint64
	used := false
	for _, b := range blocks {
		switch b.State {
		case snapshot.ActiveAllocated:
			used = true
			u.AllocatedBlocks++
			if b.Size > b.RequestedSize {
				u.InternalWasteBytes += b.Size - b.RequestedSize
			}
		case snapshot.ActivePendingFree:
			used = true
			u.PendingFreeBlocks++
		default:
			u.FreeBlocks++
			free += b.Size
			u.LargestFreeBlockBytes = max(u.LargestFreeBlockBytes, b.Size)
		}
	}
	if used {
		u.FreeInUsedSegmentsBytes += free
	} else {
		u.FreeSegments++
		u.FreeSegmentBytes += seg.TotalSize
	}
}

// comparePoolKeys puts the default pool first, then private pools by id;
// within a pool, streams by raw value (the default stream 0 first), large
// before small.
func comparePoolKeys(a, b PoolKey) int {
	if c := cmp.Compare(a.ID[0], b.ID[0]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ID[1], b.ID[1]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Stream, b.Stream); c != 0 {
		return c
	}
	return cmp.Compare(a.Type, b.Type)
}
