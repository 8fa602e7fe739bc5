package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
)

// oomFacts are the numbers an OOM explanation rests on, whether they come
// from a trace's oom event or from torch's message text. Zero means unknown.
type oomFacts struct {
	who         string // "compute_logprobs (train.py:40)" or "the program"
	request     uint64 // rounded request; 0 when only the segment size is known
	segment     uint64 // the allocation that failed ("Tried to allocate")
	allocated   int64
	reserved    int64
	trapped     int64 // reserved but unallocated at the failure
	deviceFree  uint64
	allowed     int64 // the per-process cap when known
	fraction    bool  // a per-process memory fraction was in force
	expandable  bool
	largestFree string // "the largest free block, 256.00 MiB, is 344.00 MiB short"
	top         []string
}

// paragraph is the explanation a person can act on: what was asked, why
// neither the cache nor the GPU could serve it, and what to change, with
// each remedy chosen by the numbers.
func (o oomFacts) paragraph() string {
	var s []string
	add := func(format string, args ...any) { s = append(s, fmt.Sprintf(format, args...)) }
	seg := units.Bytes(o.segment)
	if o.request > 0 {
		add("%s asked for %s (rounded as the allocator rounds), so with no cached block that large the allocator needed a new %s segment.",
			o.who, units.Bytes(o.request), seg)
	} else {
		add("The allocator tried to reserve a %s segment (%s).", seg, segmentMeaning(o.segment))
	}
	add("PyTorch had %s allocated and %s reserved; %s of the reserved memory was free but trapped in segments that still hold live blocks (at an OOM the allocator has already returned every fully free segment).",
		units.Bytes(o.allocated), units.Bytes(o.reserved), units.Bytes(o.trapped))
	if o.largestFree != "" {
		add("%s.", o.largestFree)
	}
	switch {
	case o.fraction && o.allowed > 0:
		add("The GPU still had %s free, but set_per_process_memory_fraction capped this process at %s, and %s reserved plus the new %s exceeds it.",
			units.Bytes(o.deviceFree), units.Bytes(o.allowed), units.Bytes(o.reserved), seg)
	case o.fraction:
		add("The GPU still had %s free, more than the segment, so cudaMalloc failed because a per-process memory fraction was in force: its cap lies between %s and %s.",
			units.Bytes(o.deviceFree), units.Bytes(o.reserved), units.Bytes(o.reserved+int64(o.segment)))
	default:
		add("The GPU had only %s free, less than the segment.", units.Bytes(o.deviceFree))
	}
	switch {
	case o.trapped >= int64(o.segment) && !o.expandable:
		add("The trapped memory alone would have served the request had it been in one piece: this OOM is fragmentation, and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the allocator unmap those holes and map them again contiguously.")
	case o.trapped >= int64(o.segment):
		add("The trapped memory alone would have served the request had it been in one piece; with expandable segments on, it sits in partly used pages: allocate long-lived tensors before or apart from transient ones.")
	case !o.fraction && o.trapped > 0 && int64(o.deviceFree)+o.trapped >= int64(o.segment) && !o.expandable:
		add("The free GPU memory plus the trapped memory would have been enough: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True can turn the trapped holes into usable pages.")
	case o.fraction:
		add("Raise the fraction, or lower what the process keeps allocated.")
	default:
		add("The live tensors simply need more memory than the GPU has left: lower the peak.")
	}
	// One allocation of 5% or more of everything allocated is a tensor
	// worth splitting (seed 002's upcast logits).
	if o.segment > 0 && int64(o.segment)*20 >= o.allocated {
		add("That single %s allocation is %d%% of the %s allocated: computing the tensor in chunks would need a fraction of it.",
			seg, int64(o.segment)*100/max(o.allocated, 1), units.Bytes(o.allocated))
	}
	if len(o.top) > 0 {
		add("Most allocated memory at the failure comes from %s.", strings.Join(o.top, ", "))
	}
	return strings.Join(s, " ")
}

// segmentMeaning says what request a segment size implies.
func segmentMeaning(seg uint64) string {
	switch seg {
	case smallBuffer:
		return "a request of at most 1 MiB, for the small pool"
	case largeBuffer:
		return "a request between 1 and 10 MiB, or of 20 MiB"
	}
	return "a request of about that size, rounded up to 2 MiB"
}
