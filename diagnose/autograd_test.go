package diagnose

import (
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Frames of a training step, outermost first as a program calls them.
var (
	trainLoss     = snapshot.Frame{Name: "train_step", Filename: "/home/u/train.py", Line: 75}
	trainBackward = snapshot.Frame{Name: "train_step", Filename: "/home/u/train.py", Line: 76}
	trainOpt      = snapshot.Frame{Name: "train_step", Filename: "/home/u/train.py", Line: 77}
	tensorBwd     = snapshot.Frame{Name: "backward", Filename: "/venv/lib/python3.12/site-packages/torch/_tensor.py", Line: 625}
	autogradBwd   = snapshot.Frame{Name: "backward", Filename: "/venv/lib/python3.12/site-packages/torch/autograd/__init__.py", Line: 354}
	makeGrads     = snapshot.Frame{Name: "_make_grads", Filename: "/venv/lib/python3.12/site-packages/torch/autograd/__init__.py", Line: 220}
	autogradGrad  = snapshot.Frame{Name: "grad", Filename: "/venv/lib/python3.12/site-packages/torch/autograd/__init__.py", Line: 496}
	runBackward   = snapshot.Frame{Name: "_engine_run_backward", Filename: "/venv/lib/python3.12/site-packages/torch/autograd/graph.py", Line: 841}
	// FSDP2's post-backward, run by the engine's thread through a custom
	// Function's backward: its reduce-scatter buffer has library Python
	// frames only, outermost torch's apply (stacks="python") or, with
	// stacks="all", the engine's C++ thread loop above them.
	functionApply = snapshot.Frame{Name: "apply", Filename: "/venv/lib/python3.12/site-packages/torch/autograd/function.py", Line: 317}
	fsdpBackward  = snapshot.Frame{Name: "backward", Filename: "/venv/lib/python3.12/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py", Line: 902}
	fsdpReduce    = snapshot.Frame{Name: "foreach_reduce", Filename: "/venv/lib/python3.12/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", Line: 522}
	fsdpAllocate  = snapshot.Frame{Name: "allocate", Filename: "/venv/lib/python3.12/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", Line: 59}
	engineLoop    = snapshot.Frame{Name: "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", Filename: "??"}
	// A library's code on the main thread, outside any backward: not the
	// engine's, whatever its frames.
	hubLoad = snapshot.Frame{Name: "load_file", Filename: "/venv/lib/python3.12/site-packages/safetensors/torch.py", Line: 311}
)

// engineBlocks allocates n blocks of size with an empty stack, as the
// autograd engine's thread does with stacks="python".
func (s *scriptTrace) engineBlocks(n int, size uint64) {
	for range n {
		s.allocStack(size)
	}
}

// TestBackwardAttribution: blocks with an empty stack are placed at the
// backward() call the main thread is in around them, surely when its last
// event before them is inside the call, less surely when only its next
// one after them is; with neither, they keep the empty-stack reason.
func TestBackwardAttribution(t *testing.T) {
	tests := []struct {
		name       string
		script     func(s *scriptTrace)
		api        string // "" for no attribution
		line       uint64
		confidence string
		hook       string // the engine's library code that allocated, if any
	}{
		{"loss.backward() makes the first gradient on the main thread", func(s *scriptTrace) {
			s.allocStack(1<<20, trainLoss)
			s.allocStack(512, trainBackward, tensorBwd, autogradBwd, makeGrads)
			s.engineBlocks(3, 8<<20)
			s.allocStack(4096, trainOpt)
		}, "backward()", 76, "high", ""},
		{"FSDP's reduce-scatter buffer, stacks=python: a custom Function's backward on the engine's thread", func(s *scriptTrace) {
			s.allocStack(512, trainBackward, tensorBwd, autogradBwd, makeGrads)
			s.engineBlocks(2, 1<<20)
			s.allocStack(8<<20, functionApply, fsdpBackward, fsdpReduce, fsdpAllocate)
			s.allocStack(4096, trainOpt)
		}, "backward()", 76, "high", "allocate"},
		{"FSDP's reduce-scatter buffer, stacks=all: the engine's thread loop is on the stack", func(s *scriptTrace) {
			s.allocStack(512, trainBackward, tensorBwd, autogradBwd, makeGrads)
			s.allocStack(8<<20, engineLoop, fsdpBackward, fsdpReduce, fsdpAllocate)
		}, "backward()", 76, "high", "allocate"},
		{"library code on the main thread is not the engine's", func(s *scriptTrace) {
			s.allocStack(512, trainBackward, tensorBwd, autogradBwd, makeGrads)
			s.allocStack(8<<20, hubLoad)
		}, "", 0, "", ""},
		{"torch.autograd.grad() names grad, not the engine run inside it", func(s *scriptTrace) {
			s.allocStack(512, trainBackward, autogradGrad, runBackward)
			s.engineBlocks(2, 8<<20)
		}, "torch.autograd.grad()", 76, "high", ""},
		{"a gradient passed in: only the free after the engine is inside the call", func(s *scriptTrace) {
			a := s.allocStack(1<<20, trainLoss)
			s.engineBlocks(2, 8<<20)
			s.push(snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: a, Size: 1 << 20, Stack: stackOfFrames(s, trainBackward, tensorBwd, autogradBwd, runBackward)})
		}, "backward()", 76, "medium", ""},
		{"no backward around: the reason stays", func(s *scriptTrace) {
			s.allocStack(1<<20, trainLoss)
			s.engineBlocks(2, 8<<20)
			s.allocStack(4096, trainOpt)
		}, "", 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScriptTrace()
			tt.script(s)
			sn := s.build()
			tl, err := replay.Device(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			f := testFilter(t)
			pl := newPlacer(sn, tl, f)
			found := 0
			for k := range tl.NumAllocations() {
				if tl.Allocation(k).Size != 8<<20 {
					continue
				}
				found++
				p := pl.alloc(k)
				switch {
				case tt.api == "" && (p.Backward != nil || p.Site.Known()):
					t.Errorf("block %d placed at %s, want its own reason", k, p)
				case tt.api != "" && (p.Backward == nil || p.Backward.API != tt.api || p.Site.Frame.Line != tt.line || p.Backward.Confidence != tt.confidence):
					t.Errorf("block %d placed at %s (%+v), want %s at line %d, %s", k, p, p.Backward, tt.api, tt.line, tt.confidence)
				case tt.api != "" && p.Backward.Hook.Frame.Name != tt.hook:
					t.Errorf("block %d placed at %s: hook %q, want %q", k, p, p.Backward.Hook.Frame.Name, tt.hook)
				}
			}
			if found == 0 {
				t.Fatal("no engine blocks")
			}
			// InCall, given the stacks of the events with Python frames
			// around a run, says what During says of each of its events.
			scan, tr := NewBackwardScan(sn, tl.Trace, f), tl.Trace
			for i := range tr.Len() {
				stack := tr.At(i).Stack
				if scan.HasPython(stack) {
					continue
				}
				before, after := snapshot.NoStack, snapshot.NoStack
				for lo := i - 1; lo >= 0 && before == snapshot.NoStack; lo-- {
					if s := tr.At(lo).Stack; scan.HasPython(s) {
						before = s
					}
				}
				for hi := i + 1; hi < tr.Len() && after == snapshot.NoStack; hi++ {
					if s := tr.At(hi).Stack; scan.HasPython(s) {
						after = s
					}
				}
				if in, during := scan.InCall(before, after), scan.During(i, stack); in != (during != nil) {
					t.Errorf("event %d: InCall %v, During %v", i, in, during)
				}
			}
		})
	}
}

// stackOfFrames interns a stack of frames given outermost first.
func stackOfFrames(s *scriptTrace, frames ...snapshot.Frame) snapshot.StackID {
	ids := make([]snapshot.FrameID, len(frames))
	for i, fr := range frames {
		ids[len(frames)-1-i] = s.sn.InternFrame(fr)
	}
	return s.sn.InternStack(ids)
}

// TestLeakCause names a leak from the lines below its callsite.
func TestLeakCause(t *testing.T) {
	origin := func(name, file string, line uint64) callsite.Origin {
		fr := snapshot.Frame{Name: name, Filename: file, Line: line}
		return callsite.Origin{Frame: fr, Via: []snapshot.Frame{fr}}
	}
	const hf = "/venv/lib/python3.12/site-packages/transformers/"
	tests := []struct {
		name  string
		parts []LeakPart
		want  string
	}{
		{"DynamicCache update", []LeakPart{{origin("update", hf+"cache_utils.py", 147), 8 << 20}, {origin("update", hf+"cache_utils.py", 146), 8 << 20}}, CauseKVCache},
		{"many forward lines", []LeakPart{
			{origin("forward", hf+"models/llama/modeling_llama.py", 480), 250 << 20},
			{origin("forward", hf+"models/llama/modeling_llama.py", 175), 143 << 20},
			{origin("forward", hf+"activations.py", 103), 48 << 20},
		}, CauseRetainedGraph},
		{"a kept output is one line", []LeakPart{{origin("forward", hf+"models/llama/modeling_llama.py", 480), 250 << 20}}, CauseKeptOutput},
		{"an output beside the user's own tensors", []LeakPart{{origin("forward", hf+"models/llama/modeling_llama.py", 480), 250 << 20}, {callsite.Origin{}, 1 << 20}}, ""},
		{"the user's own lines", []LeakPart{{callsite.Origin{}, 1 << 20}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := LeakCause(tt.parts)
			switch {
			case tt.want == "" && c != nil:
				t.Errorf("cause %s, want none", c.Name)
			case tt.want != "" && (c == nil || c.Name != tt.want || len(c.Evidence) == 0):
				t.Errorf("cause %+v, want %s with evidence", c, tt.want)
			}
		})
	}
}
