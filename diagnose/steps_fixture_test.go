package diagnose

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// scenarioDir holds the real-GPU fixtures (testdata/scenarios/README.md),
// relative to the repository root.
const scenarioDir = "testdata/scenarios/out"

// stepsScenario reads a fixture (relative to the repository root) and
// replays its device 0.
func stepsScenario(t *testing.T, rel string) (*snapshot.Snapshot, *replay.Timeline) {
	t.Helper()
	sn := testutil.Snapshot(t, filepath.Join("..", rel))
	tl, err := replay.Device(sn, 0)
	if err != nil {
		t.Fatalf("replaying %s: %v", rel, err)
	}
	return sn, tl
}

// TestFixtureSteps checks the steps found in the scenario fixtures against
// the markers their scripts set (testdata/scenarios/*.py): each step's
// record_function("<name>#N"), Adam's Optimizer.step in train.pickle, and
// nothing in the single-pass peak scripts.
func TestFixtureSteps(t *testing.T) {
	tests := []struct {
		file   string
		source StepSource
		marker string
		steps  int
		first  string // first step's label, or what the reason says when there is none
	}{
		{"testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz", SourceAnnotation, "event_loop_step#N", 4, "event_loop_step#1"},
		{"testdata/scenarios/out/leak_closure/step2/server_rank0_pid561.pickle.gz", SourceAnnotation, "event_loop_step#N", 2, "event_loop_step#1"},
		{"testdata/scenarios/out/healthy_train/full_run.pickle.gz", SourceAnnotation, "train_step#N", 6, "train_step#1"},
		{"testdata/scenarios/out/two_procs/step4/rollout_rank1_pid751.pickle.gz", SourceAnnotation, "rollout_step#N", 4, "rollout_step#1"},
		{"testdata/scenarios/out/two_procs/step3/actor_rank0_pid750.pickle.gz", SourceAnnotation, "actor_step#N", 3, "actor_step#1"},
		// eval#N ranges (every 50 steps) and the optimizer's own ranges
		// are there too; train_step#N covers the most events.
		{"testdata/scenarios/out/bench_source/bench_source.pickle.gz", SourceAnnotation, "train_step#N", 294, "train_step#1"},
		{"snapshot/testdata/format/train.pickle", SourceAnnotation, "Optimizer.step#Adam.step", 2, "Optimizer.step#Adam.step (1)"},
		{"testdata/scenarios/out/peak_upcast/peak_upcast.pickle.gz", "", "", 0, "no step markers"},
		// Five training iterations of a 12-layer model: the optimizer's
		// ranges, not the 60 repeats of the layers.
		{"testdata/scenarios/out/train_deep/train_deep.pickle.gz", SourceAnnotation, "Optimizer.step#AdamW.step", 5, "Optimizer.step#AdamW.step (1)"},
		{"testdata/scenarios/out/train_deep_leak/train_deep_leak.pickle.gz", SourceAnnotation, "Optimizer.step#AdamW.step", 5, "Optimizer.step#AdamW.step (1)"},
		// One grad-enabled forward of 32 layers (expected.json: steps 0):
		// the layers repeat inside TinyGPT.forward, between the embedding
		// (line 53) and the head (line 56).
		{"testdata/scenarios/out/forward_deep/forward_deep.pickle.gz", "", "", 0,
			"one pass, no steps: the 32 repeats opened by the allocation at attention (/work/main/testdata/scenarios/_deep.py:27) run inside one call of forward (scenarios/_deep.py) at line 55, which also allocates before them (line 53) and after them (line 56)"},
		// The same with 48 layers under autocast: no pattern fits at all.
		{"testdata/scenarios/out/forward_deep_mixed/forward_deep_mixed.pickle.gz", "", "", 0, "no repeating allocation pattern"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(filepath.Dir(tt.file))+"/"+filepath.Base(tt.file), func(t *testing.T) {
			sn, tl := stepsScenario(t, tt.file)
			got := DetectSteps(sn, tl, testFilter(t))
			if got.Source != tt.source || got.Marker != tt.marker || len(got.Steps) != tt.steps {
				t.Fatalf("got %d steps from %q (%q), want %d from %q (%q); reason: %s",
					len(got.Steps), got.Source, got.Marker, tt.steps, tt.source, tt.marker, got.Reason)
			}
			if tt.steps == 0 {
				if !strings.Contains(got.Reason, tt.first) {
					t.Errorf("reason %q does not say %q", got.Reason, tt.first)
				}
				return
			}
			if got.Steps[0].Label != tt.first {
				t.Errorf("first step %q, want %q", got.Steps[0].Label, tt.first)
			}
			checkStepOrder(t, got.Steps, tl.Len())
		})
	}
}

// checkStepOrder checks the Steps contract: in order, within the trace,
// not overlapping.
func checkStepOrder(t *testing.T, steps []Step, events int) {
	t.Helper()
	prevEnd := 0
	for _, s := range steps {
		if s.First < prevEnd || s.End < s.First || s.End > events || s.EndUS < s.StartUS {
			t.Errorf("step %s [%d,%d) %d-%dµs overlaps or leaves the trace (previous ends at %d, %d events)",
				s.Label, s.First, s.End, s.StartUS, s.EndUS, prevEnd, events)
		}
		prevEnd = s.End
	}
}

// TestFixturePeriodMatchesAnnotations checks the periodicity fallback on
// traces whose real steps are known: with the annotations ignored, every
// period must start inside the matching annotated step.
func TestFixturePeriodMatchesAnnotations(t *testing.T) {
	for _, file := range []string{
		"testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz",
		"testdata/scenarios/out/healthy_train/full_run.pickle.gz",
		"testdata/scenarios/out/bench_source/bench_source.pickle.gz",
		// Each iteration opens with its batch; the layers, which repeat 60
		// times, do so inside one pass each and are refused.
		"testdata/scenarios/out/train_deep/train_deep.pickle.gz",
		"testdata/scenarios/out/train_deep_leak/train_deep_leak.pickle.gz",
	} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			sn, tl := stepsScenario(t, file)
			f := testFilter(t)
			want := DetectSteps(sn, tl, f)
			got := stepsFromPeriod(sn, tl.Trace, f)
			if len(got.Steps) != len(want.Steps) {
				t.Fatalf("%d periods, want %d (%s)", len(got.Steps), len(want.Steps), got.Reason)
			}
			if got.Confidence < minPeriodConfidence || got.Confidence > 1 {
				t.Errorf("confidence %.2f", got.Confidence)
			}
			for k, p := range got.Steps {
				if w := want.Steps[k]; p.First < w.First || p.First >= w.End {
					t.Errorf("period %d starts at event %d, outside %s [%d,%d)", k+1, p.First, w.Label, w.First, w.End)
				}
			}
			checkStepOrder(t, got.Steps, tl.Len())
		})
	}
}
