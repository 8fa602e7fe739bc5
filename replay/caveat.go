package replay

import (
	"fmt"

	"github.com/vramscope/vramscope/internal/units"
)

// CaveatKind classifies what the trace alone could not show, or where it
// disagreed with the final snapshot. Caveats are data for the report, never
// errors: the timeline is still built.
type CaveatKind uint8

const (
	// BlocksBeforeRecording: blocks active in the final snapshot with no
	// alloc in the trace and no stack; they count from the first event.
	BlocksBeforeRecording CaveatKind = iota
	// BlocksBeforeTrace: the same, but the snapshot gives their stacks:
	// allocated while recording, before the oldest event the trace kept
	// (a wrapped or restarted trace, or torch 2.0's one-entry trace).
	BlocksBeforeTrace
	// NoTrace: the device has no trace at all (history off, or a pickled
	// memory_snapshot() list): the live blocks are the whole story.
	NoTrace
	// FreesWithoutAlloc: blocks freed in the trace whose alloc is missing:
	// allocated before recording started or lost when the ring buffer
	// wrapped. Their size is inferred from the free's requested size.
	FreesWithoutAlloc
	// RingWrapped: a free_completed whose free_requested is missing, which
	// only a wrapped ring buffer (or a history cleared mid-free) produces.
	RingWrapped
	// SegmentsBeforeRecording: segment_free or segment_unmap of memory
	// reserved before the oldest event.
	SegmentsBeforeRecording
	// UnknownAddress: block events outside every known segment; their pool
	// is taken as the default pool.
	UnknownAddress
	// LayoutConflict: an event that does not fit the reconstructed layout
	// (an alloc not at a free range, a segment release over live blocks);
	// usually a consequence of a wrapped ring buffer.
	LayoutConflict
	// FinalMismatch: the replayed end state differs from the final snapshot
	// (Count blocks or segments differ).
	FinalMismatch
	numCaveatKinds
)

var caveatNames = [numCaveatKinds]string{
	"blocks-before-recording", "blocks-before-trace", "no-trace", "frees-without-alloc", "ring-wrapped",
	"segments-before-recording", "unknown-address", "layout-conflict", "final-mismatch",
}

func (k CaveatKind) String() string {
	if k < numCaveatKinds {
		return caveatNames[k]
	}
	return fmt.Sprintf("CaveatKind(%d)", k)
}

// Caveat is one class of reconstruction gap on a device's timeline.
type Caveat struct {
	Kind  CaveatKind
	Count int    // events, blocks or segments concerned
	Bytes uint64 // their bytes, where sizes are known
	Index int    // first event concerned; BeforeRecording if none
}

func (c Caveat) String() string {
	switch c.Kind {
	case BlocksBeforeRecording:
		return fmt.Sprintf("allocated before recording started: %s (%s), whose stacks are unknown", units.Plural(c.Count, "live block"), units.Bytes(c.Bytes))
	case BlocksBeforeTrace:
		return fmt.Sprintf("allocated before the oldest event of the trace: %s (%s), whose stacks the snapshot still gives", units.Plural(c.Count, "live block"), units.Bytes(c.Bytes))
	case NoTrace:
		return fmt.Sprintf("no trace events: only the final state is known, %s (%s)", units.Plural(c.Count, "live block"), units.Bytes(c.Bytes))
	case FreesWithoutAlloc:
		return fmt.Sprintf("no alloc in the trace (allocated before recording, or the ring buffer wrapped) for %s (%s); first at event %d", units.Plural(c.Count, "freed block"), units.Bytes(c.Bytes), c.Index)
	case RingWrapped:
		return fmt.Sprintf("the ring buffer wrapped: %d free_completed events have no free_requested; first at event %d", c.Count, c.Index)
	case SegmentsBeforeRecording:
		return fmt.Sprintf("memory reserved before the oldest event, released by %s (%s); first at event %d", units.Plural(c.Count, "segment release"), units.Bytes(c.Bytes), c.Index)
	case UnknownAddress:
		return fmt.Sprintf("%d block events lie outside every known segment; first at event %d", c.Count, c.Index)
	case LayoutConflict:
		return fmt.Sprintf("%d events do not fit the reconstructed block layout; first at event %d", c.Count, c.Index)
	case FinalMismatch:
		return fmt.Sprintf("the replayed end state differs from the snapshot in %d blocks or segments", c.Count)
	}
	return fmt.Sprintf("%v: %d", c.Kind, c.Count)
}

// caveatCounter accumulates caveats during the replay without allocating.
type caveatCounter [numCaveatKinds]Caveat

func (cc *caveatCounter) add(k CaveatKind, index int, bytes uint64) {
	c := &cc[k]
	if c.Count == 0 {
		c.Index = index
	}
	c.Count++
	c.Bytes += bytes
}

// mergeRun adds the caveats of the forward pass, which its stages (the
// matcher, the placer's shards) count apart, each in event order, to cc's
// from before it. Each kind's first event is the first of cc's, else the
// earliest of theirs: what one counter would have held had it counted
// them all in order.
func (cc *caveatCounter) mergeRun(stages ...*caveatCounter) {
	for k := range cc {
		c := &cc[k]
		first := c.Count == 0
		for _, s := range stages {
			if s := &s[k]; s.Count > 0 {
				if first && (c.Count == 0 || s.Index < c.Index) {
					c.Index = s.Index
				}
				c.Count += s.Count
				c.Bytes += s.Bytes
			}
		}
	}
}

// list returns the caveats that occurred, in kind order.
func (cc *caveatCounter) list() []Caveat {
	out := []Caveat{}
	for k := range cc {
		if cc[k].Count > 0 {
			c := cc[k]
			c.Kind = CaveatKind(k)
			out = append(out, c)
		}
	}
	return out
}
