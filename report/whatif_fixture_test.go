package report_test

import (
	"slices"
	"testing"

	"github.com/vramscope/vramscope/report"
)

// TestWhatIfFixtures checks the what-if curve on the GPU recordings whose
// variants were recorded under the advised setting.
func TestWhatIfFixtures(t *testing.T) {
	for _, tc := range []struct {
		path, setting  string
		baseline, peak uint64 // the model's replays (baseline: the recording's own, its validation is exact); peak: the variant's recorded max_memory_reserved
		limit          uint64
	}{
		// frag_growth_expandable recorded 587202560 B reserved.
		{"../testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz", "expandable_segments:True", 1212153856, 587202560, 0},
		// frag_oom ran out of memory under a 3.09 GiB cap; its
		// frag_oom_expandable variant did not.
		{"../testdata/scenarios/out/frag_oom/frag_oom.pickle.gz", "expandable_segments:True", 2684354560, 2684354560, 3313500159},
	} {
		p := build(t, report.Options{}, tc.path)
		dv := p.Processes[0].Snapshots[0].Devices[0]
		w := dv.WhatIf
		if w == nil {
			t.Errorf("%s: no what-if", tc.path)
			continue
		}
		if w.Setting != tc.setting || w.BaselinePeak != tc.baseline || w.PredictedPeak != tc.peak || w.LimitBytes != tc.limit {
			t.Errorf("%s: %s, baseline %d, predicted %d, cap %d; want %s, %d, %d, %d",
				tc.path, w.Setting, w.BaselinePeak, w.PredictedPeak, w.LimitBytes, tc.setting, tc.baseline, tc.peak, tc.limit)
		}
		if len(w.ReservedMax) != len(dv.Series.X) || w.OOM != nil {
			t.Errorf("%s: the prediction covers %d of %d buckets (OOM %v), want all", tc.path, len(w.ReservedMax), len(dv.Series.X), w.OOM)
		}
		if got := slices.Max(w.ReservedMax); uint64(got) != tc.peak {
			t.Errorf("%s: the curve peaks at %d, the prediction at %d", tc.path, got, tc.peak)
		}
		for _, f := range p.Processes[0].Findings {
			if s, ok := f.Evidence["simulated_setting"]; ok && s != w.Setting {
				t.Errorf("%s: finding %q advises %v, the chart shows %s", tc.path, f.Title, s, w.Setting)
			}
		}
	}
}

// TestWhatIfOnlyWithAdvice: a healthy recording gets no what-if chart.
func TestWhatIfOnlyWithAdvice(t *testing.T) {
	p := build(t, report.Options{}, "../testdata/scenarios/out/leak_closure")
	for _, sv := range p.Processes[0].Snapshots {
		for _, dv := range sv.Devices {
			if dv.WhatIf != nil {
				t.Errorf("%s cuda:%d: a what-if (%s) without a finding advising it", sv.Input, dv.Device, dv.WhatIf.Setting)
			}
		}
	}
}
