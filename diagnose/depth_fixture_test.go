package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/units"
)

// The depth scenarios run real transformers code (testdata/scenarios/
// depth_*.py, random-weight Llama models on an H100): the memory is
// allocated deep inside the library, under one line of the script. Their
// expected.json holds the truth from the scripts' own numbers.

// depthExpected reads a depth scenario's expected.json.
func depthExpected(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", scenarioDir, name, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s/expected.json: %v", name, err)
	}
	return m
}

// expNum reads a number of expected.json by its path of keys.
func expNum(t *testing.T, m map[string]any, keys ...string) int64 {
	t.Helper()
	var v any = m
	for _, k := range keys {
		v = v.(map[string]any)[k]
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("expected.json %v: %v is no number", keys, v)
	}
	return int64(f)
}

// scriptLine is the line number of the first line of a scenario script
// that reads text once trimmed.
func scriptLine(t *testing.T, script, text string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "scenarios", script))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == text {
			return uint64(i + 1)
		}
	}
	t.Fatalf("%s has no line %q", script, text)
	return 0
}

// TestDepthLossUpcast: a Llama training step with a 128256-token vocabulary
// peaks inside loss.backward(). The peak is named a dtype upcast, the
// autograd thread's empty-stack (python) or C++-only (all) blocks belong to
// the loss.backward() line, the library lines (ForCausalLMLoss's
// cross_entropy, the LM head) are the origins under train_step's model
// call, and AdamW's lazily created state is no leak.
func TestDepthLossUpcast(t *testing.T) {
	for _, name := range []string{"depth_loss_upcast", "depth_loss_upcast_all"} {
		t.Run(name, func(t *testing.T) {
			want := depthExpected(t, name)
			fp32 := expNum(t, want, "fp32_logits_bytes")
			callLine := uint64(expNum(t, want, "callsite", "line"))
			backwardLine := scriptLine(t, "depth_loss_upcast.py", "loss.backward()")
			sn, tl := stepsScenario(t, filepath.Join(scenarioDir, name, name+".pickle.gz"))
			f := testFilter(t)
			r := Peak(sn, tl, f)

			if r.Allocated.Bytes != expNum(t, want, "peak_allocated") {
				t.Errorf("peak %d, want torch's %d", r.Allocated.Bytes, expNum(t, want, "peak_allocated"))
			}
			// The peak is reached by the autograd engine, during the
			// backward() call, surely: the main thread entered it and ran
			// nothing until the blocks.
			bw := r.Place.Backward
			if bw == nil || bw.Site.Frame.Line != backwardLine || bw.Site.Frame.Name != "train_step" || bw.Confidence != "high" || bw.API != "backward()" {
				t.Fatalf("peak place %s (%+v), want the engine during backward() at train_step:%d, high", r.Place, bw, backwardLine)
			}
			if all := name == "depth_loss_upcast_all"; all != (bw.Node != "") {
				t.Errorf("node %q with stacks=all %v", bw.Node, all)
			}
			// Two fp32 gradient blocks of the logits, one per node with C++
			// frames, both at the backward line.
			var engine int64
			for _, g := range r.Transient {
				if g.Backward != nil {
					engine += int64(g.Largest) * int64(g.Count)
					if g.Site.Frame.Line != backwardLine {
						t.Errorf("engine group at %s", g.Site)
					}
				}
			}
			if engine < 2*fp32 {
				t.Errorf("engine blocks at the peak %d B, want two fp32 logits (%d)", engine, 2*fp32)
			}
			// The library lines are origins under train_step's model call,
			// each its own row.
			var origins []string
			for _, g := range r.Transient {
				if g.Origin.Below(g.Site) && g.Site.Frame.Line == callLine {
					origins = append(origins, g.Origin.String())
				}
			}
			for _, o := range []string{"fixed_cross_entropy (transformers/loss/loss_utils.py:", "forward (transformers/models/llama/modeling_llama.py:"} {
				if !slices.ContainsFunc(origins, func(s string) bool { return strings.HasPrefix(s, o) }) {
					t.Errorf("no origin %s... under train_step:%d in %v", o, callLine, origins)
				}
			}

			fds := r.Findings()
			if len(fds) != 1 || fds[0].Evidence["cause"] != CauseUpcast {
				t.Fatalf("findings %+v, want one peak named an upcast", fds)
			}
			fd := fds[0]
			if fd.Callsite == nil || fd.Callsite.Line != callLine || fd.Origin == nil || !strings.HasSuffix(fd.Origin.File, "transformers/loss/loss_utils.py") {
				t.Errorf("peak finding at %v from %v, want loss_utils.py under train_step:%d", fd.Callsite, fd.Origin, callLine)
			}
			if !strings.Contains(fd.Fix, "chunk") || !strings.Contains(fd.Fix, "fused") || strings.Contains(fd.Fix, "(-0 B)") {
				t.Errorf("fix %q", fd.Fix)
			}
			ev := strings.Join(fd.Evidence["cause_evidence"].([]string), "; ")
			if !strings.Contains(ev, units.Bytes(fp32).String()) || !strings.Contains(ev, "cross_entropy") {
				t.Errorf("cause evidence %q, want the fp32 logits' %s and cross_entropy", ev, units.Bytes(fp32))
			}

			// AdamW's state, created at the first step, is no leak.
			steps := DetectSteps(sn, tl, f)
			if len(steps.Steps) != 3 {
				t.Errorf("%d steps, want the script's 3", len(steps.Steps))
			}
			if lf := Leak(sn, tl, steps, f).Findings(); len(lf) != 0 {
				t.Errorf("leaks %v, want none", lf[0].Title)
			}
		})
	}
}

// TestDepthKVCache: a chat server keeps each session's DynamicCache. Inside
// the step-2 dump's trace the steps are the 16 chat turns (8 sessions, 2
// server steps); every turn keeps the session's cache grown by one turn's
// tokens, allocated by torch.cat in transformers' cache update under
// serve_turn's decode call, and the finding names the cache and its fix.
func TestDepthKVCache(t *testing.T) {
	want := depthExpected(t, "depth_kv_cache")
	growth := want["measured_cache_growth_per_step"].([]any)
	turn := int64(growth[0].(float64)) / expNum(t, want, "sessions")
	decodeLine := uint64(expNum(t, want, "callsite_decode_line"))
	originFile := want["origin"].(map[string]any)["file_suffix"].(string)

	sn, tl := stepsScenario(t, filepath.Join(scenarioDir, "depth_kv_cache", "step2", "server_rank0_pid622.pickle.gz"))
	f := testFilter(t)
	steps := DetectSteps(sn, tl, f)
	if len(steps.Steps) != 2*int(expNum(t, want, "sessions")) {
		t.Fatalf("%d steps (%s), want the 16 turns of two server steps", len(steps.Steps), steps.Reason)
	}
	fds := Leak(sn, tl, steps, f).Findings()
	if len(fds) != 1 {
		t.Fatalf("%d leak findings, want 1", len(fds))
	}
	fd := fds[0]
	if got := fd.Evidence["requested_bytes_per_step"]; got != turn {
		t.Errorf("requested per turn %v, want the cache's growth per turn %d", got, turn)
	}
	if fd.Callsite == nil || fd.Callsite.Function != "serve_turn" || fd.Callsite.Line != decodeLine {
		t.Errorf("callsite %v, want serve_turn:%d", fd.Callsite, decodeLine)
	}
	if fd.Origin == nil || !strings.HasSuffix(fd.Origin.File, originFile) || fd.Origin.Function != "update" {
		t.Errorf("origin %v, want update in %s", fd.Origin, originFile)
	}
	if fd.Evidence["cause"] != CauseKVCache || !strings.Contains(fd.Fix, "Evict finished sessions") || !strings.Contains(fd.Fix, "bound the cache") {
		t.Errorf("cause %v, fix %q", fd.Evidence["cause"], fd.Fix)
	}
	// Keys and values are two lines of the update: two rows, one finding.
	if rows := fd.Evidence["origins"].([]string); len(rows) != 2 {
		t.Errorf("origins %q, want the keys' and the values' torch.cat", rows)
	}
}

// TestDepthEvalGraph: evaluation outside torch.no_grad() keeps
// out.logits[:, -1] each step. The leak is one finding at evaluate's model
// call, spread over many lines of the model's forward (the activations the
// kept graph holds), named a retained autograd graph; with the inputs the
// graph keeps (make_batch), the growth per step is torch's own.
func TestDepthEvalGraph(t *testing.T) {
	want := depthExpected(t, "depth_eval_graph")
	perStep := expNum(t, want, "leak_bytes_per_step")
	callLine := uint64(expNum(t, want, "callsite", "line"))
	lmHead := uint64(expNum(t, want, "origin_logits", "line"))

	sn, tl := stepsScenario(t, filepath.Join(scenarioDir, "depth_eval_graph", "step4", "eval_rank0_pid696.pickle.gz"))
	f := testFilter(t)
	fds := Leak(sn, tl, DetectSteps(sn, tl, f), f).Findings()
	if len(fds) != 2 {
		t.Fatalf("%d leak findings, want evaluate's and make_batch's", len(fds))
	}
	fd := fds[0]
	if fd.Callsite == nil || fd.Callsite.Function != "evaluate" || fd.Callsite.Line != callLine {
		t.Fatalf("callsite %v, want evaluate:%d", fd.Callsite, callLine)
	}
	if fds[1].Callsite == nil || fds[1].Callsite.Function != "make_batch" {
		t.Errorf("second leak at %v, want make_batch (the input ids the graph keeps)", fds[1].Callsite)
	}
	if got := fd.BytesPerStep + fds[1].BytesPerStep; got != perStep {
		t.Errorf("%d + %d bytes per step, want torch's %d", fd.BytesPerStep, fds[1].BytesPerStep, perStep)
	}
	if fd.Origin == nil || fd.Origin.Line != lmHead || !strings.HasSuffix(fd.Origin.File, "modeling_llama.py") {
		t.Errorf("origin %v, want the LM head, modeling_llama.py:%d", fd.Origin, lmHead)
	}
	if fd.Evidence["cause"] != CauseRetainedGraph || !strings.Contains(fd.Fix, "torch.no_grad()") || !strings.Contains(fd.Fix, ".detach()") {
		t.Errorf("cause %v, fix %q", fd.Evidence["cause"], fd.Fix)
	}
	if rows := fd.Evidence["origins"].([]string); len(rows) < minGraphOrigins {
		t.Errorf("origins %q, want the forward's many lines", rows)
	}
}

// TestFSDPBackwardHooks: FSDP2 on one GPU (testdata/breakdown/fsdp_train,
// stacks="all", H100). Its post-backward hook allocates the reduce-scatter
// buffers on the autograd engine's thread, in torch's Python code: they
// belong to the backward() line, in FSDP's allocate, not to "code with only
// library frames".
func TestFSDPBackwardHooks(t *testing.T) {
	const script = "testdata/breakdown/record_truth.py"
	b, err := os.ReadFile(filepath.Join("..", script))
	if err != nil {
		t.Fatal(err)
	}
	backwardLine := uint64(slices.IndexFunc(strings.Split(string(b), "\n"), func(l string) bool {
		return strings.TrimSpace(l) == "model(xb).pow(2).mean().backward()"
	}) + 1)
	sn, tl := stepsScenario(t, filepath.Join("testdata", "breakdown", "out", "fsdp_train.pickle.gz"))
	r := Peak(sn, tl, testFilter(t))
	var hooked int
	for _, g := range append(r.Transient, r.Persistent...) {
		if g.Site.Reason == callsite.ReasonLibraryOnly {
			t.Errorf("%d B in %d blocks left at %s", g.Bytes, g.Count, g.Site)
		}
		bw := g.Backward
		if bw == nil || !bw.Hook.Known() {
			continue
		}
		hooked += g.Count
		if bw.Site.Frame.Line != backwardLine || bw.Hook.Frame.Name != "allocate" || !strings.HasSuffix(bw.Hook.Frame.Filename, "_fsdp_collectives.py") {
			t.Errorf("hook group %s, want allocate (_fsdp_collectives.py) during backward() at line %d", bw, backwardLine)
		}
	}
	// One reduce-scatter buffer per FSDP unit: four layers.
	if hooked != 4 {
		t.Errorf("%d reduce-scatter blocks at the peak placed in FSDP's hook, want 4", hooked)
	}
}

// TestOptimizerForeachPeak: the peak of peak_optimizer (8 Linear 4096x4096
// layers, AdamW, H100) is AdamW's foreach update under opt.step(). The
// cause is named at that line, and the peak it predicts without the foreach
// temporaries is what torch measured for the same run with fused=True.
func TestOptimizerForeachPeak(t *testing.T) {
	want := depthExpected(t, "peak_optimizer")
	sn, tl := stepsScenario(t, filepath.Join(scenarioDir, "peak_optimizer", "peak_optimizer.pickle.gz"))
	r := Peak(sn, tl, testFilter(t))
	if r.Allocated.Bytes != expNum(t, want, "peak_allocated_foreach") {
		t.Errorf("peak %d, want torch's %d", r.Allocated.Bytes, expNum(t, want, "peak_allocated_foreach"))
	}
	fds := r.Findings()
	if len(fds) != 1 || fds[0].Evidence["cause"] != CauseOptimizerForeach {
		t.Fatalf("findings %+v, want one peak named the optimizer's foreach update", fds)
	}
	fd := fds[0]
	if fd.Callsite == nil || fd.Callsite.Line != uint64(expNum(t, want, "callsite", "line")) {
		t.Errorf("callsite %v, want opt.step() at line %d", fd.Callsite, expNum(t, want, "callsite", "line"))
	}
	fused := expNum(t, want, "peak_allocated_fused")
	predicted := r.Line.PeakWithout.Bytes
	if d := float64(predicted-fused) / float64(fused); d > 0.01 || d < -0.01 {
		t.Errorf("predicted peak without the foreach temporaries %d, torch's with fused=True %d (%.2f%%)", predicted, fused, 100*d)
	}
	if !strings.Contains(fd.Fix, "fused=True") || !strings.Contains(fd.Fix, units.Bytes(predicted).String()) {
		t.Errorf("fix %q", fd.Fix)
	}
}
