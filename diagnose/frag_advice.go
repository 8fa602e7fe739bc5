package diagnose

import (
	"fmt"

	"github.com/vramscope/vramscope/internal/units"
)

// significant reports whether part is worth a sentence: at least 16 MiB and
// a tenth of whole. Below that, advice would be noise.
func significant(part, whole int64) bool {
	return part >= int64(16*units.MiB) && part*10 >= whole
}

// fragAdvice derives what to do from the split of r's free memory; each
// sentence is there only because its number is significant.
func fragAdvice(r *FragReport) []string {
	var out []string
	if significant(r.Releasable(), r.Reserved) {
		held := "fully free cached memory"
		switch {
		case r.FreePages > 0 && r.FreeSegments == 0:
			held = "whole free pages of expandable segments still in use, which it unmaps page by page"
		case r.FreePages > 0:
			held = fmt.Sprintf("fully free segments (%s) and whole free pages of expandable segments still in use (%s), which it unmaps page by page",
				units.Bytes(r.FreeSegments), units.Bytes(r.FreePages))
		}
		out = append(out, fmt.Sprintf(
			"torch.cuda.empty_cache() would return %s held in %s; call it after the phase that grew the cache (with set_per_process_memory_fraction, PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 releases it automatically)",
			units.Bytes(r.Releasable()), held))
	}
	if significant(r.Trapped, r.Reserved) && r.Trapped >= r.Releasable() {
		where := units.Plural(r.TrappedCount, "partly used segment")
		if len(r.Pinned) > 0 && len(r.Pinned[0].Pinners) > 0 {
			worst := fmt.Sprintf("%s free in %s", units.Bytes(r.Pinned[0].Free), units.Plural(r.Pinned[0].Holes, "hole"))
			by := r.Pinned[0].Pinners[0].Place.String()
			// With one segment there is no "worst" to single out.
			if r.TrappedCount == 1 {
				where += fmt.Sprintf(" (%s), pinned by %s", worst, by)
			} else {
				where += fmt.Sprintf("; the worst (%s) is pinned by %s", worst, by)
			}
		}
		msg := fmt.Sprintf("%s is free but trapped in %s; empty_cache() cannot return it", units.Bytes(r.Trapped), where)
		if r.Expandable {
			msg += "; with expandable_segments already on, these are slivers of partly used pages: allocate long-lived tensors before the transient ones, or together, so they do not interleave"
		} else {
			msg += "; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the allocator unmap and reuse those holes"
			if mb := splitLimitMB(r); mb > 0 {
				msg += fmt.Sprintf(", or max_split_size_mb:%d stops big cached blocks from being carved up by the smaller requests that pin them", mb)
			}
		}
		out = append(out, msg)
	}
	if significant(r.PendingFree, r.Reserved) {
		out = append(out, fmt.Sprintf(
			"%s is freed but still waits on other streams (record_stream); synchronize those streams or drop the references earlier",
			units.Bytes(r.PendingFree)))
	}
	if significant(r.PrivatePools, r.Reserved) {
		out = append(out, fmt.Sprintf(
			"%s is cached by CUDA-graph or MemPool private pools; only those pools reuse it, and it is released when the graphs or pool are deleted",
			units.Bytes(r.PrivatePools)))
	}
	if significant(r.RoundingWaste, r.Allocated) {
		out = append(out, fmt.Sprintf(
			"%s of the allocated memory is rounding waste (blocks larger than requested); many odd sizes each leave an unsplit remainder",
			units.Bytes(r.RoundingWaste)))
	}
	return out
}

// splitLimitMB suggests max_split_size_mb for trapped memory in big
// segments: the smallest power of two (MiB) above the largest block that
// pins the worst segment, when that segment is at least four times larger
// than it, so that a limit keeps the segment whole. 0 when it would not help.
func splitLimitMB(r *FragReport) int {
	if len(r.Pinned) == 0 || r.Pinned[0].Expandable {
		return 0
	}
	seg := r.Pinned[0]
	if seg.LargestPinner == 0 || seg.Size < 4*seg.LargestPinner {
		return 0
	}
	mb := 1
	for uint64(mb)*uint64(units.MiB) <= seg.LargestPinner {
		mb *= 2
	}
	return mb
}
