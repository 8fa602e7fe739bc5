package summary

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/snapshot"
)

// CaveatKind names a limitation of the input. Kinds are stable identifiers
// for JSON consumers; messages may change.
type CaveatKind string

const (
	// NoTrace: the device has no trace events, so nothing about history
	// (leaks over time, peaks, who freed what) can be said.
	NoTrace CaveatKind = "no_trace"
	// StateOnly: one event only, the mark of enabled="state" recording.
	StateOnly CaveatKind = "state_only"
	// NoFrames: no event or block on the device has a stack.
	NoFrames CaveatKind = "no_frames"
	// EmptyAllocStacks: some alloc events have an empty stack.
	EmptyAllocStacks CaveatKind = "empty_alloc_stacks"
	// RingWrapped: the trace has lost its oldest events to a full ring
	// buffer.
	RingWrapped CaveatKind = "ring_wrapped"
	// HistoryRestarted: the trace begins after blocks that are still live
	// were allocated, and it is not the length of a full ring buffer:
	// recording was turned off (which clears it) and on again.
	HistoryRestarted CaveatKind = "history_restarted"
	// PreRecording: live blocks whose allocation the trace does not show and
	// that have no stack: allocated before recording started.
	PreRecording CaveatKind = "pre_recording"
	// NoTimestamps: events without time_us (torch < 2.2).
	NoTimestamps CaveatKind = "no_timestamps"
	// LegacyFormat: a file whose blocks carry no requested size (torch <=
	// 1.12): the block size stands in for it.
	LegacyFormat CaveatKind = "legacy_format"
	// UnknownFields: keys or actions this version does not model.
	UnknownFields CaveatKind = "unknown_fields"
)

// Caveat is one limitation of what the input can tell, in words a user can
// act on.
type Caveat struct {
	Kind    CaveatKind `json:"kind"`
	Message string     `json:"message"`
	// Count and Bytes quantify the caveat where that makes sense (events,
	// blocks and their bytes); zero otherwise.
	Count int    `json:"count,omitempty"`
	Bytes uint64 `json:"bytes,omitempty"`
}

func fileCaveats(sn *snapshot.Snapshot) []Caveat {
	out := []Caveat{}
	if n := sn.RequestedUnknown; n > 0 {
		out = append(out, Caveat{Kind: LegacyFormat, Count: n, Message: fmt.Sprintf(
			"written in the %s format: no requested size for %s, so the block size stands in for it; requested bytes and internal waste are approximate",
			sn.Generation, units.Plural(n, "active block"))})
	}
	if len(sn.Unknown) > 0 {
		names := slices.Sorted(maps.Keys(sn.Unknown))
		total := 0
		for _, n := range sn.Unknown {
			total += n
		}
		out = append(out, Caveat{Kind: UnknownFields, Count: total, Message: fmt.Sprintf(
			"ignored %d occurrences of fields or actions this version does not know (%s): the file is probably from a newer torch",
			total, strings.Join(names, ", "))})
	}
	return out
}

// deviceCaveats finds what limits the analysis of device dev, whose trace is
// trace.
func deviceCaveats(sn *snapshot.Snapshot, dev int, trace snapshot.Trace) []Caveat {
	out := []Caveat{}
	var (
		eventStacks   int // events with a non-empty stack
		eventsNoKey   int // events without a frames key (context=None)
		allocs        int
		emptyAllocs   int
		timed         int
		blockStacks   int
		liveInTrace   = map[uint64]bool{} // allocated in the trace and not yet returned to the cache
		freeRequested = map[uint64]bool{}
		orphanFrees   int // free_completed without its free_requested
	)
	for _, e := range trace.All() {
		if e.Stack > snapshot.EmptyStack {
			eventStacks++
		}
		if e.Stack == snapshot.NoStack && e.Action != snapshot.ActionSnapshot {
			eventsNoKey++
		}
		if e.TimeUS != 0 {
			timed++
		}
		switch e.Action {
		case snapshot.ActionAlloc:
			allocs++
			if e.Stack == snapshot.EmptyStack {
				emptyAllocs++
			}
			liveInTrace[e.Addr] = true
		case snapshot.ActionFreeRequested:
			freeRequested[e.Addr] = true
		case snapshot.ActionFreeCompleted:
			if !freeRequested[e.Addr] {
				orphanFrees++
			}
			delete(freeRequested, e.Addr)
			delete(liveInTrace, e.Addr)
		}
	}

	// Live blocks the trace does not account for. A block with a stack was
	// allocated while recording, so its lost alloc event means the ring
	// buffer wrapped; one without was allocated before recording began.
	var lostAllocs, preBlocks int
	var preBytes uint64
	for i := range sn.Segments {
		seg := &sn.Segments[i]
		if seg.Device != dev {
			continue
		}
		for _, b := range sn.SegmentBlocks(seg) {
			if b.Stack > snapshot.EmptyStack {
				blockStacks++
			}
			if !b.State.Active() || liveInTrace[b.Address] {
				continue
			}
			if b.Stack > snapshot.EmptyStack {
				lostAllocs++
			} else {
				preBlocks++
				preBytes += b.Size
			}
		}
	}

	n := trace.Len()
	switch {
	case n == 0 && sn.Generation.List():
		out = append(out, Caveat{Kind: NoTrace, Message: "no trace events: the file is a bare list of segments (torch.cuda.memory_snapshot() pickled, or torch <= 1.13), which holds none; only the final state is known (torch.cuda.memory._dump_snapshot() keeps the history)"})
	case n == 0:
		out = append(out, Caveat{Kind: NoTrace, Message: "no trace events: memory history was not being recorded (or was turned off, which clears it, before the dump); only the final state is known"})
	case n == 1:
		kept := "only the final state"
		if blockStacks > 0 {
			kept = "only the final state and the stacks of live blocks"
		}
		why := `_record_memory_history(enabled="state") records so, as does max_entries=1 (the legacy API's default)`
		if sn.Generation == snapshot.GenHistory {
			why = "torch 2.0's _record_memory_history(True) keeps one event unless trace_alloc_max_entries raises it"
		}
		out = append(out, Caveat{Kind: StateOnly, Count: 1, Message: fmt.Sprintf(
			"the trace holds a single event: there is no history, %s; %s", kept, why)})
	}

	if eventStacks == 0 && blockStacks == 0 {
		why := "history was not recorded"
		switch {
		case n > 0 && sn.Generation == snapshot.GenHistory:
			why = "history was recorded with record_context=False"
		case n > 0 && eventsNoKey > 0:
			why = "history was recorded with context=None"
		case n > 0:
			why = `every recorded stack is empty (stacks="python" with only autograd-thread or C++ allocations)`
		}
		out = append(out, Caveat{Kind: NoFrames, Message: "no stacks recorded: " + why + ", so memory cannot be attributed to code"})
	} else if emptyAllocs > 0 {
		out = append(out, Caveat{Kind: EmptyAllocStacks, Count: emptyAllocs, Message: fmt.Sprintf(
			`%d of %d allocations have an empty stack: made by a thread without Python frames (the autograd engine in backward, with stacks="python")`,
			emptyAllocs, allocs)})
	}

	if n > 1 {
		if lostAllocs > 0 || orphanFrees > 0 {
			var evidence []string
			if lostAllocs > 0 {
				evidence = append(evidence, fmt.Sprintf("%s with a stack but no alloc event", units.Plural(lostAllocs, "live block")))
			}
			if orphanFrees > 0 {
				evidence = append(evidence, fmt.Sprintf("%s without a free_requested", units.Plural(orphanFrees, "free_completed event")))
			}
			c := Caveat{Kind: RingWrapped, Count: lostAllocs + orphanFrees}
			switch wrapped, said := overflowed(sn, dev); {
			case said && wrapped:
				c.Message = fmt.Sprintf("the trace ring buffer wrapped at %d events, so the oldest events are lost: %s; raise max_entries to keep them",
					n, strings.Join(evidence, ", "))
			case !said && plausibleMaxEntries(n):
				c.Message = fmt.Sprintf("the trace ring buffer probably wrapped at %d events, so the oldest events are lost: %s; raise max_entries to keep them",
					n, strings.Join(evidence, ", "))
			default:
				why := fmt.Sprintf("%d events is no ring buffer's max_entries", n)
				if said {
					why = "the ring buffer did not overflow (trace_alloc_overflowed)"
				}
				c.Kind, c.Message = HistoryRestarted, fmt.Sprintf(
					"the trace begins after memory that is still live was allocated: %s; %s, so recording was turned off (which clears the history) and on again, or history was cleared",
					strings.Join(evidence, ", "), why)
			}
			out = append(out, c)
		}
		if preBlocks > 0 {
			verb := "have"
			if preBlocks == 1 {
				verb = "has"
			}
			out = append(out, Caveat{Kind: PreRecording, Count: preBlocks, Bytes: preBytes, Message: fmt.Sprintf(
				"%s %s neither an alloc event nor a stack: allocated before recording started (or before the oldest retained event), so the origin is unknown",
				units.Plural(preBlocks, "live block"), verb)})
		}
		if timed == 0 {
			out = append(out, Caveat{Kind: NoTimestamps, Message: "events carry no timestamps (torch < 2.2): no time span or rates"})
		}
	}
	return out
}

// overflowed returns what the file says about whether device dev's ring
// buffer overflowed: torch after 2.11 writes trace_alloc_overflowed, one
// bool per device; said is false for older files.
func overflowed(sn *snapshot.Snapshot, dev int) (wrapped, said bool) {
	if per, ok := sn.Extra["trace_alloc_overflowed"].([]any); ok && dev < len(per) {
		wrapped, said = per[dev].(bool)
	}
	return wrapped, said
}

// plausibleMaxEntries reports whether a trace of n events can be a wrapped
// ring buffer: one holds exactly max_entries events, and people pass round
// numbers (25, 1000, 250000, 2**16), not 7600 or 8694 (public traces that
// were restarted, beside sibling files of other lengths).
func plausibleMaxEntries(n int) bool {
	if n&(n-1) == 0 {
		return true
	}
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n < 10 || n == 15 || n == 25 || n == 75
}
