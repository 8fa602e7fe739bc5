// Package breakdown says what a replayed timeline's memory is made of: a
// category (parameter, gradient, optimizer state, activation, ...) and a
// module for every block, each with the rule that decided it and its
// evidence, and tables of the bytes by category, module or callsite at any
// moment of the trace.
//
// Classify labels every block in two stages, after the user's own rules:
//
//   - stage A reads the block's allocation stack, innermost frame first
//     (path suffix and function; with stacks="all" the C++ frames too):
//     module._apply is a parameter, an optimizer's _init_group optimizer
//     state, transformers' cache_utils the KV cache, cuBLAS's
//     setWorkspaceForHandle a workspace, torch.distributed a communication
//     buffer;
//   - stage B reads its lifetime and phase (annotation windows such as
//     Optimizer.step#* and Optimizer.zero_grad#*, the backward() calls the
//     autograd engine's blocks belong to, module forwards): allocated in a
//     forward and freed in backward is an activation, allocated in backward
//     and freed at zero_grad (or kept) a gradient, freed in the phase that
//     made it a temporary, moved to the device before a forward an input.
//
// Blocks of a CUDA graph's private pool are graph_pool, and blocks that
// predate the recording before_recording, never unknown.
package breakdown

// Category is what a block holds, as its snake-case name. The built-in ones
// are the constants below; a user rule may name others.
type Category string

const (
	Parameter       Category = "parameter"
	Buffer          Category = "buffer"
	Gradient        Category = "gradient"
	OptimizerState  Category = "optimizer_state"
	Activation      Category = "activation"
	Temporary       Category = "temporary"
	Input           Category = "input"
	KVCache         Category = "kv_cache"
	Communication   Category = "communication"
	Workspace       Category = "workspace"
	GraphPool       Category = "graph_pool"
	BeforeRecording Category = "before_recording"
	Unknown         Category = "unknown"
)

// builtin lists the built-in categories in display order: what the model
// is first, what a step makes of it next, the rest last.
var builtin = []Category{
	Parameter, Buffer, Gradient, OptimizerState, Activation, Temporary, Input,
	KVCache, Communication, Workspace, GraphPool, BeforeRecording, Unknown,
}

// Categories returns the built-in categories in display order.
func Categories() []Category { return append([]Category(nil), builtin...) }

// Builtin reports whether c is one of the built-in categories.
func (c Category) Builtin() bool {
	for _, b := range builtin {
		if b == c {
			return true
		}
	}
	return false
}

// Title is the category for a sentence: "optimizer state", "KV cache".
func (c Category) Title() string {
	switch c {
	case OptimizerState:
		return "optimizer state"
	case KVCache:
		return "KV cache"
	case GraphPool:
		return "CUDA graph pool"
	case BeforeRecording:
		return "allocated before recording"
	}
	b := []byte(c)
	for i := range b {
		if b[i] == '_' {
			b[i] = ' '
		}
	}
	return string(b)
}

// colours are the categories' fixed colours, the same in every chart
// (report, serve): torch's memory timeline's where it had the category.
var colours = map[Category]string{
	Parameter:       "#1f77b4",
	Buffer:          "#17becf",
	Gradient:        "#2ca02c",
	OptimizerState:  "#9467bd",
	Activation:      "#d62728",
	Temporary:       "#ff7f0e",
	Input:           "#8c564b",
	KVCache:         "#e377c2",
	Communication:   "#bcbd22",
	Workspace:       "#7f7f7f",
	GraphPool:       "#393b79",
	BeforeRecording: "#aec7e8",
	Unknown:         "#c7c7c7",
}

// userColours colour the user's own categories, in the order they appear.
var userColours = []string{"#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1"}

// Colour returns c's fixed colour; a user category gets the k-th of a
// palette that no built-in uses, k its position among the user categories.
func Colour(c Category, k int) string {
	if col, ok := colours[c]; ok {
		return col
	}
	return userColours[k%len(userColours)]
}
