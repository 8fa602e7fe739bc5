package callsite

import (
	"regexp"
	"strings"

	"github.com/vramscope/vramscope/snapshot"
)

// torchNameParts and torchFileParts are the frame filter of
// torch/cuda/_memory_viz.py and MemoryViz.js (research note, section 2):
// unwinder, interpreter and dispatcher frames.
var torchNameParts = []string{
	"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp",
	"__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
}

var torchFileParts = []string{
	"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
	"Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
	"cpython/abstract.h",
}

// libraryFileParts are installed Python code: torch itself (also when run
// from a source checkout), any installed package, and the interpreter's
// frozen modules.
var libraryFileParts = []string{"/torch/", "/site-packages/", "/dist-packages/", "<frozen "}

// stdlibFile matches the standard library and inductor's generated code
// (/tmp/torchinductor_<user>/...), which is no line a person wrote. The
// standard library is /usr/lib/python3.12/threading.py on Linux; on Windows
// it is the Lib (or lib) folder of a Python install, whose folder has no
// version (C:/Python312/Lib, .../Programs/Python/Python311/Lib, uv's
// .../cpython-3.10.19-windows-x86_64-none/lib, conda's anaconda3/Lib and
// anaconda3/envs/NAME/Lib), while a project's own lib folder is user code.
var stdlibFile = regexp.MustCompile(`/lib/python\d[\d.]*/|(?i:/(python\d+|cpython-[^/]*|anaconda\d*|miniconda\d*|miniforge\d*|mambaforge|envs/[^/]+)/lib/)|torchinductor_|/inductor_cache/`)

// Library reports whether a default rule skips fr: everything but the
// user's own Python code. Windows paths are read with / for \.
func Library(fr snapshot.Frame) bool {
	if native(fr) {
		return true
	}
	// torch matches "_start" as a substring; that would also skip user
	// functions such as restart_step, so only the C entry point itself is.
	if fr.Name == "_start" {
		return true
	}
	for _, p := range torchNameParts {
		if strings.Contains(fr.Name, p) {
			return true
		}
	}
	file := strings.ReplaceAll(fr.Filename, `\`, "/")
	for _, p := range torchFileParts {
		if strings.Contains(file, p) {
			return true
		}
	}
	for _, p := range libraryFileParts {
		if strings.Contains(file, p) {
			return true
		}
	}
	return stdlibFile.MatchString(file)
}

// captureNameParts name the C++ frames that every stacks="all" stack starts
// or ends with whatever allocated: the stack capture itself, the caching
// allocator, and the thread's start. None of them is a place to look at.
var captureNameParts = []string{
	"torch::unwind::", "torch::CapturedTraceback::", "gather_with_cpp",
	"c10::cuda::CUDACachingAllocator::", "c10::CachingDeviceAllocator::",
	"execute_native_thread_routine", "start_thread", "__libc_start_main", "pthread_",
}

// capture reports whether fr is stack-capture, allocator or thread-start
// machinery.
func capture(fr snapshot.Frame) bool {
	if fr.Name == "clone" || fr.Name == "_start" {
		return true
	}
	for _, p := range captureNameParts {
		if strings.Contains(fr.Name, p) {
			return true
		}
	}
	return false
}

// BackwardFile stands in for the file of a callsite that is an autograd
// node run by the backward pass: such an allocation has no Python frame,
// and the node (DivBackward0, AccumulateGrad) is the most precise place
// there is. The callsite prints as "DivBackward0 (during backward)".
const BackwardFile = "during backward"

// autogradNode matches the apply of a node of the autograd graph, generated
// (torch::autograd::generated::DivBackward0::apply) or not
// (torch::autograd::AccumulateGrad::apply). PyNode, a Python
// autograd.Function, is left out: its own Python frames name it better.
var autogradNode = regexp.MustCompile(`^torch::autograd::(?:generated::)?([A-Za-z_]\w*)::apply\(`)

// nodeName returns the autograd node fr applies, or "".
func nodeName(fr snapshot.Frame) string {
	m := autogradNode.FindStringSubmatch(fr.Name)
	if m == nil || m[1] == "PyNode" {
		return ""
	}
	return m[1]
}

// opCall matches the dispatcher's entry to an ATen operator
// (at::_ops::bmm::call): in a stack of C++ frames alone, the operator that
// allocated.
var opCall = regexp.MustCompile(`^at::_ops::\w+::call\(`)

// engineFrame reports whether fr is the autograd engine running a node of
// the backward pass.
func engineFrame(fr snapshot.Frame) bool {
	return strings.HasPrefix(fr.Name, "torch::autograd::Engine::evaluate_function")
}
