package allocsim

import (
	"regexp"
	"testing"

	"github.com/vramscope/vramscope/allocator"
)

// TestWhatIfAgainstRecordedVariants predicts, from the default run's
// trace, the runs of the same scenario recorded under another setting
// (testdata/scenarios: the same seeded program, only the setting changed)
// and compares with what those runs recorded.
func TestWhatIfAgainstRecordedVariants(t *testing.T) {
	for _, tc := range []struct {
		name, base, variant string
		conf                string
		emptyCacheAfter     string // annotation regexp
		sameLimit           bool   // replay under the cap the base run's OOM implies
	}{
		{"expandable fixes frag_growth",
			"testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz",
			"testdata/scenarios/out/frag_growth_expandable/step4/rollout_rank0_pid718.pickle.gz",
			"expandable_segments:True", "", false},
		{"empty_cache at step ends fixes frag_growth",
			"testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz",
			"testdata/scenarios/out/frag_growth_emptycache/step4/rollout_rank0_pid687.pickle.gz",
			"", `^rollout_step#\d+$`, false},
		{"expandable avoids frag_oom's OOM",
			"testdata/scenarios/out/frag_oom/frag_oom.pickle.gz",
			"testdata/scenarios/out/frag_oom_expandable/frag_oom_expandable.pickle.gz",
			"expandable_segments:True", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, variant := load(t, tc.base), load(t, tc.variant)
			brec, err := Record(base, 0)
			if err != nil {
				t.Fatal(err)
			}
			vrec, err := Record(variant, 0)
			if err != nil {
				t.Fatal(err)
			}
			s, err := allocator.Parse(tc.conf)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{}
			if tc.sameLimit {
				cfg.Limit = brec.Limit
			}
			if tc.emptyCacheAfter != "" {
				cfg.EmptyCacheAt = AnnotationEnds(base, 0, regexp.MustCompile(tc.emptyCacheAfter))
				if len(cfg.EmptyCacheAt) == 0 {
					t.Fatal("no annotation matched")
				}
			}
			res, err := Run(base, brec, s, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("base peak %d, predicted %d (oom %v), variant recorded %d (oom %v)", brec.MaxReserved, res.MaxReserved, res.OOM != nil, vrec.MaxReserved, vrec.OOM != nil)
			if res.MaxReserved != vrec.MaxReserved {
				t.Errorf("predicted reserved peak %d, the variant recorded %d", res.MaxReserved, vrec.MaxReserved)
			}
			if (res.OOM != nil) != (vrec.OOM != nil) {
				t.Errorf("predicted OOM %v, the variant recorded OOM %v", res.OOM != nil, vrec.OOM != nil)
			}
		})
	}
}

func TestAdvise(t *testing.T) {
	sn := load(t, "testdata/scenarios/out/frag_oom/frag_oom.pickle.gz")
	a, err := Advise(sn, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a == nil {
		t.Fatal("no advice for frag_oom, which expandable segments fixed on the GPU")
	}
	const want = "with expandable_segments:True the OOM at event 34 would not have happened: the reserved peak would have been 2.50 GiB under the 3.09 GiB cap"
	if a.Sentence != want {
		t.Errorf("advice %q, want %q", a.Sentence, want)
	}
}

func TestAdviseFragmentation(t *testing.T) {
	sn := load(t, "testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz")
	a, err := Advise(sn, 0, nil)
	if err != nil || a == nil {
		t.Fatalf("advice %v, error %v", a, err)
	}
	// frag_growth_expandable recorded 560 MiB on the GPU.
	const want = "with expandable_segments:True the reserved peak would have been 560.00 MiB instead of 1.13 GiB"
	if a.Sentence != want {
		t.Errorf("advice %q, want %q", a.Sentence, want)
	}
}
