package diagnose

import (
	"github.com/vramscope/vramscope/allocsim"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// maxSimulatedEvents bounds the traces whose advice is checked against the
// allocator model: trying the candidate settings costs a few replays of
// the trace, which a trace of millions of events would feel on every
// analyze (vramscope simulate --recommend does it there on request).
const maxSimulatedEvents = 1_000_000

// Advice is the setting the allocator model finds best for tl's trace
// (allocsim.Advise tries expandable segments, empty_cache() at the ends of
// the steps found, max_split_size_mb, garbage_collection_threshold and
// roundup_power2_divisions) and what the run would have done under it.
// It is nil where no candidate helps, the model cannot replay the trace,
// or the trace is longer than the advice of analyze replays.
func Advice(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) *allocsim.Advice {
	if tl.Len() == 0 || tl.Trace.Len() > maxSimulatedEvents {
		return nil
	}
	adv, err := allocsim.Advise(sn, tl.Device, DetectSteps(sn, tl, f).Ends(tl.Trace.Len()))
	if err != nil {
		return nil
	}
	return adv
}

// simulateAdvice puts the model's numbers on the advice of the OOM and
// fragmentation findings (Advice). Nothing changes where there is none.
func simulateAdvice(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, fs []Finding) {
	var advised []int
	for i, fd := range fs {
		if fd.Kind == KindOOM || fd.Kind == KindFragmentation {
			advised = append(advised, i)
		}
	}
	if len(advised) == 0 {
		return
	}
	adv := Advice(sn, tl, f)
	if adv == nil {
		return
	}
	for _, i := range advised {
		fd := &fs[i]
		fd.Evidence["simulated_setting"] = adv.Best.Name
		fd.Evidence["simulated_reserved_peak_bytes"] = adv.Best.Result.MaxReserved
		fd.Evidence["simulated_oom"] = adv.Best.Result.OOM != nil
		fd.Fix = "Replayed through vramscope's model of the caching allocator, " + adv.Sentence +
			" (vramscope simulate --recommend compares every candidate). " + fd.Fix
	}
}
