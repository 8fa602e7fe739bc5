package callsite

import (
	"github.com/vramscope/vramscope/internal/testutil"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

func TestLibrary(t *testing.T) {
	tests := []struct {
		name string
		fr   snapshot.Frame
		want bool
	}{
		{"user script", snapshot.Frame{Name: "compute_logprobs", Filename: "/work/app/train.py", Line: 40}, false},
		{"relative user file", snapshot.Frame{Name: "main", Filename: "train.py", Line: 3}, false},
		{"user function named like the C entry", snapshot.Frame{Name: "restart_start", Filename: "/app/x.py", Line: 1}, false},
		{"torch", snapshot.Frame{Name: "forward", Filename: "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", Line: 125}, true},
		{"torch source checkout", snapshot.Frame{Name: "_call_impl", Filename: "/src/pytorch/torch/nn/modules/module.py", Line: 1}, true},
		{"site-packages", snapshot.Frame{Name: "generate", Filename: "/venv/lib/python3.12/site-packages/transformers/generation/utils.py", Line: 9}, true},
		{"stdlib", snapshot.Frame{Name: "run", Filename: "/usr/lib/python3.12/threading.py", Line: 1010}, true},
		{"frozen", snapshot.Frame{Name: "_call_with_frames_removed", Filename: "<frozen importlib._bootstrap>", Line: 488}, true},
		{"inductor cache", snapshot.Frame{Name: "call", Filename: "/tmp/torchinductor_root/ab/cabc.py", Line: 77}, true},
		{"C++ no file", snapshot.Frame{Name: "at::native::empty_cuda", Filename: "", Line: 0}, true},
		{"C++ unknown file", snapshot.Frame{Name: "torch::unwind::unwind()", Filename: "??", Line: 0}, true},
		{"C++ source", snapshot.Frame{Name: "mm", Filename: "VariableType_3.cpp", Line: 0}, true},
		{"CUDA source", snapshot.Frame{Name: "k", Filename: "kernel.cu", Line: 12}, true},
		{"shared library", snapshot.Frame{Name: "f", Filename: "/usr/lib/libtorch_cuda.so", Line: 5}, true},
		{"CPython eval", snapshot.Frame{Name: "_PyEval_EvalFrameDefault", Filename: "Python/ceval.c", Line: 4}, true},
		{"dispatcher", snapshot.Frame{Name: "wrapper", Filename: "build/aten/src/ATen/RegisterCUDA.py", Line: 4}, true},
		{"C entry point", snapshot.Frame{Name: "_start", Filename: "start.S", Line: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Library(tt.fr); got != tt.want {
				t.Errorf("Library(%v) = %v, want %v", tt.fr, got, tt.want)
			}
		})
	}
}

func TestFocusIgnore(t *testing.T) {
	hf := snapshot.Frame{Name: "generate", Filename: "/venv/lib/python3.12/site-packages/transformers/generation/utils.py", Line: 9}
	mine := snapshot.Frame{Name: "alloc_helper", Filename: "/app/util/mem.py", Line: 3}
	tests := []struct {
		focus, ignore string
		fr            snapshot.Frame
		want          bool
	}{
		{"", "", hf, false},
		{"transformers/", "", hf, true},
		{"^generate$", "", hf, true},
		{"", "", mine, true},
		{"", "util/mem", mine, false},
		{"", "alloc_helper", mine, false},
		{"transformers/", "generation/", hf, false}, // ignore wins
	}
	for _, tt := range tests {
		f, err := NewFilter(tt.focus, tt.ignore)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.User(tt.fr); got != tt.want {
			t.Errorf("focus %q ignore %q: User(%v) = %v, want %v", tt.focus, tt.ignore, tt.fr, got, tt.want)
		}
	}
	if _, err := NewFilter("(", ""); err == nil || !strings.Contains(err.Error(), "focus") {
		t.Errorf("bad focus pattern: err = %v, want a focus error", err)
	}
	if _, err := NewFilter("", "["); err == nil || !strings.Contains(err.Error(), "ignore") {
		t.Errorf("bad ignore pattern: err = %v, want an ignore error", err)
	}
}

func load(t *testing.T, path string) *snapshot.Snapshot {
	return testutil.Snapshot(t, filepath.Join("..", path))
}

// eventSites returns the callsite function of every trace event with action
// a (all actions when a is ActionUnknown), deduplicated and sorted.
func eventSites(f *Filter, sn *snapshot.Snapshot, a snapshot.Action) []string {
	var out []string
	for _, tr := range sn.Traces {
		for _, e := range tr.All() {
			if a != snapshot.ActionUnknown && e.Action != a {
				continue
			}
			if s := f.Site(sn, e.Stack); s.Known() {
				out = append(out, s.Frame.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestFixtureCulprits(t *testing.T) {
	tests := []struct {
		path    string
		action  snapshot.Action
		culprit string
	}{
		{"snapshot/testdata/format/default.pickle", snapshot.ActionAlloc, "workload"},
		{"testdata/scenarios/out/peak_upcast/peak_upcast.pickle.gz", snapshot.ActionAlloc, "compute_logprobs"},
		{"testdata/scenarios/out/frag_oom/frag_oom.pickle.gz", snapshot.ActionOOM, "allocate_logits_workspace"},
		{"testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz", snapshot.ActionAlloc, "compute_next_token_logits"},
	}
	f, err := NewFilter("", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			sn := load(t, tt.path)
			got := eventSites(f, sn, tt.action)
			if !slices.Contains(got, tt.culprit) {
				t.Errorf("callsites of %v events = %v, want %s among them", tt.action, got, tt.culprit)
			}
			for i := range sn.Frames {
				fr := sn.Frames[i]
				if f.User(fr) && (strings.Contains(fr.Filename, "/torch/") || fr.Filename == "" || fr.Filename == "??") {
					t.Errorf("library frame %v counted as user code", fr)
				}
			}
		})
	}
}

// TestDefaultStacks checks the first user frame of default.pickle's mixed
// Python and C++ stacks, the reasons for stacks without one, and that
// UserFrames and focus agree with Site.
func TestDefaultStacks(t *testing.T) {
	sn := load(t, "snapshot/testdata/format/default.pickle")
	f, _ := NewFilter("", "")
	if s := f.Site(sn, snapshot.NoStack); s.Known() || s.Reason != ReasonNoStack || s.Depth != -1 {
		t.Errorf("NoStack: %+v", s)
	}
	if s := f.Site(sn, snapshot.EmptyStack); s.Known() || s.Reason != ReasonEmptyStack || s.String() != ReasonEmptyStack {
		t.Errorf("EmptyStack: %+v", s)
	}
	noWorkload, _ := NewFilter("", "^workload$")
	gemm, _ := NewFilter("gemm_internal", "")
	checked, gemmHits := 0, 0
	for _, e := range sn.Traces[0].All() {
		if e.Action != snapshot.ActionAlloc || e.Stack <= snapshot.EmptyStack {
			continue
		}
		checked++
		s := f.Site(sn, e.Stack)
		if !s.Known() || s.Frame.Name != "workload" || !strings.HasSuffix(s.Frame.Filename, "gen.py") || s.Depth <= 0 {
			t.Fatalf("Site = %+v, want workload in gen.py below library frames", s)
		}
		if fr := sn.Frames[sn.Stack(e.Stack)[s.Depth]]; fr != s.Frame {
			t.Errorf("Depth %d names %v, not %v", s.Depth, fr, s.Frame)
		}
		user := f.UserFrames(sn, e.Stack, 0)
		if len(user) < 2 || user[0] != s.Frame || user[len(user)-1].Name != "<module>" {
			t.Errorf("UserFrames = %v, want workload ... <module>", user)
		}
		if one := f.UserFrames(sn, e.Stack, 1); len(one) != 1 || one[0] != s.Frame {
			t.Errorf("UserFrames(max 1) = %v", one)
		}
		if s2 := noWorkload.Site(sn, e.Stack); !s2.Known() || s2.Frame.Name != "<module>" {
			t.Errorf("ignoring workload: Site = %+v, want <module>", s2)
		}
		if s3 := gemm.Site(sn, e.Stack); s3.Known() && strings.Contains(s3.Frame.Name, "gemm_internal") {
			gemmHits++
			if s3.Depth >= s.Depth {
				t.Errorf("focus on gemm: %+v should be inside workload (depth < %d)", s3, s.Depth)
			}
		}
	}
	if checked == 0 || gemmHits == 0 {
		t.Fatalf("%d allocs with a stack, %d blamed on gemm with focus: want both > 0", checked, gemmHits)
	}
	everything, _ := NewFilter("", ".")
	for _, e := range sn.Traces[0].All() {
		if e.Stack <= snapshot.EmptyStack {
			continue
		}
		s := everything.Site(sn, e.Stack)
		if s.Known() || s.Reason != ReasonLibraryOnly || s.Depth < 0 || native(s.Frame) {
			t.Errorf("all frames ignored: Site = %+v, want library-only with a Python frame kept", s)
		}
		if !strings.HasPrefix(s.String(), ReasonLibraryOnly+", innermost ") {
			t.Errorf("String() = %q", s.String())
		}
		break
	}
}
