package report

import (
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/allocsim"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// WhatIf is a device's reserved bytes as vramscope's model of the caching
// allocator predicts them under the setting it finds best for the trace
// (diagnose.Advice, the setting the OOM and fragmentation findings name),
// on the buckets of the device's Series, so that the page draws them over
// the recorded reserved bytes.
type WhatIf struct {
	// Setting is the candidate, as the findings' simulated_setting names
	// it: "expandable_segments:True", "empty_cache() at step ends", ...
	Setting string `json:"setting"`
	// Advice is the sentence of the findings' fix: "with ... the reserved
	// peak would have been 560.00 MiB instead of 1.13 GiB".
	Advice string `json:"advice"`
	// BaselinePeak is the reserved peak of the model's replay under the
	// recorded settings, PredictedPeak under Setting.
	BaselinePeak  uint64 `json:"baseline_max_reserved_bytes"`
	PredictedPeak uint64 `json:"predicted_max_reserved_bytes"`
	// LimitBytes is the memory cap both replays ran under (the one the
	// trace's OOM or retries imply); 0 for none.
	LimitBytes uint64 `json:"limit_bytes"`
	// ReservedMin and ReservedMax are the predicted reserved bytes of
	// each bucket of Series. They stop at the bucket of OOM when the
	// prediction runs out of memory, as the program would have.
	ReservedMin []int64 `json:"reserved_min"`
	ReservedMax []int64 `json:"reserved_max"`
	// OOM marks where the prediction runs out of memory; nil when it
	// does not.
	OOM *Marker `json:"oom"`
}

// whatIf is the WhatIf of tl on s's buckets; nil where the model has no
// advice for the trace.
func (b *Builder) whatIf(sn *snapshot.Snapshot, tl *replay.Timeline, s Series) *WhatIf {
	if !diagnose.AdviceDue(sn, tl) {
		return nil // no finding will advise a setting: keepAdvised would drop it
	}
	adv := diagnose.Advice(sn, tl, b.opts.Filter)
	if adv == nil {
		return nil
	}
	return predicted(tl.Trace, s, adv.Best.Name, adv.Sentence, adv.Baseline, adv.Best.Result)
}

// predicted puts res's reserved bytes on s's buckets.
func predicted(tr snapshot.Trace, s Series, setting, advice string, base, res *allocsim.Result) *WhatIf {
	w := &WhatIf{Setting: setting, Advice: advice, BaselinePeak: base.MaxReserved, PredictedPeak: res.MaxReserved,
		LimitBytes: res.Config.Limit}
	w.ReservedMin, w.ReservedMax = bucketed(s.First, tr.Len(), res)
	if o := res.OOM; o != nil {
		w.OOM = &Marker{Kind: "oom", Event: o.Event, X: s.x(tr, o.Event),
			Label: fmt.Sprintf("OOM under %s: %s requested with %s reserved", setting, units.Bytes(o.Requested), units.Bytes(o.Reserved))}
	}
	return w
}

// bucketed is the minimum and maximum of res's reserved bytes right after
// each event of the buckets that start at first (the last one ending at
// event n-1), as replay.Timeline.Downsample reduces the recorded ones
// (the device calls of one malloc, a release and retry, count once, as
// they end). Buckets past a predicted OOM are left out.
func bucketed(first []int, n int, res *allocsim.Result) (lo, hi []int64) {
	end := n
	if res.OOM != nil {
		end = res.OOM.Event + 1
	}
	lo, hi = []int64{}, []int64{}
	pts := res.Reserved
	cur := int64(res.Start)
	for k, f := range first {
		if f >= end {
			break
		}
		last := end - 1
		if k+1 < len(first) {
			last = min(last, first[k+1]-1)
		}
		// The value after event f is that of its last device call.
		for len(pts) > 0 && pts[0].Event <= f {
			cur, pts = int64(pts[0].Bytes), pts[1:]
		}
		l, h := cur, cur
		for len(pts) > 0 && pts[0].Event <= last {
			for e := pts[0].Event; len(pts) > 0 && pts[0].Event == e; pts = pts[1:] {
				cur = int64(pts[0].Bytes)
			}
			l, h = min(l, cur), max(h, cur)
		}
		lo, hi = append(lo, l), append(hi, h)
	}
	return lo, hi
}

// keepAdvised drops the WhatIf of the devices whose findings do not
// advise its setting: the chart shows the numbers behind the advice on
// the page, not a setting no finding asked for.
func keepAdvised(pr *Process) {
	advised := map[int]map[string]bool{}
	for _, f := range pr.Findings {
		if s, ok := f.Evidence["simulated_setting"].(string); ok {
			if advised[f.Device] == nil {
				advised[f.Device] = map[string]bool{}
			}
			advised[f.Device][s] = true
		}
	}
	for i := range pr.Snapshots {
		sv := &pr.Snapshots[i]
		// The Builder keeps its views for the next Finish: copy before
		// changing one.
		sv.Devices = slices.Clone(sv.Devices)
		for j := range sv.Devices {
			if w := sv.Devices[j].WhatIf; w != nil && !advised[sv.Devices[j].Device][w.Setting] {
				sv.Devices[j].WhatIf = nil
			}
		}
	}
}

// check lists the inconsistencies of w on a timeline of n buckets and
// events events.
func (w *WhatIf) check(n, events int) []error {
	if w == nil {
		return nil
	}
	var errs []error
	if len(w.ReservedMin) != len(w.ReservedMax) || len(w.ReservedMax) > n {
		errs = append(errs, fmt.Errorf("what-if has %d and %d buckets for a timeline of %d", len(w.ReservedMin), len(w.ReservedMax), n))
	}
	if w.OOM != nil && (w.OOM.Event < 0 || w.OOM.Event >= events) {
		errs = append(errs, fmt.Errorf("what-if OOM at event %d of %d", w.OOM.Event, events))
	}
	return errs
}
