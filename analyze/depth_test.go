package analyze

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/testutil"
)

// TestDepthSnapshots compares the step2, step3 and step4 dumps of the
// transformers scenarios (testdata/scenarios/depth_*.py, H100): the leak
// is one finding at the user's line, with the library line below it as
// origin, the cause named, and the bytes per step torch measured
// (expected.json).
func TestDepthSnapshots(t *testing.T) {
	tests := []struct {
		dir, file string
		callsite  string // function:line of the leak
		origin    string // suffix of the origin's file
		cause     string
		// perStep reads the truth from expected.json: what the finding's
		// requested (kv) or allocated (eval, with the graph's inputs) bytes
		// per step must equal.
		perStep func(t *testing.T, expected map[string]any, leaks []diagnose.Finding) (got, truth int64)
	}{
		{"depth_kv_cache", "server_rank0_pid622.pickle.gz", "serve_turn:64", "transformers/cache_utils.py", diagnose.CauseKVCache,
			func(t *testing.T, expected map[string]any, leaks []diagnose.Finding) (int64, int64) {
				growth := expected["measured_cache_growth_per_step"].([]any)
				return leaks[0].Evidence["requested_bytes_per_step"].(int64), int64(growth[len(growth)-1].(float64))
			}},
		{"depth_eval_graph", "eval_rank0_pid696.pickle.gz", "evaluate:49", "transformers/models/llama/modeling_llama.py", diagnose.CauseRetainedGraph,
			func(t *testing.T, expected map[string]any, leaks []diagnose.Finding) (int64, int64) {
				// torch's growth includes the 8 x 512 int64 input ids that
				// the graph keeps too (make_batch, 32 KiB a step): under
				// minLeakPerStep, so no finding of their own here.
				const inputIDs = 8 * 512 * 8
				if len(leaks) != 1 {
					t.Errorf("%d leaks, want evaluate's alone", len(leaks))
				}
				return leaks[0].BytesPerStep + inputIDs, int64(expected["leak_bytes_per_step"].(float64))
			}},
		{"depth_kept_view", "eval_rank0_pid491.pickle.gz", "evaluate:47", "transformers/models/llama/modeling_llama.py", diagnose.CauseKeptOutput,
			func(t *testing.T, expected map[string]any, leaks []diagnose.Finding) (int64, int64) {
				// Under no_grad only the logits stay: what a kept
				// view of them keeps per step, torch measured.
				if len(leaks) != 1 {
					t.Errorf("%d leaks, want evaluate's alone", len(leaks))
				}
				return leaks[0].BytesPerStep, int64(expected["kept_per_step_view"].(float64))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			root := filepath.Join("..", "testdata", "scenarios", "out", tt.dir)
			b, err := os.ReadFile(filepath.Join(root, "expected.json"))
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			a := New(Options{})
			for _, step := range []string{"step2", "step3", "step4"} {
				path := filepath.Join(root, step, tt.file)
				a.AddSnapshot(inputs.Input{Path: path, Kind: inputs.Snapshot, Identity: inputs.ParseIdentity(path)}, testutil.Snapshot(t, path))
			}
			r := a.Report()
			if len(r.Processes) != 1 || r.Processes[0].Verdict != Leak {
				t.Fatalf("processes %+v, want one leaking", r.Processes)
			}
			var leaks []diagnose.Finding
			for _, f := range r.Processes[0].Findings {
				if f.Kind == diagnose.KindLeak {
					leaks = append(leaks, f)
				}
			}
			if len(leaks) == 0 {
				t.Fatal("no leak")
			}
			f := leaks[0]
			if f.Callsite == nil || f.Callsite.Function+":"+strconv.FormatUint(f.Callsite.Line, 10) != tt.callsite {
				t.Errorf("callsite %v, want %s", f.Callsite, tt.callsite)
			}
			if f.Origin == nil || !strings.HasSuffix(f.Origin.File, tt.origin) || len(f.AllocatedVia) == 0 {
				t.Errorf("origin %v via %v, want %s", f.Origin, f.AllocatedVia, tt.origin)
			}
			if f.Evidence["cause"] != tt.cause {
				t.Errorf("cause %v, want %s; fix %q", f.Evidence["cause"], tt.cause, f.Fix)
			}
			if got, w := tt.perStep(t, want, leaks); got != w {
				t.Errorf("%d bytes per step, want torch's %d", got, w)
			}
		})
	}
}

// TestNamedCausesOnFixtures: across every scenario recorded on the GPU, a
// named cause is given where the scenario was built to show it and nowhere
// else (AdamW's buffers and the autograd engine's gradients are no upcast,
// the kept logits of train_deep_leak no graph).
func TestNamedCausesOnFixtures(t *testing.T) {
	want := map[string][]string{
		"depth_eval_graph":      {"leak " + diagnose.CauseRetainedGraph},
		"depth_kv_cache":        {"leak " + diagnose.CauseKVCache},
		"depth_loss_upcast":     {"peak " + diagnose.CauseUpcast},
		"depth_loss_upcast_all": {"peak " + diagnose.CauseUpcast},
		"peak_upcast":           {"peak " + diagnose.CauseUpcast},
		"depth_kept_view":       {"leak " + diagnose.CauseKeptOutput},
		"peak_optimizer":        {"peak " + diagnose.CauseOptimizerForeach},
		// Adam's foreach update sets these training steps' peaks too.
		"healthy_train": {"peak " + diagnose.CauseOptimizerForeach, "peak " + diagnose.CauseOptimizerForeach},
		"two_procs":     {"peak " + diagnose.CauseOptimizerForeach},
		// Each iteration keeps logits[:, -1] of a detached output.
		"train_deep_leak": {"leak " + diagnose.CauseKeptOutput},
	}
	root := filepath.Join("..", "testdata", "scenarios", "out")
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), "_") || d.Name() == "oom_messages" {
			continue
		}
		n++
		t.Run(d.Name(), func(t *testing.T) {
			ins, _, err := inputs.Expand([]string{filepath.Join(root, d.Name())})
			if err != nil {
				t.Fatal(err)
			}
			a := New(Options{})
			for _, in := range ins {
				if in.Kind == inputs.Snapshot {
					a.AddSnapshot(in, testutil.Snapshot(t, in.Path))
				}
			}
			var got []string
			for _, p := range a.Report().Processes {
				for _, f := range p.Findings {
					if c, ok := f.Evidence["cause"].(string); ok && f.Kind != diagnose.KindOOM {
						got = append(got, string(f.Kind)+" "+c)
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(want[d.Name()], ",") {
				t.Errorf("causes %q, want %q", got, want[d.Name()])
			}
		})
	}
	if n < 20 {
		t.Fatalf("%d scenarios", n)
	}
}
