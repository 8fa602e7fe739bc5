package diagnose

import (
	"runtime"
	"slices"
	"sync"
	"weak"

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
// or the trace is longer than the advice of analyze replays. The answer
// is kept while sn lives: report's views and analyze's findings ask for
// it one after the other, and it costs a dozen replays of the trace.
func Advice(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) *allocsim.Advice {
	if tl.Len() == 0 || tl.Trace.Len() > maxSimulatedEvents {
		return nil
	}
	k := adviceKey{weak.Make(sn), tl.Device, f}
	v, loaded := advised.LoadOrStore(k, &adviceOnce{})
	if !loaded {
		runtime.AddCleanup(sn, func(k adviceKey) { advised.Delete(k) }, k)
	}
	a := v.(*adviceOnce)
	a.once.Do(func() {
		// An error is a trace the model cannot replay: no advice.
		a.adv, _ = allocsim.Advise(sn, tl.Device, DetectSteps(sn, tl, f).Ends(tl.Trace.Len()))
	})
	return a.adv
}

// advised holds Advice's answers by snapshot, device and filter (the
// steps found, hence the empty_cache() candidate, depend on the filter),
// each dropped when its snapshot is collected.
var advised sync.Map // adviceKey -> *adviceOnce

type adviceKey struct {
	sn     weak.Pointer[snapshot.Snapshot]
	device int
	filter *callsite.Filter
}

type adviceOnce struct {
	once sync.Once
	adv  *allocsim.Advice
}

// AdviceDue reports whether tl can get the findings whose advice the
// allocator model backs (FragFinding's and the OOMs'): an oom event, a
// cache that grew significantly past the allocated peak (FragFinding's
// "grown", exactly), or a significant gap between reserved and allocated
// bytes at the end (which the trapped bytes need). A front end that asks
// for Advice before the findings are known checks it first: it costs a
// few passes over the timeline, Advice a dozen replays.
func AdviceDue(sn *snapshot.Snapshot, tl *replay.Timeline) bool {
	if tl.Len() == 0 {
		return false
	}
	if len(oomEvents(tl.Trace)) > 0 {
		return true
	}
	_, reserved, allocated := peaksSince(sn, tl)
	end := tl.At(tl.Len() - 1)
	return reserved.Index >= 0 && significant(reserved.Bytes-allocated.Bytes, reserved.Bytes) ||
		significant(end.Reserved-end.Allocated, end.Reserved)
}

// simulateAdvice puts the model's numbers on the advice of the findings
// of the kinds given, OOM and fragmentation findings (Advice). Nothing
// changes where there is none.
func simulateAdvice(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, fs []Finding, kinds []Kind) {
	var advised []int
	for i, fd := range fs {
		if (fd.Kind == KindOOM || fd.Kind == KindFragmentation) && slices.Contains(kinds, fd.Kind) {
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
