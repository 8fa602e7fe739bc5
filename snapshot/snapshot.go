// Package snapshot is vramscope's typed model of a PyTorch CUDA memory
// snapshot: the pickle written by torch.cuda.memory._dump_snapshot (or the C++
// torch::cuda::_memory_snapshot_pickled) decoded into flat, interned records.
//
// The pipeline is
//
//  1. Read sniffs gzip/zstd and hands the pickle stream to Decode;
//  2. Decode runs internal/pickle's restricted VM, whose containers are built
//     by this package into typed records as soon as they are complete
//     (frames, stacks, blocks, segments, trace events), never into a generic
//     tree, so a multi-GB file needs a fraction of its size in memory;
//  3. the result is a *Snapshot that readers above (replay, report) consume.
//
// Strings, frames and stacks are interned: two events with the same stack share
// one StackID, which is what makes stack grouping cheap downstream.
package snapshot

import (
	"fmt"
	"slices"
)

// FrameID indexes Snapshot.Frames.
type FrameID uint32

// StackID names an interned call stack (innermost frame first, as torch
// writes it). NoStack and EmptyStack are the two reserved ids.
type StackID uint32

const (
	// NoStack: the record carried no "frames" key (context=None, or actions
	// such as "snapshot" that never have one).
	NoStack StackID = 0
	// EmptyStack: the record carried "frames": [] (allocated before recording
	// started, inactive block, or an autograd-thread allocation recorded with
	// stacks="python").
	EmptyStack StackID = 1
)

// StringID indexes the snapshot's string table; 0 is "".
type StringID uint32

// StreamID indexes Snapshot.Streams; 0 is the legacy default stream (raw 0).
type StreamID uint16

// UnknownLine is the line number torch writes as 2**64-1 (unsigned -1).
const UnknownLine = ^uint64(0)

// Frame is one Python, TorchScript or C++ frame.
type Frame struct {
	Name     string
	Filename string
	Line     uint64 // UnknownLine when torch did not know it
}

// String is "name (file:line)"; without a line (C++ frames, torch's
// unknown line) "name (file)", and the name alone without a file either.
// Line 0 and UnknownLine print alike, so a frame reads the same after JSON,
// which has no UnknownLine.
func (f Frame) String() string {
	switch {
	case f.Line != 0 && f.Line != UnknownLine:
		return fmt.Sprintf("%s (%s:%d)", f.Name, f.Filename, f.Line)
	case f.Filename != "":
		return fmt.Sprintf("%s (%s)", f.Name, f.Filename)
	}
	return f.Name
}

// PoolID is segment_pool_id: (0,0) is the default pool; CUDA-graph capture
// pools are (capture_id, 0) and MemPool pools (0, n).
type PoolID [2]int64

// IsDefault reports whether p is the default (non-private) pool.
func (p PoolID) IsDefault() bool { return p == PoolID{} }

func (p PoolID) String() string { return fmt.Sprintf("(%d,%d)", p[0], p[1]) }

// SegmentType is the allocator pool size class of a segment.
type SegmentType uint8

const (
	Large SegmentType = iota // blocks > 1 MiB (and everything in 1.x/2.0 files)
	Small                    // blocks <= 1 MiB, packed into 2 MiB segments
)

func (t SegmentType) String() string {
	if t == Small {
		return "small"
	}
	return "large"
}

// BlockState is a block's allocator state.
type BlockState uint8

const (
	Inactive          BlockState = iota // free, cached by the allocator
	ActiveAllocated                     // held by a tensor
	ActivePendingFree                   // freed by the user, waiting on record_stream events
)

var blockStateNames = [...]string{"inactive", "active_allocated", "active_pending_free"}

func (s BlockState) String() string {
	if int(s) < len(blockStateNames) {
		return blockStateNames[s]
	}
	return fmt.Sprintf("BlockState(%d)", s)
}

// Active reports whether the block still occupies memory (allocated or
// pending free).
func (s BlockState) Active() bool { return s != Inactive }

// Segment is one contiguous device range from cudaMalloc, or one contiguous
// mapped range of an expandable segment.
type Segment struct {
	Device        int
	Address       uint64
	TotalSize     uint64 // reserved bytes
	AllocatedSize uint64 // sum of active_allocated block sizes
	ActiveSize    uint64 // allocated + pending free
	RequestedSize uint64 // sum of requested sizes of active blocks (2.1+; derived for older files)
	Stream        StreamID
	Type          SegmentType
	Pool          PoolID
	Expandable    bool
	Stack         StackID // stack at segment creation; often EmptyStack even with recording on

	// FirstBlock and NumBlocks locate the segment's blocks, in address order,
	// in Snapshot.Blocks.
	FirstBlock, NumBlocks int
}

// Block is one allocator block inside a segment.
type Block struct {
	Address       uint64
	Size          uint64 // rounded block size
	RequestedSize uint64 // bytes the caller asked for; stale for inactive blocks
	State         BlockState
	Stack         StackID
}

// Action is a trace event's kind.
type Action uint8

const (
	ActionUnknown       Action = iota // an action this version does not know (counted in Snapshot.Unknown)
	ActionAlloc                       // a block handed to a caller; Size = requested bytes
	ActionFreeRequested               // the caller released the pointer
	ActionFreeCompleted               // the block went back to the cache
	ActionSegmentAlloc                // cudaMalloc
	ActionSegmentFree                 // cudaFree
	ActionSegmentMap                  // expandable: pages mapped
	ActionSegmentUnmap                // expandable: pages unmapped
	ActionSnapshot                    // a snapshot() call; Size = active bytes
	ActionOOM                         // allocation failed; Addr = device_free, Size = rounded request
	ActionAnnotate                    // after 2.11: _annotate_memory on a live block
	numActions
)

var actionNames = [numActions]string{
	"unknown", "alloc", "free_requested", "free_completed", "segment_alloc",
	"segment_free", "segment_map", "segment_unmap", "snapshot", "oom", "annotate",
}

func (a Action) String() string {
	if a < numActions {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", a)
}

// Actions lists every known action in enum order (ActionUnknown first).
func Actions() []Action {
	out := make([]Action, numActions)
	for i := range out {
		out[i] = Action(i)
	}
	return out
}

// ParseAction maps torch's action name to an Action (ActionUnknown if new).
func ParseAction(name string) Action {
	for i, n := range actionNames {
		if i > 0 && n == name {
			return Action(i)
		}
	}
	return ActionUnknown
}

// Event is one trace entry in compact form (32 bytes: traces hold millions).
// Its compile context and user metadata are in Trace.Context.
type Event struct {
	// Addr is the block or segment address; for ActionOOM it is device_free
	// (cudaMemGetInfo free bytes at the failure); 0 for ActionSnapshot.
	Addr   uint64
	Size   uint64
	TimeUS int64 // Unix epoch microseconds (0 before torch 2.2)
	Stack  StackID
	Stream StreamID
	Action Action
}

// Context is what a trace entry says about the code around it. Most traces
// give every entry the same pair ("N/A", ""), so it is kept out of Event:
// 8 bytes less per entry (91 MB on an 11 M-entry trace).
type Context struct {
	// CompileContext is "N/A" or "Torch-Compiled Region: f/c" (2.8+).
	CompileContext StringID
	// UserMetadata is the _set_memory_metadata string (2.10+).
	UserMetadata StringID
}

// Annotation is one external_annotations record (record_function START/END).
type Annotation struct {
	Name   string
	Stage  string // "START" or "END"
	Device int
	TimeUS int64
}

// AllocatorSettings is the allocator_settings dict (2.3+).
type AllocatorSettings struct {
	Conf                   string  // PYTORCH_CUDA_ALLOC_CONF as set
	MaxSplitSize           int64   // -1: unlimited
	GarbageCollectionThres float64 // garbage_collection_threshold
	ExpandableSegments     bool
	// Raw holds every key as decoded (ints as int64/uint64, strings, floats,
	// bools, nested map[string]any / []any).
	Raw map[string]any
}

// Generation is the format family a file was written in.
type Generation uint8

const (
	// GenLegacyList: a bare list of segments whose blocks carry no address
	// (torch <= 1.13, whose _memory_viz pickled torch.cuda.memory_snapshot()).
	GenLegacyList Generation = iota + 1
	// GenHistory: torch 2.0, a dict whose blocks carry no address; their
	// stacks are in "history" (the pickle torch 2.0's _dump_snapshot writes).
	GenHistory
	// GenModern: torch 2.1+, blocks carry address, requested_size, frames.
	GenModern
	// GenSegmentList: a bare list of segments in the 2.1+ block layout:
	// torch.cuda.memory_snapshot() pickled by hand. Sizes and stacks are
	// real; there is no trace.
	GenSegmentList
)

func (g Generation) String() string {
	switch g {
	case GenLegacyList:
		return "1.x segment list"
	case GenHistory:
		return "2.0"
	case GenModern:
		return "2.1+"
	case GenSegmentList:
		return "memory_snapshot() segment list"
	}
	return "unknown"
}

// List reports whether the file was a bare list of segments: no trace, and
// no sign of whether history was recorded.
func (g Generation) List() bool { return g == GenLegacyList || g == GenSegmentList }

// Snapshot is a decoded memory snapshot.
type Snapshot struct {
	Protocol   int // pickle protocol (2 for the C++ path, 4 or 5 for Python)
	Generation Generation
	// RequestedUnknown counts active blocks that carry neither
	// requested_size nor history (torch <= 1.12): their block size stands
	// in for the requested size.
	RequestedUnknown int

	Segments []Segment // all devices; per device in address order
	Blocks   []Block   // located by Segment.FirstBlock/NumBlocks
	// Traces holds one trace per device ordinal (device_traces[d]); empty
	// when recording was off or traces were not included.
	Traces      []Trace
	Annotations []Annotation
	Settings    *AllocatorSettings // nil before torch 2.3

	Frames  []Frame
	Streams []int64 // StreamID -> raw cudaStream_t value

	// Unknown counts keys and actions this version does not model, by
	// "where.name" (e.g. "event.pool_id", "action.annotate_v2",
	// "top.host_segments"). They are tolerated, never fatal.
	Unknown map[string]int
	// Extra keeps unknown top-level keys decoded generically.
	Extra map[string]any

	strings     []string
	stackFrames []FrameID // all stacks' frames, concatenated
	stackOffs   []uint32  // stack i is stackFrames[stackOffs[i]:stackOffs[i+1]]
	in          interner
}

// SegmentBlocks returns s's blocks.
func (sn *Snapshot) SegmentBlocks(s *Segment) []Block {
	return sn.Blocks[s.FirstBlock : s.FirstBlock+s.NumBlocks]
}

// String returns the interned string id.
func (sn *Snapshot) String(id StringID) string { return sn.strings[id] }

// Stack returns the frames of stack id, innermost first. The slice aliases
// the snapshot's storage: do not modify it.
func (sn *Snapshot) Stack(id StackID) []FrameID {
	return sn.stackFrames[sn.stackOffs[id]:sn.stackOffs[id+1]]
}

// NumStacks is the number of interned stacks, including NoStack and EmptyStack.
func (sn *Snapshot) NumStacks() int { return len(sn.stackOffs) - 1 }

// Stream returns the raw cudaStream_t value of id.
func (sn *Snapshot) Stream(id StreamID) int64 { return sn.Streams[id] }

// Devices returns the device ordinals that have segments or a non-empty
// trace, ascending.
func (sn *Snapshot) Devices() []int {
	seen := map[int]bool{}
	for i := range sn.Segments {
		seen[sn.Segments[i].Device] = true
	}
	for d, t := range sn.Traces {
		if t.Len() > 0 {
			seen[d] = true
		}
	}
	out := make([]int, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}
