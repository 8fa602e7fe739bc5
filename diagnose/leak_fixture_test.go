package diagnose

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// leakCulprit is one leaking callsite a scenario's expected.json names.
type leakCulprit struct {
	function string
	// requested is the bytes the script leaks per step (expected.json);
	// the finding's BytesPerStep is the allocator's block for them.
	requested int64
}

// leakScenarios lists the fixtures with a leak inside the trace. The
// step2 dumps hold only two steps, too few to judge (see TestLeakFixtures).
var leakScenarios = map[string][]leakCulprit{
	// leak_closure/expected.json leaked_tensors_per_step.
	"leak_closure/step3/server_rank0_pid561.pickle.gz": {{"compute_next_token_logits", 38928384}, {"allocate_vocab_mask", 1216512}},
	"leak_closure/step4/server_rank0_pid561.pickle.gz": {{"compute_next_token_logits", 38928384}, {"allocate_vocab_mask", 1216512}},
	// two_procs/expected.json leak_bytes_per_step, culprit_functions.
	"two_procs/step3/rollout_rank1_pid751.pickle.gz": {{"cache_prompt_embeddings", 16777216}},
	"two_procs/step4/rollout_rank1_pid751.pickle.gz": {{"cache_prompt_embeddings", 16777216}},
	// train_deep_leak/expected.json leak_bytes_per_step: the fp32 logits of
	// the LM head (TinyGPT.forward), kept by a view every iteration.
	"train_deep_leak/train_deep_leak.pickle.gz": {{"forward", 523264000}},
}

// maxRounding is the most the caching allocator adds to a request: the
// 512-byte rounding plus a large-pool remainder of up to 1 MiB that is
// not split off (the 38928384-byte logits take a 39845888-byte block).
const maxRounding = 1<<20 + 512

// TestLeakFixtures runs step detection and the leak analysis on every
// scenario fixture. The leaks must be found with their culprits and real
// per-step sizes; every other fixture (healthy training and serving, the
// fixed leak, fragmentation, the benchmark seed, peaks and OOMs) must yield
// no leak finding, the one-time cuBLAS workspace and optimizer state
// included.
func TestLeakFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", scenarioDir, "*", "*.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	stepFiles, err := filepath.Glob(filepath.Join("..", scenarioDir, "*", "step*", "*.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, stepFiles...)
	if len(files) < 20 {
		t.Fatalf("found %d fixtures", len(files))
	}
	for _, path := range files {
		rel, err := filepath.Rel(filepath.Join("..", scenarioDir), path)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "depth_") {
			continue // TestDepthFixtures: their truth is per place and cause
		}
		t.Run(rel, func(t *testing.T) {
			sn, tl := stepsScenario(t, filepath.Join(scenarioDir, rel))
			f := testFilter(t)
			r := Leak(sn, tl, DetectSteps(sn, tl, f), f)
			checkLive(t, sn, tl, r, f)
			fds := r.Findings()
			want := leakScenarios[rel]
			if strings.Contains(rel, "/step2/") && !strings.Contains(r.Reason, "2 steps found") {
				t.Errorf("step2 dump: reason %q, want too few steps", r.Reason)
			}
			if len(fds) != len(want) {
				for _, fd := range fds {
					t.Logf("finding: %s", fd.Title)
				}
				t.Fatalf("%d leak findings, want %d", len(fds), len(want))
			}
			for _, c := range want {
				k := slices.IndexFunc(fds, func(fd Finding) bool { return fd.Callsite != nil && fd.Callsite.Function == c.function })
				if k < 0 {
					t.Errorf("no finding for %s", c.function)
					continue
				}
				checkLeakFinding(t, fds[k], c, len(r.Steps.Steps))
			}
		})
	}
}

// checkLive recomputes every site's live bytes at the step boundaries the
// slow way, asking each allocation whether it is allocated there, and
// compares them with what measureSites found by walking the boundaries.
func checkLive(t *testing.T, sn *snapshot.Snapshot, tl *replay.Timeline, r *LeakReport, f *callsite.Filter) {
	t.Helper()
	if len(r.Steps.Steps) == 0 {
		return
	}
	at := boundaries(r.Steps.Steps)
	want := map[string][]int64{}
	pl := newPlacer(sn, tl, f)
	for k := range tl.NumAllocations() {
		a := tl.Allocation(k)
		key := placeKey(pl.alloc(k), a.Stack)
		for j, p := range at {
			if !a.AllocatedAt(p) {
				continue
			}
			if want[key] == nil {
				want[key] = make([]int64, len(at))
			}
			want[key][j] += int64(a.Size)
		}
	}
	for _, s := range r.Sites {
		w := want[s.key]
		if w == nil {
			w = make([]int64, len(at))
		}
		if !slices.Equal(s.Live, w) {
			t.Errorf("%s: live bytes %v at the boundaries, want %v", s.key, s.Live, w)
		}
		delete(want, s.key)
	}
	for key, w := range want {
		t.Errorf("%s: live bytes %v at the boundaries, but no site", key, w)
	}
}

// checkLeakFinding checks one leak finding against the script's numbers:
// growth by exactly the requested bytes, in a block at most maxRounding
// larger, in every step; one block per step still allocated at the end.
func checkLeakFinding(t *testing.T, fd Finding, c leakCulprit, steps int) {
	t.Helper()
	if got := fd.Evidence["requested_bytes_per_step"]; got != c.requested {
		t.Errorf("%s: requested bytes per step %v, want %d", c.function, got, c.requested)
	}
	if fd.BytesPerStep < c.requested || fd.BytesPerStep-c.requested >= maxRounding {
		t.Errorf("%s: %d bytes per step, want the block for %d", c.function, fd.BytesPerStep, c.requested)
	}
	if fd.Bytes != int64(steps)*fd.BytesPerStep {
		t.Errorf("%s: %d bytes at the end, want %d steps of %d", c.function, fd.Bytes, steps, fd.BytesPerStep)
	}
	if fd.Severity != High || fd.Evidence["grew_steps"] != steps-1 || fd.Evidence["relative_spread"] != 0.0 {
		t.Errorf("%s: severity %s, grew %v of %d, spread %v", c.function, fd.Severity, fd.Evidence["grew_steps"], steps-1, fd.Evidence["relative_spread"])
	}
	if len(fd.Stack) == 0 || fd.Stack[0].Function != c.function || !strings.Contains(fd.Fix, c.function) {
		t.Errorf("%s: stack %v, fix %q", c.function, fd.Stack, fd.Fix)
	}
}

// TestLeakFixturesFromPeriodicity repeats the leak verdicts with the steps
// inferred from the allocation pattern alone, as for a trace without
// annotations.
func TestLeakFixturesFromPeriodicity(t *testing.T) {
	for _, rel := range []string{
		"leak_closure/step4/server_rank0_pid561.pickle.gz",
		"two_procs/step4/rollout_rank1_pid751.pickle.gz",
		"leak_fixed/step4/server_rank0_pid592.pickle.gz",
		"two_procs/step4/actor_rank0_pid750.pickle.gz",
		"healthy_train/full_run.pickle.gz",
		"frag_growth/step4/rollout_rank0_pid656.pickle.gz",
		// Five iterations of a 12-layer model: the layers repeat 60 times,
		// but inside one forward or backward pass each.
		"train_deep/train_deep.pickle.gz",
		"train_deep_leak/train_deep_leak.pickle.gz",
	} {
		t.Run(rel, func(t *testing.T) {
			sn, tl := stepsScenario(t, filepath.Join(scenarioDir, rel))
			f := testFilter(t)
			steps := stepsFromPeriod(sn, tl.Trace, f)
			fds := Leak(sn, tl, steps, f).Findings()
			want := leakScenarios[rel]
			if len(fds) != len(want) {
				t.Fatalf("%d leak findings over %d periods, want %d", len(fds), len(steps.Steps), len(want))
			}
			for i, c := range want {
				if fds[i].Callsite == nil || fds[i].Callsite.Function != c.function || fds[i].Evidence["requested_bytes_per_step"] != c.requested {
					t.Errorf("finding %d: %s, want %s leaking %d per step", i, fds[i].Title, c.function, c.requested)
				}
			}
		})
	}
}
