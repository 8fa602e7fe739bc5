package main

import (
	"strings"
	"testing"
)

// TestExplainGolden runs explain on the scenario fixtures that show each
// section: a peak, a fragmentation OOM, cache growth, a fraction OOM.
func TestExplainGolden(t *testing.T) {
	golden := fromRepoRoot(t)
	cases := []struct {
		name string
		args []string
		want []string // must appear in the output, beyond the golden file
	}{
		{"explain-peak_upcast", []string{"explain", "testdata/scenarios/out/peak_upcast/peak_upcast.pickle.gz"},
			[]string{"3.11 GiB", "torch's max_memory_allocated", "compute_logprobs"}},
		{"explain-frag_oom", []string{"explain", "testdata/scenarios/out/frag_oom/frag_oom.pickle.gz"},
			[]string{"allocate_logits_workspace", "1.09 GiB", "expandable_segments:True"}},
		{"explain-frag_growth", []string{"explain", "testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz"},
			[]string{"empty_cache() would return 900.00 MiB", "run_rollout_request"}},
		{"explain-fragoom", []string{"explain", "snapshot/testdata/format/fragoom.pickle"}, []string{"Raise the fraction"}},
		// A pickled memory_snapshot() list holds no trace: no peak, no
		// findings (analyze has none either), the state at the dump.
		{"explain-notrace", []string{"explain", "snapshot/testdata/legacy/v2_11_segment_list.pickle"},
			[]string{"unknown: no trace", "at the dump:", "Findings\n    none"}},
		{"explain-focus", []string{"explain", "--ignore", "^compute_logprobs$", "testdata/scenarios/out/peak_upcast/peak_upcast.pickle.gz"},
			[]string{"main (/work/main/testdata/scenarios/peak_upcast.py:54)"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d; stderr:\n%s", c.name, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s: output lacks %q", c.name, w)
			}
		}
		checkGolden(t, golden, c.name+".txt", stdout)
	}
	if code, _, stderr := runCmd("explain", "--focus", "(", "snapshot/testdata/format/fragoom.pickle"); code != exitUsage || !strings.Contains(stderr, "focus") {
		t.Errorf("bad --focus: exit %d, stderr %q", code, stderr)
	}
}
