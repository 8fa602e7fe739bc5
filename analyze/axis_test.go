package analyze

import (
	"slices"
	"testing"

	"github.com/vramscope/vramscope/inputs"
)

// TestAxisOf checks that any counter in the snapshots' paths makes steps,
// and that the growth per step then says what a step counts.
func TestAxisOf(t *testing.T) {
	tests := []struct {
		paths []string
		per   string
		xs    []float64
	}{
		{[]string{"run/step2/a_rank0.pickle", "run/step3/a_rank0.pickle", "run/step4/a_rank0.pickle"}, "step", []float64{2, 3, 4}},
		{[]string{"serve/req012/s_rank0.pickle", "serve/req013/s_rank0.pickle"}, "request", []float64{12, 13}},
		{[]string{"ck/iter_000300/a.pickle", "ck/iter_000600/a.pickle"}, "iteration", []float64{300, 600}},
		{[]string{"global_step_40/a.pickle", "global_step_80/a.pickle"}, "step", []float64{40, 80}},
		{[]string{"epoch3/a.pickle", "epoch4/a.pickle"}, "epoch", []float64{3, 4}},
		// Counters of different units, a repeated step or a missing one: positions.
		{[]string{"epoch3/a.pickle", "step4/a.pickle"}, "snapshot", []float64{0, 1}},
		{[]string{"step3/a.pickle", "step3/b.pickle"}, "snapshot", []float64{0, 1}},
		{[]string{"20250601-1200/a.pickle", "20250601-1300/a.pickle"}, "snapshot", []float64{0, 1}},
	}
	for _, tt := range tests {
		var snaps []*digest
		for _, p := range tt.paths {
			snaps = append(snaps, &digest{in: inputs.Input{Path: p, Identity: inputs.ParseIdentity(p)}})
		}
		ax := axisOf(snaps)
		if ax.per != tt.per || !slices.Equal(ax.xs, tt.xs) {
			t.Errorf("axisOf(%q) = per %q xs %v, want per %q xs %v", tt.paths, ax.per, ax.xs, tt.per, tt.xs)
		}
	}
}
