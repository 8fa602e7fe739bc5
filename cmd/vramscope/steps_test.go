package main

import "testing"

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
