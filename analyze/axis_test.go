package analyze

import (
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
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
		// verl's dump folders: dumps in time order; the same time twice, positions.
		{[]string{"20250601-1200/a.pickle", "20250601-1300/a.pickle"}, "dump", []float64{0, 1}},
		{[]string{"20250601-1200/a.pickle", "20250601-1200/b/a.pickle"}, "snapshot", []float64{0, 1}},
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

// TestLeakPerDump: snapshots in verl's dump-time folders are dumps in time
// order: a callsite that keeps 32 MiB more each dump, dumped every 30
// minutes, leaks 32 MiB every dump and 64 MiB an hour, and says both.
func TestLeakPerDump(t *testing.T) {
	const mib = 1 << 20
	a := New(Options{})
	for i, folder := range []string{"20250601-1200", "20250601-1230", "20250601-1300", "20250601-1330"} {
		path := folder + "/actor_rank0_pid7.pickle"
		a.AddSnapshot(inputs.Input{Path: path, Kind: inputs.Snapshot, Identity: inputs.ParseIdentity(path)}, siteSnapshot(4*(i+1), 8*mib, 8*mib))
	}
	p := a.Report().Processes[0]
	var leak *diagnose.Finding
	for i := range p.Findings {
		if p.Findings[i].Kind == diagnose.KindLeak {
			leak = &p.Findings[i]
		}
	}
	if leak == nil {
		t.Fatalf("no leak in %+v", p.Findings)
	}
	if leak.BytesPerStep != 32*mib || leak.Evidence["per"] != "dump" || leak.Evidence["bytes_per_hour"] != int64(64*mib) {
		t.Errorf("leak %d B per %v, %v an hour; want 32 MiB per dump, 64 MiB an hour", leak.BytesPerStep, leak.Evidence["per"], leak.Evidence["bytes_per_hour"])
	}
	if want := "every dump (64.00 MiB an hour)"; !strings.Contains(leak.Title, want) {
		t.Errorf("title %q, want %q", leak.Title, want)
	}
	if at := leak.Evidence["dumped_at"].([]string); len(at) != 4 || at[1] != "2025-06-01 12:30:00" {
		t.Errorf("dumped_at %v", at)
	}
}
