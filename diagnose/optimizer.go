package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// CauseOptimizerForeach names a peak set by an optimizer's foreach update.
const CauseOptimizerForeach = "optimizer_foreach"

// foreachFrame returns the frame of a torch optimizer's foreach update on a
// stack (_multi_tensor_adam in torch/optim/adam.py): torch's default on
// CUDA, which updates every parameter at once with _foreach_* ops whose
// results are temporaries the size of all the parameters.
func foreachFrame(sn *snapshot.Snapshot, id snapshot.StackID) (snapshot.Frame, bool) {
	if id == snapshot.NoStack {
		return snapshot.Frame{}, false
	}
	for _, fid := range sn.Stack(id) {
		fr := sn.Frames[fid]
		if strings.HasPrefix(fr.Name, "_multi_tensor_") && strings.Contains(strings.ReplaceAll(fr.Filename, `\`, "/"), "torch/optim/") {
			return fr, true
		}
	}
	return snapshot.Frame{}, false
}

// optimizerCause recognises a peak set by an optimizer's foreach update:
// blocks that a _multi_tensor_* function allocates and frees within the
// step are at the peak, and removing them all, over the whole trace (what
// fused=True does: one kernel per parameter, updating in place), lowers it
// by at least minPeakSaving. allocs are the blocks allocated at the peak.
// It returns the cause and those blocks as the line of code that sets the
// peak, or nil.
func optimizerCause(pl *placer, allocs []int, peak int64) (*NamedCause, *TransientLine) {
	tl := pl.tl
	// Every allocation of the trace is asked about: one answer per stack.
	type answer struct {
		fr snapshot.Frame
		ok bool
	}
	memo := map[snapshot.StackID]answer{}
	foreachOf := func(sn *snapshot.Snapshot, id snapshot.StackID) (snapshot.Frame, bool) {
		a, seen := memo[id]
		if !seen {
			a.fr, a.ok = foreachFrame(sn, id)
			memo[id] = a
		}
		return a.fr, a.ok
	}
	var atPeak []int
	var fr snapshot.Frame
	for _, k := range allocs {
		a := tl.Allocation(k)
		if a.Start == replay.BeforeRecording || a.Free == replay.LiveAtEnd {
			continue
		}
		if f, ok := foreachOf(pl.sn, a.Stack); ok {
			atPeak, fr = append(atPeak, k), f
		}
	}
	if len(atPeak) == 0 {
		return nil, nil
	}
	var all []replay.Allocation
	for k := range tl.NumAllocations() {
		a := tl.Allocation(k)
		if a.Start == replay.BeforeRecording || a.Free == replay.LiveAtEnd {
			continue
		}
		if _, ok := foreachOf(pl.sn, a.Stack); ok {
			all = append(all, a)
		}
	}
	without := peaksWithout(tl, all)[0]
	if !lowers(peak, without.Bytes) {
		return nil, nil
	}
	groups := pl.group(atPeak)
	line := &TransientLine{SiteGroup: groups[0], Blocks: len(all), PeakWithout: without}
	var bytes int64
	for _, g := range groups {
		bytes += g.Bytes
	}
	line.Bytes, line.Count = bytes, len(atPeak)
	saving := peak - without.Bytes
	return &NamedCause{
		Name: CauseOptimizerForeach,
		Explanation: "The peak is the optimizer's step: torch's default (foreach) implementation updates every parameter at once with _foreach_* ops, " +
			"whose results are temporaries the size of all the parameters, on top of the parameters, their gradients and the optimizer's state.",
		Fix: "Create the optimizer with fused=True (Adam, AdamW, SGD and Adagrad on CUDA: one kernel updates each parameter in place, without those temporaries) " +
			"or foreach=False (one parameter at a time: temporaries of the largest parameter only, slower).",
		Effect: fmt.Sprintf("Without the foreach temporaries the peak would be %s instead of %s (-%s).",
			units.Bytes(without.Bytes), units.Bytes(peak), units.Bytes(saving)),
		Evidence: []string{
			fmt.Sprintf("%s in %s at the peak are allocated by %s inside %s and freed within the step",
				units.Bytes(bytes), units.Plural(len(atPeak), "block"), callsite.Origin{Frame: fr}, line.Place),
			fmt.Sprintf("%s over the trace come from the foreach update", units.Plural(len(all), "such block")),
		},
	}, line
}
