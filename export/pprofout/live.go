package pprofout

import (
	"fmt"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Block is one live block to write: the neutral record that End, Peak and
// Allocations build, so that any selection of blocks (a leak set, a diff)
// becomes a profile the same way.
type Block struct {
	Device    int
	Addr      uint64
	Size      uint64 // rounded block size: the sample's inuse_space
	Requested uint64
	// State is ActiveAllocated or ActivePendingFree.
	State  snapshot.BlockState
	Stack  snapshot.StackID
	Stream snapshot.StreamID
	Pool   snapshot.PoolID
	// UserMetadata is the alloc event's _set_memory_metadata string, or 0.
	UserMetadata snapshot.StringID
	// BeforeRecording marks a block whose alloc the trace does not hold;
	// with no stack of its own it is filed under "<before recording>".
	BeforeRecording bool
	// Category and Module are what package breakdown made of the block
	// (labels "category" and "module"); "" when not classified.
	Category, Module string
}

// Moment names the instant whose live blocks a profile shows.
type Moment uint8

const (
	// End is the final snapshot: its active blocks, exactly as dumped.
	End Moment = iota
	// Peak is each device's allocated peak, from the replayed trace.
	Peak
)

func (m Moment) String() string {
	if m == Peak {
		return "peak"
	}
	return "end"
}

// ParseMoment reads a --at value.
func ParseMoment(s string) (Moment, error) {
	switch s {
	case "end":
		return End, nil
	case "peak":
		return Peak, nil
	}
	return End, fmt.Errorf("unknown moment %q: want end or peak", s)
}

// Live returns the blocks active at moment m on the devices of tls (one
// timeline per device, as replay.Devices returns them), and the moment's
// time in Unix microseconds (0 when the traces carry no times). Pending
// frees are included with State ActivePendingFree: they still occupy
// memory, and pprof's -tagfocus state=allocated removes them.
//
// At Peak each device is taken at its own allocated peak; the time returned
// is the latest of them.
func Live(sn *snapshot.Snapshot, tls []*replay.Timeline, m Moment) (blocks []Block, timeUS int64) {
	if m == Peak {
		for _, t := range tls {
			p := t.Peak(replay.Allocated)
			blocks = append(blocks, Allocations(t, p.Index, t.LiveAt(p.Index))...)
			timeUS = max(timeUS, p.TimeUS)
		}
		return blocks, timeUS
	}
	for _, t := range tls {
		if n := t.Trace.Len(); n > 0 {
			timeUS = max(timeUS, t.Trace.At(n-1).TimeUS)
		}
		blocks = append(blocks, atEnd(sn, t)...)
	}
	return blocks, timeUS
}

// atEnd returns the final snapshot's active blocks on t's device. The
// snapshot, not the replay, is authoritative here, so that the profile's
// total is the dumped allocated bytes even when the replay had to guess;
// the timeline adds what blocks lack: user metadata and whether the alloc
// was recorded.
func atEnd(sn *snapshot.Snapshot, t *replay.Timeline) []Block {
	traced := map[uint64]int{} // alloc event of the traced blocks active at the end, by address
	for _, k := range t.LiveAt(replay.LiveAtEnd - 1) {
		if start, _, _ := t.Lifetime(k); start >= 0 {
			traced[t.Allocation(k).Addr] = start
		}
	}
	var out []Block
	for si := range sn.Segments {
		seg := &sn.Segments[si]
		if seg.Device != t.Device {
			continue
		}
		for _, b := range sn.SegmentBlocks(seg) {
			if !b.State.Active() {
				continue
			}
			lb := Block{
				Device: seg.Device, Addr: b.Address, Size: b.Size, Requested: b.RequestedSize, State: b.State,
				Stack: b.Stack, Stream: seg.Stream, Pool: seg.Pool, BeforeRecording: true,
			}
			if start, ok := traced[b.Address]; ok {
				lb.BeforeRecording = false
				lb.UserMetadata = t.Trace.Context(start).UserMetadata
			}
			out = append(out, lb)
		}
	}
	return out
}

// Allocations returns the blocks t.Allocation(k), k in idx, in their state
// right after event i (replay.BeforeRecording: before the first event).
// It is how a detector's selection becomes a profile: a leak detector
// passes its leaked allocations and t.Len()-1.
func Allocations(t *replay.Timeline, i int, idx []int) []Block {
	out := make([]Block, 0, len(idx))
	for _, k := range idx {
		a := t.Allocation(k)
		b := Block{
			Device: t.Device, Addr: a.Addr, Size: a.Size, Requested: a.Requested, State: snapshot.ActivePendingFree,
			Stack: a.Stack, Stream: a.Stream, Pool: a.Pool,
		}
		if a.AllocatedAt(i) {
			b.State = snapshot.ActiveAllocated
		}
		switch a.Origin {
		case replay.Traced:
			b.UserMetadata = t.Trace.Context(int(a.Start)).UserMetadata
		case replay.FromSnapshot:
			b.BeforeRecording = true
		case replay.FromFree:
			// The stack is the free's, not the alloc's: attributing the
			// bytes to it would blame the code that released them.
			b.BeforeRecording = true
			b.Stack = snapshot.EmptyStack
		}
		out = append(out, b)
	}
	return out
}
