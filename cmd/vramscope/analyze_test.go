package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diagnose"
)

// wantProcess is what a scenario's expected.json says about one process.
type wantProcess struct {
	id      string
	verdict analyze.Verdict
	// culprits are the functions of the high and medium leak,
	// fragmentation and OOM findings, in rank order.
	culprits []string
	// perStep is each leak or fragmentation culprit's bytes per step.
	perStep map[string]int64
	// peak is the function a peak finding blames; "" for none expected.
	peak string
}

// TestAnalyzeScenarios runs analyze on every real-GPU fixture and checks
// the verdicts and culprits of testdata/scenarios/out/*/expected.json.
func TestAnalyzeScenarios(t *testing.T) {
	fromRepoRoot(t)
	const out = "testdata/scenarios/out/"
	tests := []struct {
		dir     string
		verdict analyze.Verdict
		procs   []wantProcess
	}{
		{"leak_closure", analyze.Leak, []wantProcess{{id: "rank0/pid561", verdict: analyze.Leak,
			culprits: []string{"compute_next_token_logits", "allocate_vocab_mask"},
			// Block sizes: the 38928384-B logits round to 39845888.
			perStep: map[string]int64{"compute_next_token_logits": 39845888, "allocate_vocab_mask": 1216512}}}},
		{"leak_fixed", analyze.Healthy, []wantProcess{{id: "rank0/pid592", verdict: analyze.Healthy}}},
		{"healthy_train", analyze.Healthy, []wantProcess{
			{id: "rank0/pid623", verdict: analyze.Healthy},
			{id: "full_run", verdict: analyze.Healthy}}},
		{"frag_growth", analyze.Fragmentation, []wantProcess{{id: "rank0/pid656", verdict: analyze.Fragmentation,
			culprits: []string{"run_rollout_request"},
			// Cached bytes 486, 744, 900 MiB at steps 2, 3, 4: Theil-Sen 207 MiB.
			perStep: map[string]int64{"run_rollout_request": 207 << 20}}}},
		{"frag_growth_emptycache", analyze.Healthy, []wantProcess{{id: "rank0/pid687", verdict: analyze.Healthy}}},
		// Reserved creeps 30 MiB per step but stays at 1.24x the peak
		// allocated, under the 1.5x threshold: healthy, with a low finding.
		{"frag_growth_expandable", analyze.Healthy, []wantProcess{{id: "rank0/pid718", verdict: analyze.Healthy}}},
		{"two_procs", analyze.Leak, []wantProcess{
			{id: "rank0/pid750", verdict: analyze.Healthy},
			{id: "rank1/pid751", verdict: analyze.Leak, culprits: []string{"cache_prompt_embeddings"},
				perStep: map[string]int64{"cache_prompt_embeddings": 16777216}}}},
		// A large peak alone is not a verdict.
		{"peak_upcast", analyze.Healthy, []wantProcess{{id: "peak_upcast", verdict: analyze.Healthy, peak: "compute_logprobs"}}},
		{"peak_chunked", analyze.Healthy, []wantProcess{{id: "peak_chunked", verdict: analyze.Healthy}}},
		{"frag_oom", analyze.OOM, []wantProcess{{id: "frag_oom", verdict: analyze.OOM, culprits: []string{"allocate_logits_workspace"}}}},
		{"frag_oom_expandable", analyze.Healthy, []wantProcess{{id: "frag_oom_expandable", verdict: analyze.Healthy}}},
		{"bench_source", analyze.Healthy, []wantProcess{{id: "bench_source", verdict: analyze.Healthy}}},
	}
	for _, test := range tests {
		t.Run(test.dir, func(t *testing.T) {
			code, stdout, stderr := runCmd("analyze", "--json", out+test.dir)
			if code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			var rep analyze.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != test.verdict {
				t.Errorf("verdict %s, want %s", rep.Verdict, test.verdict)
			}
			if len(rep.Processes) != len(test.procs) {
				t.Fatalf("%d processes, want %d", len(rep.Processes), len(test.procs))
			}
			for i, want := range test.procs {
				checkProcess(t, rep.Processes[i], want)
			}
		})
	}
}

func checkProcess(t *testing.T, p analyze.Process, want wantProcess) {
	t.Helper()
	if p.ID != want.id || p.Verdict != want.verdict {
		t.Errorf("process %s verdict %s, want %s verdict %s", p.ID, p.Verdict, want.id, want.verdict)
	}
	var culprits []string
	peak := ""
	for _, f := range p.Findings {
		if f.Callsite == nil {
			continue
		}
		fn := f.Callsite.Function
		if f.Kind == diagnose.KindPeak {
			peak = fn
			continue
		}
		if f.Severity == diagnose.Low {
			continue
		}
		culprits = append(culprits, fn)
		if wantPerStep, ok := want.perStep[fn]; ok && math.Abs(float64(f.BytesPerStep-wantPerStep)) > 1<<10 {
			t.Errorf("%s: %s %s grows %d B per step, want %d", p.ID, fn, f.Kind, f.BytesPerStep, wantPerStep)
		}
	}
	if !slices.Equal(culprits, want.culprits) {
		t.Errorf("%s: culprits %q, want %q", p.ID, culprits, want.culprits)
	}
	if want.peak != "" && peak != want.peak {
		t.Errorf("%s: peak blamed on %q, want %q", p.ID, peak, want.peak)
	}
}

// TestAnalyzeGate checks the exit codes of the CI gate.
func TestAnalyzeGate(t *testing.T) {
	fromRepoRoot(t)
	const leak, healthy = "testdata/scenarios/out/leak_closure", "testdata/scenarios/out/leak_fixed"
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no gate", []string{leak}, exitOK},
		{"fail-on leak", []string{"--fail-on", "leak", leak}, exitGate},
		{"fail-on other verdicts", []string{"--fail-on", "fragmentation,oom", leak}, exitOK},
		{"fail-on, healthy run", []string{"--fail-on", "leak,fragmentation,oom", healthy}, exitOK},
		{"growth over the limit", []string{"--max-growth", "32MiB", leak}, exitGate},
		{"growth under the limit", []string{"--max-growth", "64MiB", leak}, exitOK},
		{"peak over the limit", []string{"--max-peak", "1GiB", leak}, exitGate},
		{"peak under the limit", []string{"--max-peak", "40GiB", leak}, exitOK},
		{"bad verdict", []string{"--fail-on", "healthy", leak}, exitUsage},
		{"bad size", []string{"--max-growth", "lots", leak}, exitUsage},
		{"missing input", []string{"testdata/scenarios/out/nope"}, exitInputError},
		{"unreadable input beats the gate", []string{"--fail-on", "leak", leak, "README.md"}, exitInputError},
	}
	for _, test := range tests {
		code, _, stderr := runCmd(append([]string{"analyze"}, test.args...)...)
		if code != test.code {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", test.name, code, test.code, stderr)
		}
	}
}

// TestAnalyzeDevices checks the figures of a process on three GPUs
// (testdata/shapes/make_shapes.py: peaks of 1.50, 6.00 and 3.50 GiB at
// different times, an OOM on cuda:1) and of a file without a trace.
func TestAnalyzeDevices(t *testing.T) {
	fromRepoRoot(t)
	const gib = int64(1) << 30
	code, stdout, stderr := runCmd("analyze", "--json", "testdata/shapes/three_gpus.pickle")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var rep analyze.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	s := rep.Processes[0].Stats
	if s.PeakAllocatedBytes == nil || *s.PeakAllocatedBytes != 6*gib {
		t.Errorf("process peak %v, want cuda:1's 6 GiB, not the 11 GiB sum of peaks that never coincided", s.PeakAllocatedBytes)
	}
	var peaks []int64
	for _, d := range s.Devices {
		if d.PeakAllocatedBytes == nil {
			t.Fatalf("cuda:%d has no peak", d.Device)
		}
		peaks = append(peaks, *d.PeakAllocatedBytes)
	}
	if want := []int64{3 * gib / 2, 6 * gib, 7 * gib / 2}; !slices.Equal(peaks, want) {
		t.Errorf("device peaks %v, want %v", peaks, want)
	}
	for _, f := range rep.Processes[0].Findings {
		if f.Kind == diagnose.KindOOM && f.Device != 1 {
			t.Errorf("OOM on cuda:%d, want cuda:1", f.Device)
		}
	}
	_, text, _ := runCmd("analyze", "testdata/shapes/three_gpus.pickle")
	for _, want := range []string{"[high oom, cuda:1]", "cuda:1: allocated 4.00 GiB, reserved 6.00 GiB; trace peaks: allocated 6.00 GiB"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	// No trace, and a trace of one event (enabled="state"): no history,
	// so no peak.
	for _, path := range []string{"testdata/shapes/no_trace.pickle", "snapshot/testdata/format/state_only.pickle"} {
		_, text, _ = runCmd("analyze", path)
		if strings.Contains(text, "trace peaks") {
			t.Errorf("trace peaks printed for %s, which has no history:\n%s", path, text)
		}
	}
	// Two dumps of the process: a row per device and figure.
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/shapes/three_gpus.pickle")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"step1", "step2"} {
		if err := os.MkdirAll(filepath.Join(dir, step), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, step, "three_gpus.pickle"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, text, _ = runCmd("analyze", dir)
	for _, want := range []string{"  snapshots: step 1, step 2\n", "    cuda:1 allocated 4.00 GiB -> 4.00 GiB\n", "    cuda:2 reserved  4.00 GiB -> 4.00 GiB\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text of two dumps lacks %q:\n%s", want, text)
		}
	}
	if code, _, stderr := runCmd("analyze", "--max-peak", "5GiB", "testdata/shapes/three_gpus.pickle"); code != exitGate || !strings.Contains(stderr, "three_gpus cuda:1: peak allocated 6.00 GiB") {
		t.Errorf("--max-peak 5GiB: exit %d, want %d naming cuda:1; stderr:\n%s", code, exitGate, stderr)
	}
}

// TestAnalyzeGolden pins the text and JSON reports of two scenarios.
func TestAnalyzeGolden(t *testing.T) {
	golden := fromRepoRoot(t)
	tests := []struct {
		name string
		args []string
	}{
		{"analyze-leak_closure.txt", []string{"testdata/scenarios/out/leak_closure"}},
		{"analyze-two_procs.txt", []string{"testdata/scenarios/out/two_procs"}},
		{"analyze-frag_growth.txt", []string{"testdata/scenarios/out/frag_growth"}},
		{"analyze-two_procs.json", []string{"--json", "testdata/scenarios/out/two_procs"}},
		{"analyze-three_gpus.txt", []string{"testdata/shapes/three_gpus.pickle"}},
		{"analyze-no_trace.txt", []string{"testdata/shapes/no_trace.pickle"}},
	}
	for _, test := range tests {
		_, stdout, stderr := runCmd(append([]string{"analyze"}, test.args...)...)
		checkGolden(t, golden, test.name, stdout)
		checkGolden(t, golden, test.name+".stderr", stderr)
	}
}

// TestAnalyzeMemoryLogInputs checks that directories and globs hand their
// memory-log CSVs to analyze: beside snapshots, and on their own.
func TestAnalyzeMemoryLogInputs(t *testing.T) {
	fromRepoRoot(t)
	const two = "testdata/scenarios/out/two_procs"
	logs := t.TempDir()
	for _, name := range []string{"actor_rank0_pid750_memory_log.csv", "rollout_rank1_pid751_memory_log.csv"} {
		data, err := os.ReadFile(filepath.Join(two, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logs, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		arg     string
		verdict analyze.Verdict
		inputs  [2]int // per process
	}{
		{"snapshots and logs", two, analyze.Leak, [2]int{4, 4}},
		{"directory of logs only", logs, analyze.Leak, [2]int{1, 1}},
		{"glob of logs", two + "/*.csv", analyze.Leak, [2]int{1, 1}},
	}
	for _, test := range tests {
		code, stdout, stderr := runCmd("analyze", "--json", test.arg)
		if code != exitOK {
			t.Errorf("%s: exit %d; stderr:\n%s", test.name, code, stderr)
			continue
		}
		var rep analyze.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Verdict != test.verdict || len(rep.Processes) != 2 {
			t.Errorf("%s: verdict %s with %d processes, want %s with 2", test.name, rep.Verdict, len(rep.Processes), test.verdict)
			continue
		}
		for i, p := range rep.Processes {
			logged := slices.ContainsFunc(p.Inputs, func(s string) bool { return strings.HasSuffix(s, "_memory_log.csv") })
			if len(p.Inputs) != test.inputs[i] || !logged {
				t.Errorf("%s: %s inputs %q, want %d with its memory log", test.name, p.ID, p.Inputs, test.inputs[i])
			}
		}
	}
}
