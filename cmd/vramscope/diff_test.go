package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diff"
)

// TestDiffGolden prints the scenario pairs that differ in a known way, in
// text and JSON; go test -update rewrites the golden files.
func TestDiffGolden(t *testing.T) {
	golden := fromRepoRoot(t)
	const out = "testdata/scenarios/out/"
	for _, c := range []struct {
		name string
		args []string
	}{
		{"diff-peak.txt", []string{"diff", out + "peak_chunked", out + "peak_upcast"}},
		{"diff-peak-lines.txt", []string{"diff", "--lines", "--top", "4", out + "peak_chunked", out + "peak_upcast"}},
		{"diff-peak.json", []string{"diff", "--json", out + "peak_chunked", out + "peak_upcast"}},
		{"diff-leak-end.txt", []string{"diff", "--at", "end", out + "leak_fixed", out + "leak_closure"}},
		{"diff-frag-settings.txt", []string{"diff", out + "frag_growth", out + "frag_growth_expandable"}},
		{"diff-ranks.txt", []string{"diff", "--ranks", "0,1", "--at", "end", out + "two_procs"}},
		{"diff-steps.txt", []string{"diff", "--steps", "2,4", out + "leak_closure"}},
		{"diff-at-step3.txt", []string{"diff", "--at", "step 3", "--by", "callsite", out + "leak_fixed/step4", out + "leak_closure/step4"}},
		{"diff-train_deep-end.txt", []string{"diff", "--at", "end", out + "train_deep", out + "train_deep_leak"}},
		{"diff-train_deep-category.json", []string{"diff", "--json", "--by", "category", "--at", "end", out + "train_deep", out + "train_deep_leak"}},
	} {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d; stderr:\n%s", c.name, code, stderr)
		}
		checkGolden(t, golden, c.name, stdout)
	}
}

// TestDiffJSON checks the JSON's contract: version 1, the moment, and a
// pair per process of two runs, matched by rank.
func TestDiffJSON(t *testing.T) {
	fromRepoRoot(t)
	code, stdout, stderr := runCmd("diff", "--json", "--at", "end", "testdata/scenarios/out/leak_fixed", "testdata/scenarios/out/leak_closure")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep diff.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != 1 || rep.At != "end" || len(rep.Pairs) != 1 || len(rep.Unmatched) != 0 {
		t.Fatalf("version %d at %q, %d pairs, unmatched %q", rep.Version, rep.At, len(rep.Pairs), rep.Unmatched)
	}
	p := rep.Pairs[0]
	if !strings.HasSuffix(p.A.Path, "leak_fixed/step4/server_rank0_pid592.pickle.gz") || !strings.HasSuffix(p.B.Path, "leak_closure/step4/server_rank0_pid561.pickle.gz") {
		t.Errorf("sides %s, %s: want each run's last snapshot", p.A.Path, p.B.Path)
	}
	rows := p.Devices[0].Callsites.Rows
	if len(rows) != 2 || rows[0].Place == nil || rows[0].Place.Callsite.Function != "compute_next_token_logits" || rows[0].Change != diff.Added {
		t.Errorf("rows %+v", rows)
	}
}

// TestDiffGate is --max-growth: exit 3 when B's allocated bytes at the
// moment exceed A's by more (leak_closure holds 156.64 MiB more than
// leak_fixed at the end of step 4; 18.6% more), 0 otherwise, and 2 when
// an input cannot be read, whatever the gate.
func TestDiffGate(t *testing.T) {
	fromRepoRoot(t)
	const a, b = "testdata/scenarios/out/leak_fixed", "testdata/scenarios/out/leak_closure"
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--max-growth", "100MiB"}, exitGate, "allocated at the end grows +156.64 MiB (844.00 MiB -> 1000.64 MiB), over --max-growth 100.00 MiB"},
		{[]string{"--max-growth", "200MiB"}, exitOK, ""},
		{[]string{"--max-growth", "10%"}, exitGate, "over --max-growth 10%"},
		{[]string{"--max-growth", "20%"}, exitOK, ""},
		{[]string{"--max-growth", "lots"}, exitUsage, "invalid argument"},
		{[]string{"--at", "middle"}, exitUsage, "want peak, end or step N"},
		{[]string{"--by", "colour"}, exitUsage, "want callsite, category or module"},
		{[]string{"--at", "step 9"}, exitInputError, "no step 9 among the trace's 4 steps"},
	} {
		args := append(append([]string{"diff", "--at", "end"}, c.args...), a, b)
		code, _, stderr := runCmd(args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, want %d; stderr %q lacks %q", c.args, code, c.code, stderr, c.msg)
		}
	}
	// Two snapshots without a device: nothing to compare, nothing to fail.
	if code, stdout, _ := runCmd("diff", "--max-growth", "0", "testdata/shapes/empty.pickle", "testdata/shapes/empty.pickle"); code != exitOK || !strings.Contains(stdout, "neither snapshot has a device") {
		t.Errorf("empty snapshots: exit %d:\n%s", code, stdout)
	}
	// The reverse is a shrink: nothing to fail.
	if code, _, stderr := runCmd("diff", "--at", "end", "--max-growth", "0", b, a); code != exitOK {
		t.Errorf("B smaller than A: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"diff", a},
		{"diff", "--ranks", "0", a},
		{"diff", "--ranks", "0,1", "--steps", "2,3", a},
	} {
		if code, _, _ := runCmd(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, stderr := runCmd("diff", "--ranks", "0,5", "testdata/scenarios/out/two_procs"); code != exitInputError || !strings.Contains(stderr, "the run has ranks 0, 1") {
		t.Errorf("a missing rank: exit %d: %s", code, stderr)
	}
}

// With --steps, a process without a dump of either step is left out and
// named; the others are still compared.
func TestDiffStepsLeftOut(t *testing.T) {
	fromRepoRoot(t)
	run := t.TempDir()
	for _, f := range []string{"step2/actor_rank0_pid750.pickle.gz", "step4/actor_rank0_pid750.pickle.gz", "step4/rollout_rank1_pid751.pickle.gz"} {
		src, err := filepath.Abs(filepath.Join("testdata/scenarios/out/two_procs", f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(run, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCmd("diff", "--json", "--steps", "2,4", run)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep diff.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Pairs) != 1 || rep.Pairs[0].Name != "actor/rank0 step 2 vs step 4" {
		t.Errorf("pairs %+v", rep.Pairs)
	}
	if want := []string{"rollout/rank1: no snapshot of step 2 (steps 4)"}; !slices.Equal(rep.Unmatched, want) {
		t.Errorf("left out %q, want %q", rep.Unmatched, want)
	}
	if code, _, stderr := runCmd("diff", "--steps", "1,4", run); code != exitInputError || !strings.Contains(stderr, "no snapshot of step 1") {
		t.Errorf("no process with both steps: exit %d: %s", code, stderr)
	}
}
