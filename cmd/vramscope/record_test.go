package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/capture"
	"github.com/vramscope/vramscope/internal/testutil"
)

// TestRecord runs record around shell commands that stand in for a
// recorded program: they copy a committed scenario (snapshots dumped on an
// H100) into the output folder, as the hook would have written it, and
// exit with a status of their own.
func TestRecord(t *testing.T) {
	fromRepoRoot(t)
	tests := []struct {
		name   string
		flags  []string
		script string
		code   int
		// stdout and stderr must contain these.
		stdout, stderr []string
	}{
		{
			name:   "leak trips the gate",
			flags:  []string{"--fail-on", "leak"},
			script: `cp -R testdata/scenarios/out/leak_closure/step* "$VRAMSCOPE_OUT"/`,
			code:   exitGate,
			stdout: []string{"verdict: leak (1 process)", "compute_next_token_logits keeps 38.00 MiB more live memory every step"},
			stderr: []string{"sh exited with status 0", "step4/server_rank0_pid561.pickle.gz", "gate: rank0/pid561: verdict leak (--fail-on)"},
		},
		{
			name:   "the gate outranks the command's status",
			flags:  []string{"--max-growth", "16MiB"},
			script: `cp -R testdata/scenarios/out/leak_closure/step* "$VRAMSCOPE_OUT"/; exit 1`,
			code:   exitGate,
			stderr: []string{"over --max-growth 16.00 MiB"},
		},
		{
			name:   "a healthy run passes the gate",
			flags:  []string{"--fail-on", "leak,fragmentation,oom"},
			script: `cp -R testdata/scenarios/out/leak_fixed/step* "$VRAMSCOPE_OUT"/`,
			code:   exitOK,
			stdout: []string{"verdict: healthy"},
		},
		{
			name:   "the command's status without a gate",
			script: `cp -R testdata/scenarios/out/leak_closure/step* "$VRAMSCOPE_OUT"/; exit 4`,
			code:   4,
			stdout: []string{"verdict: leak"},
			stderr: []string{"sh exited with status 4", "vramscope: the command exited with status 4"},
		},
		{
			name:   "a killed command still gets its answer",
			script: `cp -R testdata/scenarios/out/leak_closure/step* "$VRAMSCOPE_OUT"/; kill -KILL $$`,
			code:   128 + 9,
			stdout: []string{"verdict: leak"},
			stderr: []string{"sh killed by signal 9 (killed)"},
		},
		{
			name:   "json",
			flags:  []string{"--json"},
			script: `cp -R testdata/scenarios/out/leak_fixed/step* "$VRAMSCOPE_OUT"/`,
			stdout: []string{`"verdict": "healthy"`},
		},
		{
			name:   "no analysis",
			flags:  []string{"--no-analyze", "--fail-on", "leak"},
			script: `cp -R testdata/scenarios/out/leak_closure/step* "$VRAMSCOPE_OUT"/`,
			code:   exitOK,
			stderr: []string{"recorded in"},
		},
		{
			name:   "nothing recorded",
			flags:  []string{"--fail-on", "leak"},
			script: `echo no torch here`,
			code:   exitOK,
			stdout: []string{"no torch here"},
			stderr: []string{"nothing recorded in"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rec")
			args := append([]string{"record", "--out", out}, tt.flags...)
			args = append(args, "--", "sh", "-c", tt.script)
			code, stdout, stderr := runCmd(args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

func TestRecordUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"record"}, "requires at least 1 arg"},
		{[]string{"record", "--steps", "2,x", "--", "true"}, `--steps "2,x"`},
		{[]string{"record", "--fail-on", "slow", "--", "true"}, `--fail-on "slow"`},
		{[]string{"record", "--focus", "(", "--", "true"}, `focus pattern "("`},
		{[]string{"record", "--stacks", "cpp", "--", "true"}, `stacks "cpp"`},
		{[]string{"record", "--final", "maybe", "--", "true"}, `final "maybe"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if len(tt.args) > 1 {
				tt.args = append(tt.args[:1], append([]string{"--out", t.TempDir()}, tt.args[1:]...)...)
			}
			code, _, stderr := runCmd(tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tt.want)
			}
		})
	}
}

// TestRecordFlagsAfterCommand: flags after COMMAND are COMMAND's.
func TestRecordFlagsAfterCommand(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runCmd("record", "--out", out, "echo", "--json", "--steps", "x")
	if code != exitOK || stdout != "--json --steps x\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestHookCommand(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCmd("hook", "--write", dir)
	want := filepath.Join(dir, "vramscope_hook.py")
	if code != exitOK || stdout != want+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	got, err := os.ReadFile(want)
	if err != nil || string(got) != string(capture.HookSource) {
		t.Errorf("written hook differs from the embedded one (%v)", err)
	}

	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	code, stdout, _ = runCmd("hook", "--path")
	path := strings.TrimSpace(stdout)
	if code != exitOK || filepath.Base(path) != "vramscope_hook.py" {
		t.Fatalf("hook --path: exit %d, %q", code, stdout)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}

	for _, args := range [][]string{{"hook"}, {"hook", "--path", "--write", dir}} {
		if code, _, _ := runCmd(args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestRecordWithHook runs the embedded hook for real, in python3 with the
// stand-in torch of capture/hook/testdata: a training loop whose steps 2,
// 3 and 4 are dumped and logged, then analyzed.
func TestRecordWithHook(t *testing.T) {
	python := testutil.Python(t)
	fromRepoRoot(t)
	stand, err := filepath.Abs("capture/hook/testdata")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", stand)
	script := filepath.Join(t.TempDir(), "train.py")
	program := "import torch\nopt = torch.optim.Optimizer()\nfor i in range(5):\n    torch.cuda.alloc(1 << 20)\n    opt.step()\n"
	if err := os.WriteFile(script, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rec")
	code, stdout, stderr := runCmd("record", "--out", out, "--json", "--", python, script)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"step2/train_rank0_pid", "step3/train_rank0_pid", "step4/train_rank0_pid", "_memory_log.csv"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("record lists no %s:\n%s", want, stderr)
		}
	}
	var rep struct {
		Processes []struct {
			Tag    string
			Inputs []string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(rep.Processes) != 1 || rep.Processes[0].Tag != "train" || len(rep.Processes[0].Inputs) != 4 {
		t.Errorf("analysis %+v, want one process, train, with 3 snapshots and a memory log", rep.Processes)
	}
}

// TestRecordedFixtures analyzes what `vramscope record` captured around
// real programs on an H100 (scripts/gpu-e2e.sh, committed under
// testdata/record/) and checks what each program was written to do: the
// healthy loops stay healthy, leak_train keeps compute_logits's 16 MiB a
// step, oom_train runs out of memory in build_attention_scores with its
// OOM snapshot and message beside the step dumps, and the torchrun job is
// two processes, rank 1 leaking in cache_prompt_embeddings.
func TestRecordedFixtures(t *testing.T) {
	fromRepoRoot(t)
	type leak struct {
		function string
		perStep  int64
	}
	tests := []struct {
		dir     string
		verdict string
		ranks   map[int]string // rank -> verdict
		leaks   []leak
		oomIn   string
	}{
		{dir: "healthy", verdict: "healthy", ranks: map[int]string{0: "healthy"}},
		{dir: "llama", verdict: "healthy", ranks: map[int]string{0: "healthy"}},
		{dir: "server", verdict: "healthy", ranks: map[int]string{0: "healthy"}},
		{dir: "module", verdict: "healthy"},
		{dir: "leak", verdict: "leak", ranks: map[int]string{0: "leak"}, leaks: []leak{{"compute_logits", 16 << 20}}},
		{dir: "ddp", verdict: "leak", ranks: map[int]string{0: "healthy", 1: "leak"}, leaks: []leak{{"cache_prompt_embeddings", 16 << 20}}},
		{dir: "oom", verdict: "oom", ranks: map[int]string{0: "oom"}, oomIn: "build_attention_scores"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			_, stdout, stderr := runCmd("analyze", "--json", filepath.Join("testdata/record", tt.dir))
			var got struct {
				Verdict   string `json:"verdict"`
				Processes []struct {
					Rank     *int   `json:"rank"`
					Verdict  string `json:"verdict"`
					Findings []struct {
						Kind         string `json:"kind"`
						BytesPerStep int64  `json:"bytes_per_step"`
						Callsite     *struct {
							Function string `json:"function"`
						} `json:"callsite"`
					} `json:"findings"`
				} `json:"processes"`
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			if got.Verdict != tt.verdict {
				t.Errorf("verdict %s, want %s", got.Verdict, tt.verdict)
			}
			if tt.ranks != nil && len(got.Processes) != len(tt.ranks) {
				t.Errorf("%d processes, want %d", len(got.Processes), len(tt.ranks))
			}
			found := map[string]int64{}
			oomAt := ""
			for _, p := range got.Processes {
				if p.Rank != nil && tt.ranks != nil && p.Verdict != tt.ranks[*p.Rank] {
					t.Errorf("rank %d: verdict %s, want %s", *p.Rank, p.Verdict, tt.ranks[*p.Rank])
				}
				for _, f := range p.Findings {
					switch {
					case f.Callsite == nil:
					case f.Kind == "leak":
						found[f.Callsite.Function] = f.BytesPerStep
					case f.Kind == "oom" && oomAt == "":
						oomAt = f.Callsite.Function
					}
				}
			}
			for _, l := range tt.leaks {
				// The allocator's block for a 16 MiB tensor is 16 MiB.
				if found[l.function] != l.perStep {
					t.Errorf("leak in %s: %d bytes a step, want %d (leaks: %v)", l.function, found[l.function], l.perStep, found)
				}
			}
			if tt.oomIn != oomAt {
				t.Errorf("OOM finding at %q, want %q", oomAt, tt.oomIn)
			}
		})
	}
}
