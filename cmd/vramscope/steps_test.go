package main

import (
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
)

// TestStepsGolden runs steps on real-GPU fixtures: a leak (text), a
// healthy training run whose steps come from annotations, and a leak in
// JSON.
func TestStepsGolden(t *testing.T) {
	golden := fromRepoRoot(t)
	cases := []struct {
		name string // testdata/NAME, and NAME's stem + .stderr
		args []string
	}{
		{"steps-leak_closure.txt", []string{"steps", "testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz"}},
		{"steps-healthy_train.txt", []string{"steps", "testdata/scenarios/out/healthy_train/full_run.pickle.gz"}},
		{"steps-two_procs-rollout.json", []string{"steps", "--json", "testdata/scenarios/out/two_procs/step3/rollout_rank1_pid751.pickle.gz"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d, want 0; stderr:\n%s", c.name, code, stderr)
		}
		checkGolden(t, golden, c.name, stdout)
		checkGolden(t, golden, c.name+".stderr", stderr)
	}
}

// TestWriteLeakFindingEvidence checks that a leak finding prints whatever
// evidence it has and never panics on a missing or differently typed value.
func TestWriteLeakFindingEvidence(t *testing.T) {
	tests := []struct {
		name     string
		evidence map[string]any
		want     []string
	}{
		{"complete", map[string]any{
			"live_bytes_per_step": []int64{0, 1 << 20}, "grew_steps": 3, "judged_steps": 3,
			"relative_spread": 0.5, "requested_bytes_per_step": int64(1 << 20)},
			[]string{"live before the first step and at each step's end: 0 B, 1.00 MiB",
				"grew in 3 of 3 steps after the first, spread 0.50; 1.00 MiB requested per step, 2.00 MiB allocated at the end"}},
		{"empty", map[string]any{}, []string{" 2.00 MiB allocated at the end"}},
		{"other types", map[string]any{
			"live_bytes_per_step": []int{1}, "grew_steps": "3", "requested_bytes_per_step": 1.5},
			[]string{" 2.00 MiB allocated at the end"}},
	}
	for _, test := range tests {
		var b strings.Builder
		writeLeakFinding(&b, diagnose.Finding{Kind: diagnose.KindLeak, Bytes: 2 << 20, Evidence: test.evidence})
		for _, w := range test.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", test.name, w, b.String())
			}
		}
	}
}
