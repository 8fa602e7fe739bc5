package analyze

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/trend"
	"github.com/vramscope/vramscope/internal/units"
)

// minCacheGrowthPerStep is the least steady growth of cached memory
// (reserved minus allocated) reported: the allocator rounds segments to
// 2 MiB, so less is one segment's rounding.
const minCacheGrowthPerStep = 2 << 20

// Reserved memory over the peak allocated: the cache must hold one peak's
// working set, so reserved up to about 1.5x the peak is the allocator doing
// its job (frag_growth_expandable: 1.24x) and only growth beyond it is
// fragmentation worth fixing (frag_growth: 2.57x after three steps).
const (
	fragRatioMedium = 1.5
	fragRatioHigh   = 2.0
)

// cacheSeries is a device's allocated and reserved bytes over time and the
// peak allocated bytes the cache must be able to hold.
type cacheSeries struct {
	ax                  axis
	allocated, reserved []int64
	// peak is the highest allocated total known; peakSource says where it
	// comes from.
	peak       int64
	peakSource string
	expandable bool
}

// fragmentation reports cached memory (reserved minus allocated) that grows
// steadily. A one-off warm-up of the cache (a jump, then flat) is not
// steady growth and is not reported.
func fragmentation(cs cacheSeries) (diagnose.Finding, bool) {
	n := len(cs.reserved)
	cached := make([]int64, n)
	for i := range cached {
		cached[i] = cs.reserved[i] - cs.allocated[i]
	}
	t := fit(cs.ax.xs, cached)
	if !growing(t, minCacheGrowthPerStep) {
		return diagnose.Finding{}, false
	}
	peak := max(cs.peak, slices.Max(cs.allocated))
	ratio := float64(cs.reserved[n-1]) / float64(max(peak, 1))
	perStep := units.Bytes(math.Round(t.PerStep))

	sev := diagnose.Low
	title := fmt.Sprintf("reserved memory creeps up %s per %s but stays within %.1fx the peak allocated (%.2fx)", perStep, cs.ax.per, fragRatioMedium, ratio)
	if ratio >= fragRatioMedium {
		sev = diagnose.Medium
		if ratio >= fragRatioHigh {
			sev = diagnose.High
		}
		flat := "while allocated stays flat"
		if trend.TheilSen(cs.ax.xs, cs.allocated) >= minLeakPerStep {
			flat = "on top of allocated growth"
		}
		title = fmt.Sprintf("cached memory grows %s per %s %s: reserved is %.2fx the peak allocated", perStep, cs.ax.per, flat, ratio)
	}
	ev := cs.ax.evidence()
	putSeries(ev, "reserved_bytes", cs.reserved)
	putSeries(ev, "allocated_bytes", cs.allocated)
	putSeries(ev, "cached_bytes", cached)
	ev["peak_allocated_bytes"] = peak
	ev["peak_source"] = cs.peakSource
	ev["reserved_to_peak"] = round2(ratio)
	ev["steadiness"] = round2(t.Steadiness)
	return diagnose.Finding{
		Kind:         diagnose.KindFragmentation,
		Severity:     sev,
		Title:        title,
		Bytes:        t.Last - t.First,
		BytesPerStep: int64(perStep),
		Stack:        []diagnose.Frame{},
		Evidence:     ev,
	}, true
}

// maxSeriesEvidence bounds the series a finding quotes: a per-second log
// of a day has 86400 samples, and its first and last say enough.
const maxSeriesEvidence = 20

func putSeries(ev map[string]any, name string, ys []int64) {
	if len(ys) <= maxSeriesEvidence {
		ev[name] = ys
		return
	}
	ev[name] = []int64{ys[0], ys[len(ys)-1]}
}

// snapshotFragmentation compares one device's snapshots and blames the
// site whose allocations reserved the most memory that is new since the
// first snapshot.
func (a *Analyzer) snapshotFragmentation(ax axis, dev int, series []*deviceDigest) (diagnose.Finding, bool) {
	cs := cacheSeries{ax: ax, peakSource: "trace"}
	traced := false
	for _, dd := range series {
		cs.allocated = append(cs.allocated, dd.allocated)
		cs.reserved = append(cs.reserved, dd.reserved)
		cs.expandable = cs.expandable || dd.expandable
		if dd.traced {
			traced = true
			cs.peak = max(cs.peak, dd.peakAllocated)
		}
	}
	if !traced {
		cs.peakSource = "allocated at the dumps (no trace: the real peak is higher, so the ratio overstates)"
	}
	f, ok := fragmentation(cs)
	if !ok {
		return f, false
	}
	f.Device = dev
	first, last := series[0], series[len(series)-1]
	f.Evidence["free_in_used_segments_bytes"] = last.freeInUsed
	f.Evidence["free_segments_bytes"] = last.freeSegments
	f.Fix = fragFix(f.Severity, cs.expandable, last.freeSegments >= last.freeInUsed)

	newBySite := map[string]int64{}
	var newTotal int64
	for b, k := range last.chunks {
		if _, ok := first.chunks[b]; !ok {
			newBySite[k] += int64(b.size)
			newTotal += int64(b.size)
		}
	}
	f.Evidence["new_reserved_bytes"] = newTotal
	if len(newBySite) == 0 {
		f.Evidence["callsite_reason"] = "no reserved range is new since the first snapshot"
		return f, true
	}
	top := slices.MaxFunc(slices.Sorted(maps.Keys(newBySite)), func(x, y string) int { return cmp.Compare(newBySite[x], newBySite[y]) })
	f.Evidence["culprit_new_reserved_bytes"] = newBySite[top]
	a.sites.get(top).blame(&f)
	return f, true
}

// fragFix says what to change, from where the cached memory sits.
func fragFix(sev diagnose.Severity, expandable, inFreeSegments bool) string {
	switch {
	case sev == diagnose.Low:
		return "Nothing to change while reserved stays near the peak; if it keeps climbing over a longer run, " +
			"call torch.cuda.empty_cache() every N steps."
	case expandable:
		return "Expandable segments are already on: call torch.cuda.empty_cache() after each step (or every N steps) " +
			"to return the cached pages, or reduce the spread of tensor sizes (pad to a few bucket sizes)."
	case inFreeSegments:
		return "The extra reserved memory sits in fully free cached segments, one kept for each new size: " +
			"set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so segments grow and shrink in place, " +
			"or call torch.cuda.empty_cache() after each step (or every N steps)."
	}
	return "The free memory is trapped inside segments that still hold live tensors, which empty_cache() cannot release: " +
		"set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, allocate long-lived tensors before the variable-size ones, " +
		"or pad variable sizes to a few buckets."
}
