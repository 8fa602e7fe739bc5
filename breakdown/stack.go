package breakdown

import (
	"strings"

	"github.com/vramscope/vramscope/diagnose"

	"github.com/vramscope/vramscope/snapshot"
)

// kind is what stage A makes of a stack: a category outright, or a family
// whose category stage B decides from the block's lifetime.
type kind uint8

const (
	kindNone          kind = iota
	kindWorkspace          // cuBLAS / cuBLASLt workspace
	kindKVCache            // a serving engine's or transformers' cache
	kindParameter          // module _apply, checkpoint loaders, FSDP shards
	kindOptimizer          // torch.optim: state if it outlives the step, else temporary
	kindCommunication      // torch.distributed: gradient if it is FSDP's sharded grad
)

// stackRule is one stage-A rule: frames it matches, innermost first.
type stackRule struct {
	id    string
	kind  kind
	match func(fr snapshot.Frame, file string) bool
}

// in reports whether file (with / separators) ends with one of suffixes.
func in(file string, suffixes ...string) bool {
	for _, s := range suffixes {
		if strings.HasSuffix(file, s) {
			return true
		}
	}
	return false
}

// named reports whether fr's function is one of names.
func named(fr snapshot.Frame, names ...string) bool {
	for _, n := range names {
		if fr.Name == n {
			return true
		}
	}
	return false
}

// stackRules are tried in order; the first whose frame occurs anywhere in
// the stack decides, so a specific rule (the cuBLAS workspace under a
// Linear's forward, a DTensor frame under FSDP's shard init) wins over a
// broad one whatever their depths.
var stackRules = []stackRule{
	{"stack.cublas_workspace", kindWorkspace, func(fr snapshot.Frame, _ string) bool {
		return strings.HasPrefix(fr.Name, "at::cuda::setWorkspaceForHandle") ||
			strings.HasPrefix(fr.Name, "at::cuda::getCUDABlasLtWorkspace") ||
			strings.HasPrefix(fr.Name, "at::cuda::getCurrentCUDABlasLtHandle")
	}},
	{"stack.kv_cache", kindKVCache, func(fr snapshot.Frame, file string) bool {
		switch {
		case in(file, "transformers/cache_utils.py"):
			return true
		case in(file, "vllm/v1/worker/gpu_model_runner.py", "vllm/worker/cache_engine.py"):
			return strings.Contains(fr.Name, "kv_cache") || named(fr, "_allocate_kv_cache")
		case in(file, "sglang/srt/mem_cache/memory_pool.py"):
			return named(fr, "_create_buffers", "create_buffer", "__init__")
		}
		return false
	}},
	{"stack.fsdp_shard", kindParameter, func(fr snapshot.Frame, file string) bool {
		return strings.Contains(file, "torch/distributed/") && in(file, "_fsdp_param.py") && named(fr, "_init_sharded_param", "_init_sharded_post_forward_param")
	}},
	{"stack.module_apply", kindParameter, func(fr snapshot.Frame, file string) bool {
		return in(file, "torch/nn/modules/module.py") &&
			named(fr, "_apply", "convert", "to", "cuda", "to_empty", "_load_from_state_dict", "load_state_dict", "_register_load_state_dict_pre_hook")
	}},
	{"stack.checkpoint_load", kindParameter, func(fr snapshot.Frame, file string) bool {
		switch {
		case in(file, "transformers/core_model_loading.py"):
			return named(fr, "_materialize_copy", "convert_and_load_state_dict_in_model")
		case in(file, "transformers/modeling_utils.py"):
			return named(fr, "_load_state_dict_into_meta_model", "_load_pretrained_model", "load_state_dict")
		case in(file, "accelerate/utils/modeling.py"):
			return named(fr, "set_module_tensor_to_device")
		case in(file, "safetensors/torch.py"):
			return named(fr, "load_file", "load")
		}
		return named(fr, "reset_parameters") && strings.Contains(file, "torch/nn/modules/")
	}},
	{"stack.optimizer", kindOptimizer, func(fr snapshot.Frame, file string) bool {
		return strings.Contains(file, "torch/optim/") && !named(fr, "zero_grad")
	}},
	{"stack.distributed", kindCommunication, func(fr snapshot.Frame, file string) bool {
		return strings.Contains(file, "torch/distributed/") ||
			strings.HasPrefix(fr.Name, "c10d::") || strings.Contains(fr.Name, "ProcessGroupNCCL")
	}},
}

// phase is where in a step an event's stack places it.
type phase uint8

const (
	phaseNone      phase = iota // no frames (or none recorded)
	phaseTop                    // Python frames outside the others: the training loop
	phaseForward                // inside a module's forward
	phaseBackward               // inside backward(): the engine's thread or its entry
	phaseZeroGrad               // inside Optimizer.zero_grad
	phaseOptimizer              // inside torch.optim
)

// stackInfo is what stage A and the phase scan read off one stack.
type stackInfo struct {
	rule  *stackRule
	frame snapshot.Frame // the frame the rule matched
	phase phase
	// initGroup: the optimizer's lazy state creation (_init_group), state
	// whatever its lifetime.
	initGroup bool
	// modules are the forward frames, outermost first: the frames that
	// nn.Module._call_impl called (a decorator's wrapper skipped to the
	// forward it wraps).
	modules []snapshot.Frame
}

func slash(file string) string { return strings.ReplaceAll(file, `\`, "/") }

// readStack computes a stack's stackInfo.
func readStack(sn *snapshot.Snapshot, id snapshot.StackID) stackInfo {
	var si stackInfo
	if id == snapshot.NoStack {
		return si
	}
	ids := sn.Stack(id)
	frames := make([]snapshot.Frame, len(ids))
	files := make([]string, len(ids))
	for i, fid := range ids {
		frames[i] = sn.Frames[fid]
		files[i] = slash(frames[i].Filename)
	}
rules:
	for r := range stackRules {
		for i := range frames {
			if stackRules[r].match(frames[i], files[i]) {
				si.rule, si.frame = &stackRules[r], frames[i]
				break rules
			}
		}
	}
	python, forward, backward, zero, optim := false, false, false, false, false
	for i, fr := range frames {
		file := files[i]
		if strings.HasSuffix(file, ".py") {
			python = true
		}
		switch {
		case moduleCall(fr, file):
			forward = true
			if m, ok := forwardFrame(frames, files, i); ok {
				si.modules = append(si.modules, m)
			}
		case backwardFrame(fr):
			backward = true
		case named(fr, "zero_grad") && strings.Contains(file, "torch/optim/"):
			zero = true
		case strings.Contains(file, "torch/optim/"):
			optim = true
			if fr.Name == "_init_group" {
				si.initGroup = true
			}
		}
	}
	// Outermost first.
	for i, j := 0, len(si.modules)-1; i < j; i, j = i+1, j-1 {
		si.modules[i], si.modules[j] = si.modules[j], si.modules[i]
	}
	switch {
	case backward:
		si.phase = phaseBackward
	case zero:
		si.phase = phaseZeroGrad
	case optim:
		si.phase = phaseOptimizer
	case forward:
		si.phase = phaseForward
	case python:
		si.phase = phaseTop
	}
	return si
}

// moduleCall reports whether fr is nn.Module's call machinery.
func moduleCall(fr snapshot.Frame, file string) bool {
	return fr.Name == "_call_impl" && in(file, "torch/nn/modules/module.py")
}

// forwardFrame returns the module forward that the _call_impl frame at i
// called: the nearest inner frame named forward before the next module
// call, else the frame just inside it.
func forwardFrame(frames []snapshot.Frame, files []string, i int) (snapshot.Frame, bool) {
	for j := i - 1; j >= 0; j-- {
		if moduleCall(frames[j], files[j]) || (frames[j].Name == "_wrapped_call_impl" && in(files[j], "torch/nn/modules/module.py")) {
			break
		}
		if frames[j].Name == "forward" {
			return frames[j], true
		}
	}
	if i > 0 && strings.HasSuffix(files[i-1], ".py") {
		return frames[i-1], true
	}
	return snapshot.Frame{}, false
}

// backwardFrame reports whether fr runs a backward pass: torch's Python
// entry points, or (stacks="all") the autograd engine and its nodes.
func backwardFrame(fr snapshot.Frame) bool {
	return diagnose.BackwardEntry(fr) != "" ||
		strings.HasPrefix(fr.Name, "torch::autograd::Engine::") ||
		strings.HasPrefix(fr.Name, "torch::autograd::GraphTask::") ||
		strings.HasPrefix(fr.Name, "torch::autograd::generated::") ||
		strings.HasPrefix(fr.Name, "torch::autograd::AccumulateGrad::")
}
