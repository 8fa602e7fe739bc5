package allocsim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/snapshot"
)

func load(t *testing.T, path string) *snapshot.Snapshot {
	t.Helper()
	return testutil.Snapshot(t, filepath.Join("..", filepath.FromSlash(path)))
}

// TestValidateFixtures replays each real GPU fixture under its recorded
// settings with the recorded addresses: where the trace holds the whole
// run on one stream, the model's cudaMalloc/cudaFree/map/unmap calls are
// the recorded ones, in count, size and order, and its OOM is the recorded
// OOM. Where it cannot be exact, the validation says why.
func TestValidateFixtures(t *testing.T) {
	for _, tc := range []struct {
		path        string
		exact       bool
		events      int    // recorded device events
		peak        uint64 // recorded reserved peak
		oom         bool
		emptyCaches int
		note        string // a note the validation must give
	}{
		{"snapshot/testdata/format/default.pickle", true, 9, 234881024, true, 0, "capacity taken as"},
		{"snapshot/testdata/legacy/v2_0_history.pickle", true, 9, 234881024, true, 0, "no allocator settings (torch before 2.3)"},
		{"snapshot/testdata/format/nocontext.pickle", true, 9, 234881024, true, 0, "records no stacks (_record_memory_history(context=None))"},
		{"snapshot/testdata/format/expandable.pickle", true, 8, 216006656, true, 0, ""},
		{"snapshot/testdata/format/unmap.pickle", true, 9, 167772160, false, 1, ""},
		{"snapshot/testdata/format/fragoom.pickle", true, 57, 2107637760, true, 0, "a cap refused"},
		{"snapshot/testdata/format/fragoom_expandable.pickle", true, 41, 2118123520, true, 0, "a cap refused"},
		{"snapshot/testdata/format/pending.pickle", true, 3, 44040192, false, 0, "2 streams"},
		{"testdata/scenarios/out/frag_oom/frag_oom.pickle.gz", true, 2, 2684354560, true, 0, "a cap refused"},
		{"testdata/scenarios/out/frag_oom_expandable/frag_oom_expandable.pickle.gz", true, 11, 2684354560, false, 0, "a cap refused"},
		{"testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz", true, 10, 1212153856, false, 0, ""},
		{"testdata/scenarios/out/frag_growth_expandable/step4/rollout_rank0_pid718.pickle.gz", true, 7, 587202560, false, 0, ""},
		{"testdata/scenarios/out/frag_growth_emptycache/step4/rollout_rank0_pid687.pickle.gz", true, 31, 677380096, false, 4, ""},
		{"testdata/scenarios/out/train_deep/train_deep.pickle.gz", true, 120, 6119489536, false, 0, ""},
		{"testdata/scenarios/out/bench_source/bench_source.pickle.gz", true, 48, 1140850688, false, 0, ""},
		// A CUDA graph's and a MemPool's segments, replayed as fixed bytes.
		{"snapshot/testdata/format/graphs_pools.pickle", true, 5, 85983232, false, 0, "replayed as fixed bytes"},
		// Late starts: exact from the state the replay rebuilds.
		{"snapshot/testdata/format/train.pickle", true, 14, 257949696, false, 0, "state rebuilt"},
		{"snapshot/testdata/format/ring.pickle", true, 1, 234881024, true, 0, "state rebuilt"},
		{"snapshot/testdata/format/prehistory.pickle", true, 0, 20971520, false, 0, "state rebuilt"},
		{"testdata/scenarios/out/forward_deep/forward_deep.pickle.gz", true, 0, 8090812416, false, 0, "state rebuilt"},
		{"testdata/scenarios/out/forward_deep_mixed/forward_deep_mixed.pickle.gz", true, 0, 10477371392, false, 0, "state rebuilt"},
	} {
		t.Run(filepath.Base(filepath.Dir(tc.path))+"/"+filepath.Base(tc.path), func(t *testing.T) {
			sn := load(t, tc.path)
			rec, err := Record(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			v, res, err := Validate(sn, rec)
			if err != nil {
				t.Fatal(err)
			}
			if v.Exact != tc.exact {
				t.Errorf("exact = %v, want %v (%s; notes %q)", v.Exact, tc.exact, v.FirstDivergence, v.Notes)
			}
			if v.Recorded != tc.events || rec.MaxReserved != tc.peak {
				t.Errorf("recorded %d device events, peak %d; want %d, %d", v.Recorded, rec.MaxReserved, tc.events, tc.peak)
			}
			if tc.exact && res.MaxReserved != rec.MaxReserved {
				t.Errorf("model's reserved peak %d, recorded %d", res.MaxReserved, rec.MaxReserved)
			}
			if (rec.OOM != nil) != tc.oom || (res.OOM != nil) != (tc.oom && tc.exact) && tc.exact {
				t.Errorf("recorded OOM %v, model OOM %v, want %v", rec.OOM != nil, res.OOM != nil, tc.oom)
			}
			if rec.EmptyCaches != tc.emptyCaches {
				t.Errorf("found %d empty_cache calls, want %d", rec.EmptyCaches, tc.emptyCaches)
			}
			if tc.note != "" && !strings.Contains(strings.Join(v.Notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", v.Notes, tc.note)
			}
			if stackless := strings.Contains(strings.Join(v.Notes, "\n"), "no stacks"); stackless != strings.Contains(tc.note, "no stacks") {
				t.Errorf("notes %q: a note on missing stacks = %v", v.Notes, stackless)
			}
		})
	}
}
