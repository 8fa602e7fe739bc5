// Package pprofout writes live GPU memory by stack as a pprof heap profile,
// so that `go tool pprof` (top, flame graph, -diff_base, tag filters) reads
// a PyTorch memory snapshot. It is vramscope's only importer of
// github.com/google/pprof/profile.
//
//  1. Live (or Allocations, for a detector's selection) lists the blocks
//     live at a moment as neutral Blocks;
//  2. Write groups them into samples [inuse_objects, inuse_space], one per
//     stack, device, stream, state, pool, user metadata and size, as Go's
//     heap profiles group objects by stack and size;
//  3. the profile is written gzipped, as pprof expects of a .pb.gz.
//
// Locations and functions are interned from the snapshot's frames, leaf
// first. pprof matches functions and locations between profiles by content
// (name, file, line), not by ID, which is what lets -diff_base compare two
// snapshots of one program; IDs are still assigned in a deterministic order
// so that the same input gives the same bytes.
package pprofout

import (
	"fmt"
	"io"
	"strconv"

	"github.com/google/pprof/profile"
	"github.com/vramscope/vramscope/snapshot"
)

// Meta is what a profile says about itself.
type Meta struct {
	// TimeUS is the moment shown, in Unix microseconds; 0 when unknown.
	TimeUS int64
	// Comments are shown by pprof -comments (the file, the moment).
	Comments []string
}

// Stats summarizes a written profile.
type Stats struct {
	Samples, Blocks int
	Bytes           uint64 // inuse_space total: allocated plus pending-free
}

// Write writes blocks as a gzipped pprof profile of sn's stacks.
func Write(w io.Writer, sn *snapshot.Snapshot, blocks []Block, meta Meta) (Stats, error) {
	p := build(sn, blocks, meta)
	if err := p.CheckValid(); err != nil {
		return Stats{}, fmt.Errorf("building pprof profile: %w", err)
	}
	if err := p.Write(w); err != nil {
		return Stats{}, fmt.Errorf("writing pprof profile: %w", err)
	}
	st := Stats{Samples: len(p.Sample), Blocks: len(blocks)}
	for _, b := range blocks {
		st.Bytes += b.Size
	}
	return st, nil
}

// allocatorFrames is the profile's drop_frames: pprof removes a matching
// frame and everything it calls. With stacks="all" torch records the
// caching allocator and the unwinder that captured the stack as the
// innermost frames of every block, so without this every profile's top
// entry would be torch::unwind::unwind(); as in Go heap profiles, which
// start at the caller of malloc, the leaf becomes the operator that asked
// for memory (at::empty_*, a kernel wrapper). The frames stay in the file.
const allocatorFrames = `c10::cuda::CUDACachingAllocator::.*`

// sampleKey is what makes two blocks the same sample.
type sampleKey struct {
	stack           snapshot.StackID
	beforeRecording bool
	device          int
	stream          snapshot.StreamID
	state           snapshot.BlockState
	pool            snapshot.PoolID
	userMetadata    snapshot.StringID
	size, requested uint64
	category        string
	module          string
}

func build(sn *snapshot.Snapshot, blocks []Block, meta Meta) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "inuse_objects", Unit: "count"},
			{Type: "inuse_space", Unit: "bytes"},
		},
		DefaultSampleType: "inuse_space",
		DropFrames:        allocatorFrames,
		TimeNanos:         meta.TimeUS * 1000,
		Comments:          meta.Comments,
	}
	st := newStacks(sn, p)
	samples := map[sampleKey]*profile.Sample{}
	for _, b := range blocks {
		k := sampleKey{
			stack: b.Stack, beforeRecording: b.BeforeRecording, device: b.Device, stream: b.Stream,
			state: b.State, pool: b.Pool, userMetadata: b.UserMetadata, size: b.Size, requested: b.Requested,
			category: b.Category, module: b.Module,
		}
		s := samples[k]
		if s == nil {
			s = newSample(sn, b, st.locations(b))
			samples[k] = s
			p.Sample = append(p.Sample, s)
		}
		s.Value[0]++
		s.Value[1] += int64(b.Size)
	}
	return p
}

// stateNames are the state label's values: torch's names without the
// "active_" that every live block shares.
var stateNames = map[snapshot.BlockState]string{
	snapshot.ActiveAllocated:   "allocated",
	snapshot.ActivePendingFree: "pending_free",
}

func newSample(sn *snapshot.Snapshot, b Block, locs []*profile.Location) *profile.Sample {
	s := &profile.Sample{
		Location: locs,
		Value:    []int64{0, 0},
		Label: map[string][]string{
			"device": {strconv.Itoa(b.Device)},
			// Raw cudaStream_t values are pointers: hex reads as one.
			"stream": {"0x" + strconv.FormatUint(uint64(sn.Stream(b.Stream)), 16)},
			"state":  {stateNames[b.State]},
			"pool":   {b.Pool.String()},
		},
		NumLabel: map[string][]int64{
			"bytes":     {int64(b.Size)},
			"requested": {int64(b.Requested)},
		},
		NumUnit: map[string][]string{
			"bytes":     {"bytes"},
			"requested": {"bytes"},
		},
	}
	if md := sn.String(b.UserMetadata); md != "" {
		s.Label["user_metadata"] = []string{md}
	}
	if b.Category != "" {
		s.Label["category"] = []string{b.Category}
	}
	if b.Module != "" {
		s.Label["module"] = []string{b.Module}
	}
	return s
}
